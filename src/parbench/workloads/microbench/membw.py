"""Device memory bandwidth: dst.copy_(src) of `size` bytes counts 2 x size (read + write).

    membw_gbps = 2 x size / time, time = median over `iters` copies (CUDA events per copy),
                 averaged over ranks (every device copies at once; on CPU the ranks share DRAM)
    membw_peak_fraction = membw_gbps / hardware.hbm_bandwidth_gbps (when the profile has it)
Small sizes fit in L2 (or the CPU caches) and show the cache's bandwidth, not DRAM's."""

from __future__ import annotations

import statistics

import torch

from parbench.config.schema import Config
from parbench.metrics.timing import time_each
from parbench.distenv import DistEnv
from parbench.workloads.microbench import plots
from parbench.workloads.microbench.common import largest, rank_mean
from parbench.dtypes import GB
from parbench.workloads.specs.microbench import size_sweep
from parbench.workloads.reporting import StepReporter



def copy_seconds(cfg: Config, env: DistEnv, src: torch.Tensor, dst: torch.Tensor) -> float:
    w = cfg.workload
    return statistics.median(time_each(lambda _: dst.copy_(src), w.iters, env.device, warmup=w.warmup_iters))


def run(cfg: Config, env: DistEnv, reporter: StepReporter) -> dict:
    w = cfg.workload
    sizes = size_sweep(w.begin, w.end, w.factor)
    src = torch.ones(sizes[-1], dtype=torch.uint8, device=env.device)
    dst = torch.empty_like(src)
    points = []
    for i, size in enumerate(sizes):
        seconds = rank_mean(copy_seconds(cfg, env, src[:size], dst[:size]), env.device)
        point = {"size_bytes": size, "membw_gbps": 2 * size / seconds / GB, "time_us": seconds * 1e6}
        points.append(point)
        reporter.step(i, len(sizes), "copy", **point)
    metrics = {f"{k}/{int(p['size_bytes'])}": p[k] for p in points for k in ("membw_gbps", "time_us")}
    metrics["membw_gbps"] = largest({p["size_bytes"]: p["membw_gbps"] for p in points})
    if cfg.hardware.hbm_bandwidth_gbps:
        metrics["membw_peak_fraction"] = metrics["membw_gbps"] / cfg.hardware.hbm_bandwidth_gbps
    results = {"metrics": metrics, "tables": {"membw": points}}
    if env.is_main:
        title = f"Device copy bandwidth (read + write), {cfg.hardware.name}"
        results["artifacts"] = [plots.bandwidth_vs_size(reporter.job_dir / "membw.png", {"copy": points},
                                                        ("membw_gbps",), title)]
    return results
