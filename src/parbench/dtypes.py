"""dtype names used in configs, and their torch types (torch is imported only when asked for)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

DTYPE_NAMES = ("fp32", "bf16", "fp16")
ITEMSIZE = {"fp32": 4, "bf16": 2, "fp16": 2}  # bytes per element
GB = 1e9  # bytes in the GB of every *_gb figure and the GB/s of bandwidths (as nccl-tests prints them)
_TORCH_NAMES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}

# An MoE's experts run as one grouped GEMM (F.grouped_mm) in this dtype alone (its kernel and compiled form take
# no other); in any other, one GEMM per expert, sized on the host (models/moe.py)
GROUPED_DTYPE = "bf16"


def torch_dtype(name: str) -> "torch.dtype":
    import torch  # the orchestrator validates configs without loading torch

    if name not in _TORCH_NAMES:
        raise ValueError(f"dtype {name!r} is not resolved: use one of {', '.join(DTYPE_NAMES)}")
    return getattr(torch, _TORCH_NAMES[name])


def resolve_dtype(name: str, device_type: str) -> str:
    """`auto` means bf16 on GPUs and fp32 on CPUs."""
    if name != "auto":
        return name
    return "bf16" if device_type == "cuda" else "fp32"
