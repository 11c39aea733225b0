"""Compute time of one training step on one device, op by op:

    dense GEMMs     6 x matmul parameters x tokens, at the calibrated rate of the layout's GEMM size
    attention       causal QK^T and AV (forward and backward), at attention's own calibrated rate
    element-wise    norms, RoPE, SwiGLU, residuals, the weights' casts and the loss over the logits:
                    bytes over the memory bandwidth, times what eager or compiled steps were measured
                    to move beyond that minimum
    optimizer       AdamW's (or SGD's) sweep over the parameters this device updates
    recompute       the share of the forward that the checkpointing mode repeats (measured)
    host            Python dispatch per step and per layer and micro-batch (measured)"""

from __future__ import annotations

from dataclasses import dataclass

from parbench.config.schema import ModelConfig
from parbench.metrics.flops import attention_flops_per_token
from parbench.predict.calibration import Calibration
from parbench.predict.layout import Layout
from parbench.predict.memory import model_state_bytes
from parbench.models.shapes import FP32, size

# Bytes each parameter's optimizer step reads and writes: AdamW reads p, g and both moments and
# writes p and the moments (28 B at fp32); SGD reads p and g and writes p (12 B).
OPTIMIZER_TRAFFIC = {"adamw": 28, "sgd": 12}


@dataclass(frozen=True)
class Compute:
    """Seconds of one step's device work on one device, by kind of op."""

    matmul_s: float
    attention_s: float
    elementwise_s: float
    optimizer_s: float
    recompute_s: float

    @property
    def forward_s(self) -> float:
        """Forward is a third of forward and backward (backward computes two products per one)."""
        return (self.matmul_s + self.attention_s + self.elementwise_s) / 3

    @property
    def total_s(self) -> float:
        return self.matmul_s + self.attention_s + self.elementwise_s + self.optimizer_s + self.recompute_s

    @property
    def memory_bound_s(self) -> float:
        return self.elementwise_s + self.optimizer_s


def typical_gemm_flops(m: ModelConfig, tokens: float, tp: int) -> float:
    """The GEMM whose size sets the matmul rate: `tokens` through the MLP's first matrix on one tp rank."""
    return 2 * tokens * m.hidden * m.ffn / tp


def tokens_per_device(layout: Layout) -> float:
    return layout.tokens_per_step / layout.dims.world_size


def matmul_seconds(layout: Layout, cal: Calibration) -> float:
    """The dense GEMMs' FLOPs shared evenly by the devices, at the rate of the layout's typical GEMM."""
    gemm = typical_gemm_flops(layout.cfg.model, layout.microbatch_tokens, layout.dims.tp)
    return 6 * layout.counts.matmul_active * tokens_per_device(layout) / cal.matmul_rate(gemm)


def attention_seconds(layout: Layout, cal: Calibration) -> float:
    flops = attention_flops_per_token(layout.cfg.model, layout.seq_len, causal=True)
    return flops * tokens_per_device(layout) / cal.attention_rate()


def elementwise_bytes(layout: Layout) -> float:
    """The minimum element-wise traffic: forward per layer and token reads and writes the norms (4h),
    residual adds (6h), RoPE on q and k (none with learned positions) and the MLP's activation
    (SwiGLU: 3 ffn, GELU: 2 ffn), backward twice that; the loss's softmax and cross-entropy over
    fp32 logits; the weights cast to the compute dtype."""
    m, d, fam = layout.cfg.model, layout.dims, layout.family
    hd = m.head_dim or m.hidden // m.heads
    h = m.hidden / (d.tp if layout.cfg.parallel.sp else 1)
    rope = 0 if fam.learned_positions else 2 * (m.heads + m.kv_heads) * hd / d.tp
    forward = 10 * h + rope + (3 if fam.gated_mlp else 2) * m.ffn * (m.top_k or 1) / d.tp
    tokens = layout.microbatch_tokens * layout.microbatches
    layers = 3 * forward * tokens * layout.dtype_bytes * m.layers / d.pp
    loss = 6 * tokens * m.vocab / d.tp * FP32
    casts = size(layout.stage) * (FP32 + layout.dtype_bytes) * layout.microbatches if layout.dtype_bytes < FP32 else 0
    return layers + loss + casts


def optimizer_seconds(layout: Layout, cal: Calibration) -> float:
    params, _, _ = model_state_bytes(layout, layout.stage)
    return OPTIMIZER_TRAFFIC.get(layout.cfg.workload.optimizer, 28) * params / FP32 / (cal.membw_gbps * 1e9)


def step_compute(layout: Layout, cal: Calibration) -> Compute:
    matmul, attention = matmul_seconds(layout, cal), attention_seconds(layout, cal)
    elementwise = elementwise_bytes(layout) / (cal.membw_gbps * 1e9) * cal.elementwise(layout.compiled)
    forward = (matmul + attention + elementwise) / 3
    recompute = cal.recompute_share(layout.compiled, layout.activation_checkpointing) * forward
    return Compute(matmul, attention, elementwise, optimizer_seconds(layout, cal), recompute)


def host_seconds(layout: Layout, cal: Calibration) -> float:
    """Dispatch time of one step on the host: per step, plus per layer of the stage and micro-batch."""
    per_layer = (layout.compiled and cal.host_s_per_layer_compiled) or cal.host_s_per_layer
    return cal.host_s_per_step + per_layer * layout.cfg.model.layers / layout.dims.pp * layout.microbatches


def exposed_host_seconds(device_s: float, host_s: float, on_cpu: bool) -> float:
    """What dispatch adds to the step: all of it on a CPU, which runs each op as the host dispatches
    it; on a GPU only what the device's work does not cover (the host queues kernels ahead)."""
    return host_s if on_cpu else max(0.0, host_s - device_s)
