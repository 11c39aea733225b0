"""Training FLOPs per token and MFU, as defined in docs/metrics.md (the formulas load no torch).

    flops/token = 6 * N + attention term
    N           = active parameters that multiply activations (input embeddings excluded;
                  a tied output head counted; MoE counts top_k experts)
    attention   = 12 * L * d_attn * T (PaLM / torchtitan: mfu_nocausal)
                  6 * L * d_attn * T  (causal mask skips half the scores: mfu, Megatron since 2025)
                  T becomes the positions a sliding window lets a query see (attended_positions)

Cross-check: torch's FlopCounterMode counts the matmuls (and SDPA) actually run in a forward
and backward. It equals the non-causal formula minus 6 x the 1-D parameters (norm weights,
biases): 6N counts every non-embedding parameter, but those multiply nothing, they scale or
shift elementwise. SDPA computes the full score matrix on the math path (the mask applies
after), so the count matches the non-causal attention term.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from parbench.config.schema import ModelConfig, head_width
from parbench.models import ParamCounts

if TYPE_CHECKING:
    from torch import nn


def attended_positions(seq_len: float, causal: bool, window: int | None = None) -> float:
    """Keys a query attends to, on average: T/2 causal (half the score matrix), T not; with a
    sliding window W < T, min(T, W) not causal and W - W^2 / 2T causal (the first W queries see
    fewer), which is T/2 again at W = T."""
    if window is None or window >= seq_len:
        return seq_len / 2 if causal else seq_len
    return window - window**2 / (2 * seq_len) if causal else window


def attention_flops_per_token(cfg: ModelConfig, seq_len: float, causal: bool) -> float:
    """Forward+backward FLOPs of QK^T and AV per token (not counted by 6N)."""
    d_attn = cfg.heads * head_width(cfg)
    return 12 * cfg.layers * d_attn * attended_positions(seq_len, causal, cfg.sliding_window)


def train_flops_per_token(cfg: ModelConfig, counts: ParamCounts, seq_len: int, causal: bool = True) -> float:
    return 6 * counts.matmul_active + attention_flops_per_token(cfg, seq_len, causal)


def recompute_factor(activation_checkpointing: str) -> float:
    """Hardware FLOPs / model FLOPs: full recompute repeats the forward (2 of the 6)."""
    return 4 / 3 if activation_checkpointing == "full" else 1.0


def mfu(flops_per_token: float, tokens_per_s: float, peak_tflops_per_device: float, devices: int) -> float:
    """Achieved FLOP/s over the dense peak of all devices."""
    return flops_per_token * tokens_per_s / (peak_tflops_per_device * 1e12 * devices)


def counted_train_flops_per_token(model: "nn.Module", vocab: int, batch: int, seq_len: int) -> float:
    """FLOPs per token of one forward+backward (cross-entropy on random tokens) as torch's
    FlopCounterMode counts them. SDPA runs on the math backend: the fused CPU kernel has no
    FLOP formula registered and would count as zero."""
    # torch here only: the formulas above serve the planner, which runs without torch.
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    device = next(model.parameters()).device
    tokens = torch.randint(0, vocab, (batch, seq_len + 1), generator=torch.Generator().manual_seed(0)).to(device)
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        logits = model(tokens[:, :-1])
        F.cross_entropy(logits.flatten(0, 1).float(), tokens[:, 1:].flatten()).backward()
    return counter.get_total_flops() / (batch * seq_len)


def elementwise_params(model: "nn.Module") -> int:
    """Parameters that scale or shift rather than multiply activations (norms, biases): in 6N,
    not in a matmul count."""
    return sum(p.numel() for p in model.parameters() if p.dim() == 1)
