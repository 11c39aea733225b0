"""Peak memory per rank (CUDA allocator, or peak RSS on CPU); the planning estimate is parbench.predict.memory."""

from __future__ import annotations

import resource

import torch

GB = 1e9


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
