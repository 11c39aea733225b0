"""Dense matmul throughput C = A B (A: M x K, B: K x N) per device, against the hardware's peak; with
groups > 0, a grouped GEMM (F.grouped_mm: M rows split over that many K x N matrices, an MoE's experts: evenly, or
with routed_groups as a router spreads tokens).

    matmul_tflops        = 2 M K N / time, time = median over `iters` calls, each bracketed by
                           its own CUDA events (no synchronize between calls), after warm-up;
                           with graph_calls > 0, the mean call of a CUDA graph of that many calls
                           replayed `iters` times (a decode step's GEMMs, as the engine replays them);
                           averaged over ranks (every device runs the same sweep at once)
    matmul_peak_fraction = matmul_tflops / hardware.peak_tflops[dtype]
Inputs rotate through enough (A, B) pairs to exceed `rotate_bytes`, so a small matmul cannot
find its operands in L2 from the previous call. With b_transposed, B is held N x K and the call is
F.linear(A, B), as a model's nn.Linear multiplies by its weight."""

from __future__ import annotations

import itertools
import math
import statistics

import torch
import torch.nn.functional as F

from parbench.config.schema import Config
from parbench.metrics.timing import time_each, time_graphed
from parbench.distenv import DistEnv
from parbench.dtypes import torch_dtype
from parbench.workloads.microbench import plots
from parbench.workloads.microbench.common import copies_to_exceed, rank_mean, shape_name
from parbench.workloads.specs.microbench import parse_size
from parbench.workloads.reporting import StepReporter



def set_matmul_dtype(name: str) -> torch.dtype:
    """The tensor dtype; tf32 runs on fp32 tensors with TF32 tensor cores allowed (fp32 without)."""
    torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
    return torch.float32 if name == "tf32" else torch_dtype(name)


def rotated_inputs(shape: list[int], dtype: torch.dtype, device: torch.device, rotate_bytes: int,
                   b_transposed: bool = False, at_most: int = 0, groups: int = 0):
    """Enough random (A, B) pairs that together they exceed rotate_bytes (at least one; at most
    `at_most` where given: a graph's calls); B is N x K where b_transposed, and `groups` of those where given."""
    m, k, n = shape
    pairs = copies_to_exceed(rotate_bytes, (m * k + max(groups, 1) * k * n) * dtype.itemsize)
    pairs = min(pairs, at_most) if at_most else pairs
    b_shape = ((groups,) if groups else ()) + ((n, k) if b_transposed else (k, n))
    return [(torch.randn(m, k, dtype=dtype, device=device), torch.randn(*b_shape, dtype=dtype, device=device))
            for _ in range(pairs)]


def measure_shape(cfg: Config, env: DistEnv, shape: list[int], dtype: torch.dtype) -> float:
    """Seconds of one matmul on this rank: the median call, or a graph's mean call (graph_calls)."""
    w = cfg.workload
    inputs = rotated_inputs(shape, dtype, env.device, parse_size(w.rotate_bytes), w.b_transposed, w.graph_calls,
                            w.groups)
    multiply = grouped_multiply(row_splits(shape[0], w.groups, w.routed_groups), w.b_transposed, env.device) if w.groups else (
        F.linear if w.b_transposed else torch.mm)

    def call(i: int) -> None:
        # A fresh output, as users' code gets it: `out=` routes bf16 through another cuBLAS path,
        # measured 7% slower at 8192^3 on H200; the caching allocator makes the allocation free.
        a, b = inputs[i % len(inputs)]
        multiply(a, b)

    if w.graph_calls:
        return time_graphed(call, w.graph_calls, w.iters)
    return statistics.median(time_each(call, w.iters, env.device, warmup=w.warmup_iters))


# Seeded router-like splits a routed grouped call cycles through: one split's time depends on which shares are
# whole tiles (H200, the 2.5B MoE's 4,096 x 2048 x 2816: 82 and 102 µs for two splits of the same spread)
ROUTED_SPLITS = 8


def row_splits(m: int, groups: int, routed: bool) -> list[torch.Tensor]:
    """Each group's share of m rows: even, or where `routed` as a balanced router spreads tokens: each row to a random
    group, ROUTED_SPLITS seeded splits, so that the shares, as an MoE's, are rarely whole tiles (H200: the 2.5B MoE's
    2048 x 2816 experts at 4,096 rows, 81 µs even, 102 as its router split them) and, of few rows, some groups get none."""
    return ([torch.randint(groups, (m,), generator=torch.Generator().manual_seed(seed)).bincount(minlength=groups)
             for seed in range(ROUTED_SPLITS)] if routed else [torch.full((groups,), m // groups)])


def groups_read(splits: list[torch.Tensor]) -> float:
    """Matrices a call reads, on average over the splits: those of the groups given rows (an MoE's reached experts)."""
    return statistics.mean(int((counts > 0).sum()) for counts in splits)


def grouped_multiply(splits: list[torch.Tensor], b_transposed: bool, device: torch.device):
    """A @ B[g] over each group's share of A's rows, as one F.grouped_mm (an MoE layer's experts; B held groups x N
    x K and used transposed where b_transposed, as models/moe.py holds them: groups x K x N), each call the next split."""
    offsets = [counts.cumsum(0).to(device=device, dtype=torch.int32) for counts in splits]
    calls = itertools.count()

    def multiply(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        offs = offsets[next(calls) % len(offsets)]
        return F.grouped_mm(a, b.transpose(-2, -1) if b_transposed else b, offs=offs)
    return multiply


def run(cfg: Config, env: DistEnv, reporter: StepReporter) -> dict:
    w = cfg.workload
    dtype = set_matmul_dtype(w.dtype)
    peak = cfg.hardware.peak_tflops[w.dtype]
    points = []
    for i, shape in enumerate(w.shapes):
        seconds = rank_mean(measure_shape(cfg, env, shape, dtype), env.device)
        tflops = 2 * math.prod(shape) / seconds / 1e12
        point = {"matmul_tflops": tflops, "matmul_peak_fraction": tflops / peak, "matmul_time_us": seconds * 1e6,
                 **({"matmul_groups_read": groups_read(row_splits(shape[0], w.groups, w.routed_groups))} if w.groups else {})}
        points.append({"shape": shape_name(shape), "flops": 2 * math.prod(shape), **point})
        reporter.step(i, len(w.shapes), shape_name(shape), **point)
    metrics = {f"{k}/{p['shape']}": p[k] for p in points for k in ("matmul_tflops", "matmul_peak_fraction",
                                                                     "matmul_time_us", "matmul_groups_read") if k in p}
    biggest = max(points, key=lambda p: p["flops"])
    metrics.update(matmul_tflops=biggest["matmul_tflops"], matmul_peak_fraction=biggest["matmul_peak_fraction"],
                   matmul_tflops_max=max(p["matmul_tflops"] for p in points), peak_tflops=peak)
    results = {"metrics": metrics, "tables": {"matmul": points}}
    if env.is_main:
        timing = f"graphs of {w.graph_calls} calls, {w.iters} replays" if w.graph_calls else f"median of {w.iters}"
        call = f"grouped_mm of {w.groups}" if w.groups else ("F.linear" if w.b_transposed else "matmul")
        title = f"{call} {w.dtype} on {cfg.hardware.name}, {timing}"
        ordered = sorted(points, key=lambda p: p["flops"])
        results["artifacts"] = [plots.matmul_tflops(reporter.job_dir / "matmul_tflops.png", ordered, peak, title)]
    return results
