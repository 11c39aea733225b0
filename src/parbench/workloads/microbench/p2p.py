"""GPU-to-GPU copy bandwidth for every ordered pair of the node's GPUs, both directions at once
for every pair, and host<->device over pinned memory.

    p2p_gbps/gpuI_to_gpuJ   size / time of dst.copy_(src) (cudaMemcpy peer), median over iters
    p2p_bidir_gbps/gpuI_gpuJ  2 x size / time with I->J and J->I in flight together
    h2d_gbps/gpuI, d2h_gbps/gpuI  pinned host buffer to and from the device
Rank 0 drives every copy, one pair at a time, so pairs never share links; the other ranks wait on
a CPU (gloo) barrier, which launches nothing on their GPUs. GPUs only: on CPU there are no device
links to measure (workload=membw and workload=collectives cover what a CPU can)."""

from __future__ import annotations

import itertools
import json
import statistics
from pathlib import Path

import torch
import torch.distributed as dist

from parbench.config.schema import Config
from parbench.metrics.timing import time_each
from parbench.distenv import DistEnv
from parbench.workloads.microbench import plots
from parbench.dtypes import GB
from parbench.workloads.specs.microbench import parse_size
from parbench.workloads.reporting import StepReporter



def gpu(i: int) -> torch.device:
    return torch.device("cuda", i)


def median_copy_seconds(cfg: Config, dst: torch.Tensor, src: torch.Tensor, timing_device: torch.device) -> float:
    """Copies timed with events on timing_device's current stream (torch copies on the source's)."""
    w = cfg.workload
    with torch.cuda.device(timing_device):
        return statistics.median(time_each(lambda _: dst.copy_(src, non_blocking=True), w.iters, timing_device,
                                           warmup=w.warmup_iters))


def bidirectional_seconds(cfg: Config, a: torch.Tensor, b: torch.Tensor, a_dst: torch.Tensor,
                          b_dst: torch.Tensor) -> float:
    """Mean seconds per pair of concurrent copies a -> b_dst and b -> a_dst. Each direction gets
    its own streams on both devices: torch orders a cross-device copy after the current streams of
    both ends, so sharing streams would serialise the two directions."""
    i, j = a.device, b.device
    forward = (torch.cuda.Stream(i), torch.cuda.Stream(j))
    backward = (torch.cuda.Stream(j), torch.cuda.Stream(i))

    def both() -> None:
        with torch.cuda.stream(forward[0]), torch.cuda.stream(forward[1]):
            b_dst.copy_(a, non_blocking=True)
        with torch.cuda.stream(backward[0]), torch.cuda.stream(backward[1]):
            a_dst.copy_(b, non_blocking=True)

    for _ in range(cfg.workload.warmup_iters):
        both()
    torch.cuda.synchronize(i)
    torch.cuda.synchronize(j)
    start, backward_done, end = (torch.cuda.Event(enable_timing=True) for _ in range(3))
    start.record(forward[0])
    backward[0].wait_event(start)
    for _ in range(cfg.workload.iters):
        both()
    backward_done.record(backward[0])
    forward[0].wait_event(backward_done)
    end.record(forward[0])
    torch.cuda.synchronize(i)
    torch.cuda.synchronize(j)
    return start.elapsed_time(end) / 1e3 / cfg.workload.iters


def measure(cfg: Config, gpus: int, size: int) -> dict:
    """Rank 0: every pair and the host links, as GB/s matrices (None on the diagonal)."""
    buffers = [torch.ones(size, dtype=torch.uint8, device=gpu(i)) for i in range(gpus)]
    landing = [torch.empty(size, dtype=torch.uint8, device=gpu(i)) for i in range(gpus)]
    unidir = [[None] * gpus for _ in range(gpus)]
    bidir = [[None] * gpus for _ in range(gpus)]
    for i, j in itertools.permutations(range(gpus), 2):
        unidir[i][j] = size / median_copy_seconds(cfg, landing[j], buffers[i], gpu(i)) / GB
    if cfg.workload.bidirectional:
        for i, j in itertools.combinations(range(gpus), 2):
            bidir[i][j] = bidir[j][i] = 2 * size / bidirectional_seconds(cfg, buffers[i], buffers[j], landing[i],
                                                                         landing[j]) / GB
    result = {"gpus": gpus, "size_bytes": size, "unidirectional_gbps": unidir, "bidirectional_gbps": bidir,
              "peer_access": [[i == j or torch.cuda.can_device_access_peer(i, j) for j in range(gpus)]
                              for i in range(gpus)]}
    if cfg.workload.host:
        pinned = torch.ones(size, dtype=torch.uint8, pin_memory=True)
        result["h2d_gbps"] = [size / median_copy_seconds(cfg, landing[i], pinned, gpu(i)) / GB for i in range(gpus)]
        result["d2h_gbps"] = [size / median_copy_seconds(cfg, pinned, buffers[i], gpu(i)) / GB for i in range(gpus)]
    return result


def p2p_metrics(m: dict) -> dict[str, float]:
    pairs = [(i, j) for i, j in itertools.permutations(range(m["gpus"]), 2)]
    metrics = {f"p2p_gbps/gpu{i}_to_gpu{j}": m["unidirectional_gbps"][i][j] for i, j in pairs}
    metrics.update({f"p2p_bidir_gbps/gpu{i}_gpu{j}": m["bidirectional_gbps"][i][j] for i, j in pairs
                    if i < j and m["bidirectional_gbps"][i][j] is not None})
    if pairs:
        values = [m["unidirectional_gbps"][i][j] for i, j in pairs]
        metrics.update(p2p_gbps_min=min(values), p2p_gbps_mean=statistics.fmean(values), p2p_gbps_max=max(values))
    bidir = [v for k, v in metrics.items() if k.startswith("p2p_bidir_gbps/")]
    if bidir:
        metrics["p2p_bidir_gbps_mean"] = statistics.fmean(bidir)
    for key in ("h2d_gbps", "d2h_gbps"):
        if key in m:
            metrics.update({f"{key}/gpu{i}": v for i, v in enumerate(m[key])})
            metrics[key] = statistics.fmean(m[key])
    return metrics


def with_host(m: dict) -> tuple[list[list[float | None]], list[str]]:
    """The GPU matrix with the host as an extra row (host -> GPU) and column (GPU -> host)."""
    gpus = m["gpus"]
    grid = [row + [m["d2h_gbps"][i] if "d2h_gbps" in m else None] for i, row in enumerate(m["unidirectional_gbps"])]
    grid.append((m["h2d_gbps"] if "h2d_gbps" in m else [None] * gpus) + [None])
    return grid, [f"gpu{i}" for i in range(gpus)] + ["host"]


def format_matrix(grid: list[list[float | None]], labels: list[str]) -> str:
    lines = ["GB/s, source (rows) -> destination (columns)", "".join(f"{label:>9}" for label in ["", *labels])]
    lines += ["".join([f"{src:>9}", *(f"{v:9.1f}" if v is not None else f"{'-':>9}" for v in row)])
              for src, row in zip(labels, grid)]
    return "\n".join(lines)


def heatmaps(m: dict, job_dir: Path, hardware: str) -> list[str]:
    grid, labels = with_host(m)
    files = [plots.heatmap(job_dir / "p2p_heatmap.png", grid, labels,
                           f"Copy bandwidth, one direction, {m['size_bytes'] / 2**20:g} MiB ({hardware})")]
    if any(v is not None for row in m["bidirectional_gbps"] for v in row):
        files.append(plots.heatmap(job_dir / "p2p_bidir_heatmap.png", m["bidirectional_gbps"], labels[:-1],
                                   f"Copy bandwidth, both directions at once ({hardware})"))
    return files


def run(cfg: Config, env: DistEnv, reporter: StepReporter) -> dict:
    cpu_group = dist.new_group(backend="gloo")  # waiting ranks must not run NCCL kernels meanwhile
    results: dict = {"metrics": {}}
    if env.is_main:
        m = measure(cfg, cfg.hardware.gpus_per_node, parse_size(cfg.workload.size))
        (reporter.job_dir / "p2p.json").write_text(json.dumps(m, indent=2))
        results = {"metrics": p2p_metrics(m), "tables": {"p2p": m},
                   "artifacts": ["p2p.json", *heatmaps(m, reporter.job_dir, cfg.hardware.name)]}
        print(format_matrix(*with_host(m)), flush=True)
    dist.barrier(group=cpu_group)
    return results
