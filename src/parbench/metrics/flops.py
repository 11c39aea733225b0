"""Training FLOPs per token and MFU, as defined in the README (Measurement definitions).

    flops/token = 6 * N + attention term
    N           = active parameters that multiply activations (input embeddings excluded;
                  a tied output head counted; MoE counts top_k experts)
    attention   = 12 * L * d_attn * T (PaLM / torchtitan: mfu_nocausal)
                  6 * L * d_attn * T  (causal mask skips half the scores: mfu, Megatron since 2025)
"""

from __future__ import annotations

from parbench.config.schema import ModelConfig
from parbench.models import ParamCounts


def attention_flops_per_token(cfg: ModelConfig, seq_len: int, causal: bool) -> float:
    """Forward+backward FLOPs of QK^T and AV per token (not counted by 6N)."""
    d_attn = cfg.heads * (cfg.head_dim or cfg.hidden // cfg.heads)
    full = 12 * cfg.layers * d_attn * seq_len
    return full / 2 if causal else full


def train_flops_per_token(cfg: ModelConfig, counts: ParamCounts, seq_len: int, causal: bool = True) -> float:
    return 6 * counts.matmul_active + attention_flops_per_token(cfg, seq_len, causal)


def recompute_factor(activation_checkpointing: str) -> float:
    """Hardware FLOPs / model FLOPs: full recompute repeats the forward (2 of the 6)."""
    return 4 / 3 if activation_checkpointing == "full" else 1.0


def mfu(flops_per_token: float, tokens_per_s: float, peak_tflops_per_device: float, devices: int) -> float:
    """Achieved FLOP/s over the dense peak of all devices."""
    return flops_per_token * tokens_per_s / (peak_tflops_per_device * 1e12 * devices)
