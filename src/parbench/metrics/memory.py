"""Peak memory per rank (CUDA allocator, or peak RSS on CPU) and a planning estimate."""

from __future__ import annotations

import resource

import torch

from parbench.config.schema import ModelConfig, ZeroConfig
from parbench.models import ParamCounts

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


def model_state_bytes_per_param(dims, zero: ZeroConfig | None = None) -> float:
    """fp32 params and grads (4 B each) and AdamW's two moments (8 B) of one parameter, per device:
    split by tp*pp and sharded by fsdp; under DeepSpeed ZeRO partitioned over the dp ranks (stage 1:
    the optimizer states, 2: the gradients too, 3: everything), offloaded states on the host."""
    if zero is None or zero.stage is None:
        return 16 / (dims.tp * dims.pp * dims.fsdp)
    params, grads, optimizer = 4.0, 4.0, 8.0
    optimizer = 0.0 if zero.offload_optimizer else optimizer / (dims.dp if zero.stage >= 1 else 1)
    grads /= dims.dp if zero.stage >= 2 else 1
    params = 0.0 if zero.offload_param else params / (dims.dp if zero.stage == 3 else 1)
    return params + grads + optimizer


def estimate_train_memory_gb(model: ModelConfig, counts: ParamCounts, dims, batch: int, seq_len: int,
                             dtype_bytes: int, activation_checkpointing: str,
                             zero: ZeroConfig | None = None) -> dict[str, float]:
    """Per-device estimate: model states (model_state_bytes_per_param), plus activations after
    Korthikanti et al. (34*s*b*h bytes per layer at 16 bit, flash attention), divided by tp*cp,
    for the stage's layers with the whole local batch alive (what 1F1B keeps on its first stage),
    plus fp32 logits and their gradient for the loss."""
    states = model_state_bytes_per_param(dims, zero) * counts.total
    tokens = batch * seq_len / dims.cp
    per_layer = 34 * tokens * model.hidden * dtype_bytes / 2 / dims.tp
    if activation_checkpointing == "full":
        per_layer = 2 * tokens * model.hidden * dtype_bytes / 2
    activations = per_layer * model.layers / dims.pp
    logits = 2 * tokens * model.vocab * 4 / dims.tp
    return {"params_grads_optimizer_gb": states / GB, "activations_gb": activations / GB,
            "logits_gb": logits / GB, "total_gb": (states + activations + logits) / GB}
