"""Collective bandwidth over a message-size sweep, nccl-tests style (DESIGN.md's definitions).

    size    bytes of the whole buffer: all_gather's output, reduce_scatter's input, all_to_all's
            send buffer, the buffer of all_reduce, broadcast and send/recv
    algbw   = size / time
    busbw   = algbw x factor: all_reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all (n-1)/n;
              broadcast, send_recv 1
    time    mean per op over `iters` back-to-back ops between two CUDA events, averaged over ranks
            (nccl-tests' default)
After timing each size, the buffers are refilled with a known pattern, the op runs once more and
every element is checked; any wrong element makes the run FAILED."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
import torch.distributed as dist

from parbench.config.schema import Config
from parbench.metrics.timing import time_batch
from parbench.distenv import DistEnv
from parbench.dtypes import torch_dtype
from parbench.workloads.microbench import plots
from parbench.workloads.microbench.common import gather_floats, largest
from parbench.dtypes import GB
from parbench.workloads.specs.microbench import human_size, size_sweep
from parbench.workloads.reporting import StepReporter


@dataclass(frozen=True)
class Buffers:
    send: torch.Tensor
    recv: torch.Tensor


@dataclass(frozen=True)
class Collective:
    bus_factor: Callable[[int], float]  # busbw / algbw for n ranks
    chunks: bool  # the buffer splits into n equal chunks (count rounded down to a multiple of n)
    run: Callable[[Buffers, int, int], None]  # (buffers, rank, world)
    expected: Callable[[int, int, int, int, torch.device, torch.dtype], torch.Tensor]  # (count, rank, n, ...)
    result: Callable[[Buffers, int], torch.Tensor] = lambda b, n: b.recv
    reduces: bool = False  # sums values: the pattern is kept small so sums stay exact in bf16


def pattern(rank: int, count: int, start: int, modulus: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """Small integers that differ by rank and position; exactly representable in every dtype."""
    index_type = torch.int32 if start + count < 2**31 else torch.int64
    index = torch.arange(start, start + count, dtype=index_type, device=device)
    return ((index + 7 * rank) % modulus).to(dtype)


MOVE_MODULUS, SUM_MODULUS = 251, 8  # sums of n values below 8 stay exact in bf16 up to n = 36


def _sum_over_ranks(count: int, start: int, n: int, device, dtype) -> torch.Tensor:
    total = torch.zeros(count, dtype=dtype, device=device)
    for r in range(n):
        total += pattern(r, count, start, SUM_MODULUS, device, dtype)
    return total


def _send_recv(b: Buffers, rank: int, n: int) -> None:
    ops = [dist.P2POp(dist.isend, b.send, (rank + 1) % n), dist.P2POp(dist.irecv, b.recv, (rank - 1) % n)]
    for request in dist.batch_isend_irecv(ops):
        request.wait()


COLLECTIVES: dict[str, Collective] = {
    "all_reduce": Collective(
        bus_factor=lambda n: 2 * (n - 1) / n, chunks=False, reduces=True,
        run=lambda b, r, n: dist.all_reduce(b.send), result=lambda b, n: b.send,
        expected=lambda c, r, n, dev, dt: _sum_over_ranks(c, 0, n, dev, dt)),
    "all_gather": Collective(
        bus_factor=lambda n: (n - 1) / n, chunks=True,
        run=lambda b, r, n: dist.all_gather_into_tensor(b.recv, b.send[: b.recv.numel() // n]),
        expected=lambda c, r, n, dev, dt: torch.cat(
            [pattern(s, c // n, 0, MOVE_MODULUS, dev, dt) for s in range(n)])),
    "reduce_scatter": Collective(
        bus_factor=lambda n: (n - 1) / n, chunks=True, reduces=True,
        run=lambda b, r, n: dist.reduce_scatter_tensor(b.recv[: b.send.numel() // n], b.send),
        result=lambda b, n: b.recv[: b.send.numel() // n],
        expected=lambda c, r, n, dev, dt: _sum_over_ranks(c // n, r * (c // n), n, dev, dt)),
    "all_to_all": Collective(
        bus_factor=lambda n: (n - 1) / n, chunks=True,
        run=lambda b, r, n: dist.all_to_all_single(b.recv, b.send),
        expected=lambda c, r, n, dev, dt: torch.cat(
            [pattern(s, c // n, r * (c // n), MOVE_MODULUS, dev, dt) for s in range(n)])),
    "broadcast": Collective(
        bus_factor=lambda n: 1.0, chunks=False,
        run=lambda b, r, n: dist.broadcast(b.send, src=0), result=lambda b, n: b.send,
        expected=lambda c, r, n, dev, dt: pattern(0, c, 0, MOVE_MODULUS, dev, dt)),
    "send_recv": Collective(
        bus_factor=lambda n: 1.0, chunks=False, run=_send_recv,
        expected=lambda c, r, n, dev, dt: pattern((r - 1) % n, c, 0, MOVE_MODULUS, dev, dt)),
}


def element_count(op: Collective, size_bytes: int, itemsize: int, n: int) -> int:
    """Elements of the whole buffer; split ops round down to n equal chunks, as nccl-tests does."""
    count = size_bytes // itemsize
    return count - count % n if op.chunks else count


def sweep_sizes(cfg: Config) -> list[int]:
    w = cfg.workload
    return size_sweep(w.begin, w.end, w.factor)



def fill_inputs(name: str, buffers: Buffers, rank: int, n: int) -> None:
    """Known per-rank inputs (all_gather sends the first 1/n of its buffer); outputs poisoned."""
    op, send = COLLECTIVES[name], buffers.send
    count = send.numel() // n if name == "all_gather" else send.numel()
    modulus = SUM_MODULUS if op.reduces else MOVE_MODULUS
    send[:count] = pattern(rank, count, 0, modulus, send.device, send.dtype)
    buffers.recv.fill_(-1)


def count_wrong(name: str, buffers: Buffers, rank: int, n: int, corrupt: bool = False) -> int:
    """Run the op once on known inputs and count this rank's wrong output elements
    (corrupt: debug.corrupt_results, to exercise the failure path)."""
    op = COLLECTIVES[name]
    fill_inputs(name, buffers, rank, n)
    op.run(buffers, rank, n)
    got = op.result(buffers, n)
    if corrupt:
        got[0] += 1
    expected = op.expected(buffers.send.numel(), rank, n, got.device, got.dtype)
    return int(torch.count_nonzero(got != expected).item())


def measure_point(cfg: Config, env: DistEnv, name: str, full: Buffers, size_bytes: int) -> dict[str, float]:
    """Time one op at one size, then verify it; time averaged and wrong elements summed over ranks."""
    w, op, n = cfg.workload, COLLECTIVES[name], env.world_size
    count = element_count(op, size_bytes, full.send.element_size(), n)
    buffers = Buffers(full.send[:count], full.recv[:count])
    fill_inputs(name, buffers, env.rank, n)

    def run_once(_: int) -> None:
        op.run(buffers, env.rank, n)

    for i in range(w.warmup_iters):
        run_once(i)
    dist.barrier()
    seconds = sum(gather_floats(time_batch(run_once, w.iters, env.device), env.device)) / n
    corrupt = cfg.debug.corrupt_results and env.rank == cfg.debug.fault_rank
    wrong = sum(gather_floats(count_wrong(name, buffers, env.rank, n, corrupt), env.device)) if w.verify else 0
    nbytes = count * full.send.element_size()
    algbw = nbytes / seconds / GB
    return {"size_bytes": nbytes, "time_us": seconds * 1e6, "algbw_gbps": algbw,
            "busbw_gbps": algbw * op.bus_factor(n), "wrong_elements": wrong}


def run(cfg: Config, env: DistEnv, reporter: StepReporter) -> dict:
    w = cfg.workload
    sizes = sweep_sizes(cfg)
    dtype = torch_dtype(w.dtype)
    elements = sizes[-1] // dtype.itemsize
    full = Buffers(torch.empty(elements, dtype=dtype, device=env.device),
                   torch.empty(elements, dtype=dtype, device=env.device))
    points: dict[str, list[dict[str, float]]] = {}
    for name in w.ops:
        points[name] = []
        for i, size in enumerate(sizes):
            point = measure_point(cfg, env, name, full, size)
            points[name].append(point)
            # MLflow series per op at step = size index: steps/busbw_gbps/<op> etc.
            reporter.step(i, len(sizes), name, **{f"{k}/{name}": v for k, v in point.items()})
    return collective_results(cfg, env, points, reporter.job_dir)


def collective_results(cfg: Config, env: DistEnv, points: dict[str, list[dict[str, float]]], job_dir: Path) -> dict:
    metrics: dict[str, float] = {}
    for name, rows in points.items():
        for row in rows:
            for key in ("time_us", "algbw_gbps", "busbw_gbps", "wrong_elements"):
                metrics[f"{key}/{name}/{int(row['size_bytes'])}"] = row[key]
        for key in ("algbw_gbps", "busbw_gbps"):
            metrics[f"{key}/{name}"] = largest({row["size_bytes"]: row[key] for row in rows})
    every = [row for rows in points.values() for row in rows]
    # nccl-tests' "Avg bus bandwidth": the mean over every point of the run
    metrics["busbw_gbps_avg"] = sum(row["busbw_gbps"] for row in every) / len(every)
    metrics["wrong_elements"] = sum(row["wrong_elements"] for row in every)
    results = {"metrics": metrics, "tables": {"collectives": points}}
    if env.is_main:
        title = f"Collectives: {env.world_size} ranks, {cfg.workload.dtype}, {cfg.hardware.backend}"
        print(format_table(points, title), flush=True)
        results["artifacts"] = [plots.bandwidth_vs_size(job_dir / "collectives_bandwidth.png", points,
                                                        ("algbw_gbps", "busbw_gbps"), title)]
    bad = [f"{name} at {human_size(int(row['size_bytes']))}: {int(row['wrong_elements'])}"
           for name, rows in points.items() for row in rows if row["wrong_elements"]]
    if bad:
        results["failure"] = f"collective results verified wrong (wrong elements per op and size): {'; '.join(bad)}"
    return results


def format_table(points: dict[str, list[dict[str, float]]], title: str) -> str:
    """The sweep as nccl-tests prints it."""
    lines = [f"# {title}", f"# {'op':>14} {'size':>10} {'time(us)':>11} {'algbw(GB/s)':>12} {'busbw(GB/s)':>12} "
             f"{'#wrong':>7}"]
    for name, rows in points.items():
        lines += [f"  {name:>14} {human_size(int(r['size_bytes'])):>10} {r['time_us']:>11.2f} {r['algbw_gbps']:>12.3f} "
                  f"{r['busbw_gbps']:>12.3f} {int(r['wrong_elements']):>7}" for r in rows]
    return "\n".join(lines)
