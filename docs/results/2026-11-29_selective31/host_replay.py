"""Where a checkpointed step's host time goes, by phase: forward and backward dispatch (perf_counter around each call,
no sync), the step's wall time (synchronised), the host syncs a step makes (torch.cuda sync debug mode), and the
host's ops of one step by self time (torch.profiler, CPU only: the backward's replay runs on the autograd thread). Usage (repo root, one GPU): python host_replay.py OUT_DIR [model:mode ...]"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F

from parbench.models.build import build_model
from parbench.parallel import activation_checkpoint
from parbench.parallel.model import ParallelModel
from parbench.planner import compose_config

BATCH, SEQ, STEPS = 4, 1024, 6


def one_step(model, optimizer, tokens) -> tuple[float, float, float, float]:
    """(forward dispatch, backward dispatch, optimizer dispatch, wall) seconds of one step."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = F.cross_entropy(model(tokens).flatten(0, 1).float(), tokens.flatten())
    t1 = time.perf_counter()
    loss.backward()
    t2 = time.perf_counter()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    t3 = time.perf_counter()
    torch.cuda.synchronize()
    return t1 - t0, t2 - t1, t3 - t2, time.perf_counter() - t0


def syncs_in_a_step(model, optimizer, tokens) -> int:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        one_step(model, optimizer, tokens)
        torch.cuda.set_sync_debug_mode("default")
    return sum("synchroniz" in str(w.message) for w in caught)


def case(name: str, mode: str, out: Path) -> None:
    cfg = compose_config([f"model={name}", f"workload.activation_checkpointing={mode}", "hardware.gpus_per_node=1"])
    torch.manual_seed(0)
    model = build_model(cfg.model, "cuda")
    model.init_weights()
    if mode != "none":
        activation_checkpoint.apply(ParallelModel([model]), None, cfg)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    tokens = torch.randint(0, cfg.model.vocab, (BATCH, SEQ), device="cuda")
    for _ in range(2):
        one_step(model, optimizer, tokens)
    times = sorted((one_step(model, optimizer, tokens) for _ in range(STEPS)), key=lambda t: t[3])
    fwd, bwd, opt, wall = times[len(times) // 2]
    syncs = syncs_in_a_step(model, optimizer, tokens)
    print(f"{name} {mode}: wall {wall * 1e3:.1f} ms, host forward {fwd * 1e3:.1f}, backward {bwd * 1e3:.1f}, "
          f"optimizer {opt * 1e3:.1f} ms; host syncs a step {syncs}", flush=True)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        one_step(model, optimizer, tokens)
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30, max_name_column_width=60)
    (out / f"host_ops_{name}_{mode}.txt").write_text(table)
    del model, optimizer
    torch.cuda.empty_cache()


def main() -> None:
    out = Path(sys.argv[1])
    for spec in sys.argv[2:]:
        case(*spec.split(":"), out)


if __name__ == "__main__":
    main()
