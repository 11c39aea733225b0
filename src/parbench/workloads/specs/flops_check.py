"""The FLOPs cross-check's config and checks; its run is parbench.workloads.flops_check."""

from __future__ import annotations

from dataclasses import dataclass

from parbench.config import ConfigError
from parbench.config.dims import ParallelDims
from parbench.config.schema import Config, ParallelConfig
from parbench.parallel.specs import require_deepspeed
from parbench.workloads.registry import WORKLOADS, WorkloadSpec, all_ones, check_fields


@dataclass
class FlopsCheckWorkload:
    name: str = "flops_check"
    batch_size: int = 2
    seq_len: int = 64
    dtype: str = "auto"  # the forward runs under autocast in this dtype (counts do not depend on it)


def validate(cfg: Config, dims: ParallelDims) -> None:
    w = cfg.workload
    check_fields(w, positive=("batch_size", "seq_len"))
    require_deepspeed("workload=flops_check (DeepSpeed's flops profiler)")
    if w.seq_len > cfg.model.max_seq_len:
        raise ConfigError(f"workload.seq_len={w.seq_len} exceeds model.max_seq_len={cfg.model.max_seq_len}: "
                          "shorten the sequence or raise model.max_seq_len")


def job_parallel(cfg: Config) -> ParallelConfig:
    return all_ones(cfg.parallel)  # the plain model in one process


WORKLOADS.register("flops_check")(WorkloadSpec(
    schema=FlopsCheckWorkload, validate=validate, run="parbench.workloads.flops_check:run", job_parallel=job_parallel,
    summary_metrics=("flops_per_token", "flops_per_token_nocausal", "matmul_flops_per_token",
                     "ds_flops_per_token", "ds_matmul_flops_per_token", "ds_elementwise_flops_per_token",
                     "ds_matmul_diff_per_token", "ds_flops_diff_per_token", "ds_flops_diff_pct"),
))
