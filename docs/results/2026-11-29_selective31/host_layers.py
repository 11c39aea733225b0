"""A layer's host dispatch by family and checkpointing mode on one GPU, at a size where the host, not the device, sets
the pace (2 x 64 tokens, the models' real widths): each case at 2 and 4 layers, the difference halved, with the garbage
collector off as the train workload runs it; and what one layer dispatches on CUDA under bf16 autocast: the forward's
torch calls and aten ops, the backward's aten ops. Usage (repo root, one GPU): python host_layers.py [model ...];
HOST_TOKENS=4,1024 for another batch and sequence length."""

from __future__ import annotations

import dataclasses
import gc
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

from parbench.models.build import build_model
from parbench.models.dispatch import CountCalls, CountOps, conf_models
from parbench.parallel.activation_checkpoint import _selective_context

TOKENS = tuple(int(n) for n in os.environ.get("HOST_TOKENS", "2,64").split(","))
WARMUP, STEPS = 5, 30


def built(name: str, layers: int, mode: str) -> torch.nn.Module:
    torch.manual_seed(0)
    model = build_model(dataclasses.replace(conf_models()[name], layers=layers), "cuda")
    model.init_weights()
    if mode != "none":
        context = {"context_fn": _selective_context} if mode == "selective" else {}
        for key, block in list(model.layers.items()):
            model.layers[key] = checkpoint_wrapper(block, preserve_rng_state=False, **context)
    return model


def host_step_s(model: torch.nn.Module, optimizer, tokens: torch.Tensor) -> float:
    torch.cuda.synchronize()
    start = time.perf_counter()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = F.cross_entropy(model(tokens).flatten(0, 1).float(), tokens.flatten())
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    host = time.perf_counter() - start
    torch.cuda.synchronize()
    return host


def median_host_s(name: str, layers: int, mode: str) -> float:
    model = built(name, layers, mode)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    tokens = torch.randint(0, 256, TOKENS, device="cuda")
    times = [host_step_s(model, optimizer, tokens) for _ in range(WARMUP + STEPS)][WARMUP:]
    return statistics.median(times)


def counts(name: str, layers: int) -> tuple[int, int, int]:
    """(forward calls, forward aten ops, backward aten ops) of one step."""
    model = built(name, layers, "none")
    tokens = torch.randint(0, 256, TOKENS, device="cuda")
    with CountCalls() as calls, CountOps() as ops, torch.autocast("cuda", dtype=torch.bfloat16):
        loss = F.cross_entropy(model(tokens).flatten(0, 1).float(), tokens.flatten())
    with CountOps() as backward:
        loss.backward()
    return calls.count, ops.count, backward.count


def main() -> None:
    gc.disable()
    for name in sys.argv[1:]:
        per_layer = [b - a for a, b in zip(counts(name, 2), counts(name, 4))]
        calls, fwd_ops, bwd_ops = (n / 2 for n in per_layer)
        host = {mode: (median_host_s(name, 4, mode) - median_host_s(name, 2, mode)) / 2 for mode in ("none", "selective", "full")}
        print(f"{name}: a layer dispatches {calls:.0f} forward calls, {fwd_ops:.0f} forward aten ops, {bwd_ops:.0f} backward "
              f"aten ops; host a layer: none {host['none'] * 1e3:.3f} ms, selective {host['selective'] * 1e3:.3f}, "
              f"full {host['full'] * 1e3:.3f}", flush=True)
        gc.collect()
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
