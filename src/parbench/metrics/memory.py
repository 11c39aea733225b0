"""Peak memory per rank (CUDA allocator, or peak RSS on CPU); the planning estimate is parbench.predict.memory."""

from __future__ import annotations

import resource
from typing import Iterable

import torch

from parbench.distenv import is_dtensor
from parbench.dtypes import GB



def peak_memory_gb(device: torch.device) -> dict[str, float]:
    """Device memory peaks, and the process's peak resident host memory (mem_peak_host_gb: where
    CPU offload keeps optimizer states and parameters)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GB  # Linux reports KiB
    if device.type == "cuda":
        return {"mem_peak_allocated_gb": torch.cuda.max_memory_allocated(device) / GB,
                "mem_peak_reserved_gb": torch.cuda.max_memory_reserved(device) / GB, "mem_peak_host_gb": rss}
    return {"mem_peak_allocated_gb": rss, "mem_peak_reserved_gb": rss, "mem_peak_host_gb": rss}


def reset_peak_memory(device: torch.device) -> None:
    """Start the CUDA peak counters afresh (e.g. after a one-off full-precision model build)."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def held_parameters_gb(parameters: Iterable[torch.Tensor]) -> float:
    """Bytes of the parameters this rank holds: a DTensor's local shard, DeepSpeed ZeRO-3's
    partition (ds_tensor), else the whole tensor (what parbench.predict.memory predicts as params_gb)."""
    total = 0
    for p in parameters:
        held = p.to_local() if is_dtensor(p) else getattr(p, "ds_tensor", p)
        total += held.numel() * held.element_size()
    return total / GB
