"""A replayed layer's host cost against what it dispatches, on one GPU host, as cleanly as one host allows: each family
at its real width and 2 x 64 tokens (the host sets the pace), at 2 and 6 layers, in every checkpointing mode, the
cases interleaved over three rounds (a host's drift falls on all of them alike), each the median of 30 steps with
the garbage collector off; and what a layer dispatches on CUDA under bf16 autocast: the forward's torch calls and
aten ops, the backward's aten ops, and the kernels a step launches per layer (torch.profiler's launch calls, the
6-layer step less the 2-layer one). Usage (repo root, one GPU): python host_units.py OUT.json [model ...]"""

from __future__ import annotations

import gc
import json
import statistics
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).parent))
from host_layers import built, counts, host_step_s  # noqa: E402

DEPTHS, MODES, ROUNDS, WARMUP, STEPS = (2, 6), ("none", "selective", "full"), 3, 5, 30
LAUNCHES = ("cudaLaunchKernel", "cuLaunchKernelEx", "cudaLaunchKernelExC", "cuLaunchKernel")


def median_host_s(name: str, layers: int, mode: str) -> float:
    model = built(name, layers, mode)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    tokens = torch.randint(0, 256, (2, 64), device="cuda")
    times = [host_step_s(model, optimizer, tokens) for _ in range(WARMUP + STEPS)][WARMUP:]
    return statistics.median(times)


def launches(name: str, layers: int, mode: str) -> int:
    """Kernel launches of one training step (the optimizer's included)."""
    model = built(name, layers, mode)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    tokens = torch.randint(0, 256, (2, 64), device="cuda")
    host_step_s(model, optimizer, tokens)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        host_step_s(model, optimizer, tokens)
    return sum(e.count for e in prof.key_averages() if e.key in LAUNCHES)


def main() -> None:
    gc.disable()
    out, names = Path(sys.argv[1]), sys.argv[2:]
    record: dict = {}
    for name in names:
        per_layer = [(b - a) / (DEPTHS[1] - DEPTHS[0]) for a, b in zip(counts(name, DEPTHS[0]), counts(name, DEPTHS[1]))]
        record[name] = {"forward_calls": per_layer[0], "forward_ops": per_layer[1], "backward_ops": per_layer[2],
                        "launches": {m: (launches(name, DEPTHS[1], m) - launches(name, DEPTHS[0], m)) / (DEPTHS[1] - DEPTHS[0])
                                     for m in MODES},
                        "host_s": {f"{m}/{d}": [] for m in MODES for d in DEPTHS}}
        gc.collect()
        torch.cuda.empty_cache()
    for round_ in range(ROUNDS):
        for name in names:
            for mode in MODES:
                for depth in DEPTHS:
                    record[name]["host_s"][f"{mode}/{depth}"].append(median_host_s(name, depth, mode))
                    gc.collect()
                    torch.cuda.empty_cache()
        out.write_text(json.dumps(record, indent=1))
        print(f"round {round_ + 1} done", flush=True)
    for name, r in record.items():
        per = {m: (statistics.median(r["host_s"][f"{m}/{DEPTHS[1]}"]) - statistics.median(r["host_s"][f"{m}/{DEPTHS[0]}"]))
               / (DEPTHS[1] - DEPTHS[0]) for m in MODES}
        print(f"{name}: {r['forward_calls']:.0f} calls, {r['forward_ops']:.0f} + {r['backward_ops']:.0f} ops, launches "
              f"{ {m: round(v, 1) for m, v in r['launches'].items()} }; host a layer: none {per['none'] * 1e3:.3f} ms, "
              f"selective {per['selective'] * 1e3:.3f}, full {per['full'] * 1e3:.3f}", flush=True)


if __name__ == "__main__":
    main()
