"""dtype names used in configs and their torch types."""

from __future__ import annotations

import torch

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def torch_dtype(name: str) -> torch.dtype:
    if name not in DTYPES:
        raise ValueError(f"dtype {name!r} is not resolved: use one of {', '.join(DTYPES)}")
    return DTYPES[name]


def resolve_dtype(name: str, device_type: str) -> str:
    """`auto` means bf16 on GPUs and fp32 on CPUs."""
    if name != "auto":
        return name
    return "bf16" if device_type == "cuda" else "fp32"
