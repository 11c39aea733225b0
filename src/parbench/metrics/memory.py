"""Peak memory per rank (CUDA allocator, or peak RSS on CPU) and a planning estimate."""

from __future__ import annotations

import resource

import torch

from parbench.config.schema import ModelConfig
from parbench.models import ParamCounts

GB = 1e9


def peak_memory_gb(device: torch.device) -> dict[str, float]:
    if device.type == "cuda":
        return {"mem_peak_allocated_gb": torch.cuda.max_memory_allocated(device) / GB,
                "mem_peak_reserved_gb": torch.cuda.max_memory_reserved(device) / GB}
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GB  # Linux reports KiB
    return {"mem_peak_allocated_gb": rss, "mem_peak_reserved_gb": rss}


def reset_peak_memory(device: torch.device) -> None:
    """Start the CUDA peak counters afresh (e.g. after a one-off full-precision model build)."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def estimate_train_memory_gb(model: ModelConfig, counts: ParamCounts, dims, batch: int, seq_len: int,
                             dtype_bytes: int, activation_checkpointing: str) -> dict[str, float]:
    """Per-device estimate: fp32 params+grads+AdamW (16 B/param) split by tp*pp and sharded by fsdp,
    plus activations after Korthikanti et al. (34*s*b*h bytes per layer at 16 bit, flash attention),
    divided by tp*cp, for the stage's layers with the whole local batch alive (what 1F1B keeps on
    its first stage), plus fp32 logits and their gradient for the loss."""
    shard = dims.tp * dims.pp * dims.fsdp
    states = 16 * counts.total / shard
    tokens = batch * seq_len / dims.cp
    per_layer = 34 * tokens * model.hidden * dtype_bytes / 2 / dims.tp
    if activation_checkpointing == "full":
        per_layer = 2 * tokens * model.hidden * dtype_bytes / 2
    activations = per_layer * model.layers / dims.pp
    logits = 2 * tokens * model.vocab * 4 / dims.tp
    return {"params_grads_optimizer_gb": states / GB, "activations_gb": activations / GB,
            "logits_gb": logits / GB, "total_gb": (states + activations + logits) / GB}
