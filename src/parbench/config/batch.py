"""Batch arithmetic shared by the strategies (DeepSpeed's micro-batch) and the training workload."""

from __future__ import annotations

from typing import Any

from parbench.config.dims import ParallelDims
from parbench.config.schema import Config


def local_batch(w: Any, dims: ParallelDims) -> int:
    """Sequences per data-parallel rank and step: global_batch_size split over the data-parallel
    ranks when set (strong scaling), else batch_size (weak scaling)."""
    return w.global_batch_size // dims.data_parallel if w.global_batch_size else w.batch_size


def tokens_per_step(cfg: Config, dims: ParallelDims) -> int:
    return local_batch(cfg.workload, dims) * dims.data_parallel * cfg.workload.seq_len
