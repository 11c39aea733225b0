"""One linear layer Y = X W sharded over every rank of the job (the tp group), Megatron style:

    none    every rank computes the whole X W (the unsharded reference; no communication)
    column  W split by columns: Y_r = X W[:, r]; all_gather of the Y_r gives Y
    row     W split by rows, X by columns: Y = sum_r X[:, r] W[r, :] by all_reduce

Per iteration, CUDA events split compute (the local matmul) from comm (the collective):
compute_ms, comm_ms and total_ms are medians over iterations, averaged over ranks.
comm_bytes is what nccl-tests calls bus bytes per rank (all_gather (n-1)/n x Y, all_reduce
2(n-1)/n x Y); comm_busbw_gbps = comm_bytes / comm time. Every mode's Y is checked against the
unsharded product (max_rel_error = max |Y - XW| / max |XW|)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
import torch.distributed as dist

from parbench.config.schema import Config
from parbench.metrics.timing import DeviceInterval, device_synchronize
from parbench.distenv import DistEnv
from parbench.dtypes import torch_dtype
from parbench.workloads.microbench.common import gather_floats, rank_mean
from parbench.dtypes import GB
from parbench.workloads.reporting import StepReporter


TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 5e-2, torch.float16: 1e-2}  # of max |XW|


@dataclass(frozen=True)
class Sharded:
    """One mode on this rank: the local matmul, the collective, and how to read the full Y."""

    compute: Callable[[], torch.Tensor]
    comm: Callable[[torch.Tensor], None]
    full_output: Callable[[torch.Tensor], torch.Tensor]
    bus_bytes: float



def shard(mode: str, x: torch.Tensor, weight: torch.Tensor, rank: int, n: int) -> Sharded:
    tokens, out_features, itemsize = x.shape[0], weight.shape[1], x.element_size()
    y_bytes = tokens * out_features * itemsize
    if mode == "none":
        return Sharded(lambda: x @ weight, lambda y: None, lambda y: y, 0.0)
    if mode == "column":
        w_r = weight.chunk(n, dim=1)[rank].contiguous()
        gathered = torch.empty(n * tokens, out_features // n, dtype=x.dtype, device=x.device)
        return Sharded(lambda: x @ w_r, lambda y: dist.all_gather_into_tensor(gathered, y),
                       lambda y: gathered.view(n, tokens, -1).permute(1, 0, 2).reshape(tokens, out_features),
                       (n - 1) / n * y_bytes)
    x_r, w_r = x.chunk(n, dim=1)[rank].contiguous(), weight.chunk(n, dim=0)[rank].contiguous()
    return Sharded(lambda: x_r @ w_r, lambda y: dist.all_reduce(y), lambda y: y, 2 * (n - 1) / n * y_bytes)


def measure_mode(cfg: Config, env: DistEnv, sharded: Sharded) -> tuple[list[float], list[float], torch.Tensor]:
    """Per-iteration compute and comm seconds on this rank, and the last full Y."""
    w = cfg.workload
    for _ in range(w.warmup_iters):
        sharded.comm(sharded.compute())
    dist.barrier()
    pairs = [(DeviceInterval(env.device), DeviceInterval(env.device)) for _ in range(w.iters)]
    device_synchronize(env.device)
    for compute, comm in pairs:
        compute.start()
        y = sharded.compute()
        compute.stop()
        comm.start()
        sharded.comm(y)
        comm.stop()
    device_synchronize(env.device)
    return [c.seconds() for c, _ in pairs], [m.seconds() for _, m in pairs], sharded.full_output(y)


def inputs(cfg: Config, env: DistEnv, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """The same seeded X and W on every rank."""
    w = cfg.workload
    gen = torch.Generator(env.device).manual_seed(cfg.seed)
    x = torch.randn(w.tokens, w.in_features, generator=gen, device=env.device, dtype=dtype)
    weight = torch.randn(w.in_features, w.out_features, generator=gen, device=env.device, dtype=dtype)
    return x, weight


def median_ms(seconds: list[float], env: DistEnv) -> float:
    """Median over iterations on each rank, averaged over ranks, in ms."""
    return rank_mean(statistics.median(seconds), env.device) * 1e3


def run(cfg: Config, env: DistEnv, reporter: StepReporter) -> dict:
    w = cfg.workload
    dtype = torch_dtype(w.dtype)
    x, weight = inputs(cfg, env, dtype)
    reference = (x.float() @ weight.float())
    scale = reference.abs().max().item()
    rows = {}
    for i, mode in enumerate(w.modes):
        sharded = shard(mode, x, weight, env.rank, env.world_size)
        compute, comm, y = measure_mode(cfg, env, sharded)
        error = max(gather_floats((y.float() - reference).abs().max().item() / scale, env.device))
        row = {"compute_ms": median_ms(compute, env), "comm_ms": median_ms(comm, env),
               "total_ms": median_ms([a + b for a, b in zip(compute, comm)], env),
               "comm_bytes": sharded.bus_bytes, "max_rel_error": error}
        row["comm_busbw_gbps"] = row["comm_bytes"] / (row["comm_ms"] / 1e3) / GB if row["comm_bytes"] else 0.0
        local_flops = 2 * w.tokens * w.in_features * w.out_features / (1 if mode == "none" else env.world_size)
        row["tflops_per_device"] = local_flops / (row["compute_ms"] / 1e3) / 1e12
        rows[mode] = row
        reporter.step(i, len(w.modes), mode, **{f"{k}/{mode}": v for k, v in row.items()})
    return tp_results(cfg, env, rows, reporter.job_dir, TOLERANCE[dtype])


def tp_results(cfg: Config, env: DistEnv, rows: dict[str, dict[str, float]], job_dir: Path, tolerance: float) -> dict:
    metrics = {f"{k}/{mode}": v for mode, row in rows.items() for k, v in row.items()}
    results = {"metrics": metrics, "tables": {"tp_linear": rows}}
    if env.is_main:
        w = cfg.workload
        table = format_table(rows, f"Y = X W, X {w.tokens}x{w.in_features}, W {w.in_features}x{w.out_features}, "
                                   f"{w.dtype}, tp={env.world_size} ({cfg.hardware.name})")
        print(table, flush=True)
        (job_dir / "tp_linear.md").write_text(table + "\n")
        results["artifacts"] = ["tp_linear.md"]
    wrong = [f"{mode}: {row['max_rel_error']:.3g}" for mode, row in rows.items() if row["max_rel_error"] > tolerance]
    if wrong:
        results["failure"] = (f"tp_linear outputs differ from the unsharded X W by more than {tolerance:g} of "
                              f"max |XW|: {'; '.join(wrong)}")
    return results


def format_table(rows: dict[str, dict[str, float]], title: str) -> str:
    """A markdown table in the shape of the seed write-ups' column- vs row-parallel comparison."""
    lines = [f"{title}", "", "| mode | compute ms | comm ms | total ms | comm bytes/rank | comm busbw GB/s | "
             "TFLOP/s/device | max rel error |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {mode} | {r['compute_ms']:.3f} | {r['comm_ms']:.3f} | {r['total_ms']:.3f} | {r['comm_bytes']:.4g} | "
              f"{r['comm_busbw_gbps']:.1f} | {r['tflops_per_device']:.3g} | {r['max_rel_error']:.2g} |"
              for mode, r in rows.items()]
    return "\n".join(lines)
