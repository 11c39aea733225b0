"""What one request batch computes and reads, from the model's shapes alone (no torch): the FLOPs
of a prefill and of a decode step, and the bytes a decode step reads. The measured runs use them
for MFU and MBU (workloads/inference/latency.py), the performance model for TTFT and TPOT
(predict/inference.py)."""

from __future__ import annotations

from parbench.config.schema import ModelConfig, head_width
from parbench.metrics.flops import attention_flops_per_token
from parbench.models import ParamCounts


def kv_bytes_per_position(model: ModelConfig, batch_size: int, itemsize: int) -> int:
    """K and V of one position for every sequence of the batch, over all layers and devices."""
    head_dim = head_width(model)
    return 2 * model.layers * model.kv_heads * head_dim * itemsize * batch_size


def mean_decode_context(input_len: int, output_len: int) -> float:
    """Positions a decode step attends over, on average: step i (1..output_len-1) sees input_len + i."""
    return input_len + output_len / 2


def experts_reached(model: ModelConfig, tokens: int) -> float:
    """Experts of a layer that `tokens` tokens reach on average, each routed to top_k of them as a balanced router
    spreads them (a token misses a given expert with probability 1 - top_k/experts): top_k for one token, all for many."""
    return model.experts * (1 - (1 - model.top_k / model.experts) ** tokens)


def decode_weights_read(model: ModelConfig, counts: ParamCounts, batch_size: int) -> float:
    """Weights a decode step of `batch_size` sequences multiplies: the active ones, and of an MoE every expert its
    tokens reach (experts_reached) where the active count holds top_k."""
    weights = float(counts.matmul_active)
    if model.experts and model.top_k < model.experts:
        experts = (counts.total - counts.active) * model.experts / (model.experts - model.top_k)  # all experts' weights
        weights += experts * (experts_reached(model, batch_size) - model.top_k) / model.experts
    return weights


def decode_bytes_per_step(model: ModelConfig, counts: ParamCounts, w, itemsize: int) -> tuple[float, float]:
    """Bytes one decode step must read from memory, over all devices: every weight that multiplies
    activations (decode_weights_read; the input embedding only reads a row per token, so it is left out) and
    the KV cache of the whole batch at the mean context length of the decode steps."""
    weight_bytes = decode_weights_read(model, counts, w.batch_size) * itemsize
    context = mean_decode_context(w.input_len, w.output_len)
    if model.sliding_window:  # a step reads only the window's positions
        context = min(context, model.sliding_window)
    return float(weight_bytes), float(kv_bytes_per_position(model, w.batch_size, itemsize) * context)


def prefill_attention_flops(model: ModelConfig, batch_size: int, input_len: int) -> float:
    """Forward FLOPs of the prompts' causal attention (attention_flops_per_token counts forward and
    backward: 3 forwards' worth)."""
    return batch_size * attention_flops_per_token(model, input_len, causal=True) / 3 * input_len


def prefill_flops(model: ModelConfig, counts: ParamCounts, batch_size: int, input_len: int) -> float:
    """Forward FLOPs of prefilling `batch_size` prompts of `input_len` tokens (causal convention)."""
    head = model.vocab * model.hidden
    return (batch_size * (2 * (counts.matmul_active - head) * input_len + 2 * head)
            + prefill_attention_flops(model, batch_size, input_len))


def decode_flops(model: ModelConfig, counts: ParamCounts, batch_size: int, context: float) -> float:
    """Forward FLOPs of one decode step: one token per sequence through every matmul, its query
    against all `context` cached positions (nothing masked)."""
    attention = attention_flops_per_token(model, context, causal=False) / 3
    return batch_size * (2 * counts.matmul_active + attention)
