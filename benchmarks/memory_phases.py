"""Where a one-GPU training step's memory goes, phase by phase, beside the model's terms (issue 31).

    python benchmarks/memory_phases.py "model=gpt2_xl workload.seq_len=1024 workload.activation_checkpointing=full" ...

Each argument is one case (Hydra overrides on hardware=h100_sxm, one GPU, parallel=dp: no DDP wrapper, as
parbench runs it). The step is parbench's own: its model, its checkpointing and compile wrappers, its loss,
bf16 autocast around forward and backward, fused AdamW. After two warm-up steps it prints the allocated
memory after the forward, after the loss, the peak in backward, what leaving autocast frees (its cache of
the weights' casts, and the logits), and the optimizer's peak; then the model's terms for the case."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import torch

from parbench.config.schema import Config
from parbench.models.build import build_model
from parbench.parallel.activation_checkpoint import apply as checkpoint_blocks
from parbench.parallel.compile import apply as compile_blocks
from parbench.parallel.model import ParallelModel
from parbench.planner import compose_config
from parbench.predict import predict
from parbench.prepare import validate

GB = 1e9
STEPS = 3


def allocated() -> float:
    return torch.cuda.memory_allocated() / GB


def peak_since_reset() -> float:
    peak = torch.cuda.max_memory_allocated() / GB
    torch.cuda.reset_peak_memory_stats()
    return peak


def phases(cfg: Config) -> dict[str, float]:
    """The last of STEPS steps' allocated memory at each phase, GB."""
    w = cfg.workload
    torch.manual_seed(0)
    model = build_model(cfg.model, "cuda")
    pmodel = ParallelModel(parts=[model])
    if w.activation_checkpointing != "none":
        checkpoint_blocks(pmodel, None, cfg)
    if w.compile:  # the strategy reads the mesh's tp alone from its environment
        compile_blocks(pmodel, SimpleNamespace(dims=validate(cfg, None)), cfg)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)
    seen: dict[str, float] = {}
    for _ in range(STEPS):
        tokens = torch.randint(0, cfg.model.vocab, (w.batch_size, w.seq_len + 1), device="cuda")
        peak_since_reset()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(tokens[:, :-1])
            seen["after forward"] = allocated()
            loss = pmodel.loss_fn(logits, tokens[:, 1:])
            seen["after loss"], seen["forward peak"] = allocated(), peak_since_reset()
            loss.backward()
            seen["backward peak"], seen["after backward"] = peak_since_reset(), allocated()
            del logits, loss
        seen["freed leaving autocast (cache, logits)"] = seen["after backward"] - allocated()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        seen["optimizer peak"] = peak_since_reset()
    return seen


def main(cases: list[str]) -> None:
    if not torch.cuda.is_available():
        sys.exit("memory_phases.py reads the CUDA allocator's figures: run it on a GPU")
    for case in cases:
        overrides = ["hardware=h100_sxm", "hardware.gpus_per_node=1", "parallel=dp", "workload=train", *case.split()]
        cfg = compose_config(overrides)
        seen = phases(cfg)
        terms = predict(cfg, validate(cfg, None)).memory.as_dict()
        print(case, flush=True)
        print("  measured: " + "  ".join(f"{k} {v:.2f}" for k, v in seen.items()))
        print("  model:    " + "  ".join(f"{k.removesuffix('_gb')} {v:.2f}" for k, v in terms.items()), flush=True)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main(sys.argv[1:])
