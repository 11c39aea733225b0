"""Memory per device of a training layout: parameters, gradients and optimizer states of the shard it
holds (tp/pp split, fsdp or ZeRO sharding), activations by checkpointing mode and micro-batches in
flight (scaled by what the calibration measured for the mode, eager or compiled), the loss's logits
and the output head's gradient (bytes per logit and per head element, measured eager and compiled),
the weights' casts to the compute dtype, communication buffers, and the runtime's own overhead.

Parameters stay fp32 (autocast and FSDP2's mixed precision compute in the workload dtype from fp32
weights), so a parameter costs 4 B, its gradient 4 B and AdamW's two moments 8 B. The peak is the
larger of two moments: the start of backward (activations, logits, the head's gradient and the casts,
no other gradient: they are set to None after each step) and its end (every gradient and the casts
autocast still caches, the activations freed)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from parbench.config.schema import ZeroConfig, head_width
from parbench.predict.calibration import Calibration, step_mode
from parbench.predict.layout import Layout
from parbench.models.shapes import FP32, Named, dim0_shard, size
from parbench.dtypes import GB

LOGITS_BYTES = 2 * FP32  # per logit until measured: the fp32 logits and their gradient
OPTIMIZER_BYTES = {"adamw": 8, "sgd": 0}  # per parameter: AdamW's exp_avg and exp_avg_sq; plain SGD none


@dataclass(frozen=True)
class MemoryEstimate:
    params_gb: float
    grads_gb: float
    optimizer_gb: float
    activations_gb: float
    logits_gb: float
    head_grad_gb: float
    casts_gb: float
    cached_casts_gb: float  # of casts_gb, still held when backward ends
    buffers_gb: float
    overhead_gb: float

    @property
    def model_states_gb(self) -> float:
        return self.params_gb + self.grads_gb + self.optimizer_gb

    @property
    def backward_start_gb(self) -> float:
        """As backward starts, through the loss's and the head's: every saved activation, the weights'
        casts it needs, the loss's logits and the head's gradient, no other gradient yet (the optimizer
        sets them to None after each step)."""
        return (self.params_gb + self.optimizer_gb + self.casts_gb + self.activations_gb + self.logits_gb
                + self.head_grad_gb)

    @property
    def total_gb(self) -> float:
        """The peak: the start of backward, or its end (every gradient and the casts still cached, the
        activations freed)."""
        backward_end = self.model_states_gb + self.cached_casts_gb
        return max(self.backward_start_gb, backward_end) + self.buffers_gb + self.overhead_gb

    def as_dict(self) -> dict[str, float]:
        return {"params_gb": self.params_gb, "grads_gb": self.grads_gb, "optimizer_gb": self.optimizer_gb,
                "params_grads_optimizer_gb": self.model_states_gb, "activations_gb": self.activations_gb,
                "logits_gb": self.logits_gb, "head_grad_gb": self.head_grad_gb, "casts_gb": self.casts_gb,
                "cached_casts_gb": self.cached_casts_gb, "buffers_gb": self.buffers_gb, "overhead_gb": self.overhead_gb,
                "total_gb": self.total_gb}


def model_state_bytes(layout: Layout, named: Named) -> tuple[float, float, float]:
    """Bytes of (params, grads, optimizer states) on one device: DDP replicates, FSDP2 shards dim 0
    over fsdp x cp, DeepSpeed ZeRO partitions by stage over the dp ranks (offloaded states on the host)."""
    opt = OPTIMIZER_BYTES.get(layout.cfg.workload.optimizer, 8)
    zero: ZeroConfig = layout.cfg.parallel.zero
    if "zero" in layout.enabled:
        n, dp = size(named), layout.dims.dp
        params = 0.0 if zero.offload_param else FP32 * n / (dp if zero.stage == 3 else 1)
        grads = FP32 * n / (dp if zero.stage >= 2 else 1)
        optimizer = 0.0 if zero.offload_optimizer else opt * n / (dp if zero.stage >= 1 else 1)
        return params, grads, optimizer
    held = dim0_shard(named, layout.dims.fsdp * layout.dims.cp) if "fsdp" in layout.enabled else size(named)
    return FP32 * held, FP32 * held, opt * held


def activation_elements_per_token(layout: Layout, mode: str) -> float:
    """Elements one block keeps per token for backward, on one tp rank. none: every input the
    backward needs (norm inputs and outputs, q/k/v, attention output, the MLP's inner activations:
    SwiGLU's two products, the activation and their product, or GELU's input and output,
    residuals); selective: the block input and every matmul and attention output; full: the block
    input only."""
    m, tp = layout.cfg.model, layout.dims.tp
    hd = head_width(m)
    q, kv = m.heads * hd / tp, 2 * m.kv_heads * hd / tp
    ffn = m.ffn * (m.top_k if m.experts else 1) / tp
    h = m.hidden / (tp if layout.cfg.parallel.sp else 1)  # sequence parallel splits the norm regions
    products = 2 if layout.family.gated_mlp else 1  # ffn-wide matmul outputs
    if mode == "full":
        return h
    if mode == "selective":
        return 3 * h + 2 * q + kv + products * ffn
    return 4 * h + 2 * q + kv + 2 * products * ffn


def microbatches_in_flight(layout: Layout) -> int:
    """Micro-batches whose activations the first stage holds at once: all of them under GPipe,
    up to pp under 1F1B (and its interleaved and zero-bubble forms, per stage it holds)."""
    if layout.dims.pp == 1:
        return 1
    m = layout.microbatches
    return m if layout.cfg.parallel.pp_schedule == "gpipe" else min(m * layout.stages_per_rank, layout.dims.pp
                                                                    * layout.stages_per_rank)


def activation_bytes(layout: Layout) -> float:
    """Saved activations of the stage's layers for the micro-batches in flight; under full
    checkpointing, plus one block's whole set while backward recomputes it."""
    mode = layout.activation_checkpointing
    per_token = activation_elements_per_token(layout, mode)
    layers = layout.cfg.model.layers // layout.dims.pp
    elements = per_token * layers * microbatches_in_flight(layout) / layout.stages_per_rank
    if mode == "full":
        elements += activation_elements_per_token(layout, "none")
    return elements * layout.microbatch_tokens * layout.dtype_bytes


def logits_elements(layout: Layout) -> float:
    """Logits of one micro-batch on the last stage (vocab split over tp)."""
    return layout.microbatch_tokens * layout.cfg.model.vocab / layout.dims.tp


def logits_bytes(layout: Layout, cal: Calibration | None) -> float:
    """What the loss holds per logit: measured for eager or compiled steps, else fp32 logits and gradient."""
    per_logit = cal.logits_bytes.get(step_mode(layout.compiled), LOGITS_BYTES) if cal else LOGITS_BYTES
    return logits_elements(layout) * per_logit


def weight_matrices(layout: Layout) -> tuple[float, float, float]:
    """Elements of the stage's weights that enter a matmul: (the blocks' matrices, the MoE's expert
    stacks, the output head's: the tied embedding's table; neither the lookups of an untied embedding nor
    learned positions enter one)."""
    tied = layout.cfg.model.tie_embeddings
    blocks = [(n, math.prod(s)) for n, s in layout.stage if n.startswith("layers.") and len(s) > 1]
    head = sum(math.prod(s) for n, s in layout.stage if n == "output.weight" or (tied and n == "tok_embeddings.weight"))
    experts = sum(size for n, size in blocks if ".experts." in n)
    return sum(size for _, size in blocks) - experts, experts, head


def head_grad_bytes(layout: Layout, cal: Calibration | None) -> float:
    """What the peak holds per element of the output head's weight beyond the loss's bytes per logit
    (its gradient, where the loss's are still alive): measured eager or compiled, else none."""
    head = weight_matrices(layout)[2]
    return head * (cal.head_grad_bytes.get(step_mode(layout.compiled), 0.0) if cal else 0.0)


def weight_cast_bytes(layout: Layout) -> tuple[float, float]:
    """The matmul weights' casts to the compute dtype that backward starts with, and those it ends with.
    Autocast casts each weight once, at its first use in the forward, and caches the copy until the step
    leaves autocast; on a GPU a checkpointed block's recompute (autograd's device thread entering and
    leaving autocast) clears the cache, so with checkpointing none is left at the end. A compiled block
    neither fills nor clears the cache: the eager head's cast stays to the end. An MoE's experts are
    indexed views, which autocast casts anew at each use without caching: saved for backward without
    checkpointing, not held with it. None where the strategy keeps bf16 weights itself."""
    if not layout.autocast:
        return 0.0, 0.0
    linear, experts, head = weight_matrices(layout)
    unchecked = layout.activation_checkpointing == "none"
    start = linear + head + (experts if unchecked else 0)
    if layout.compiled:  # its recompute runs inside the compiled block, which neither fills nor clears the cache
        end = head
    else:
        end = linear + head if unchecked or layout.cfg.hardware.device_type == "cpu" else 0
    return start * layout.dtype_bytes, end * layout.dtype_bytes


def buffer_bytes(layout: Layout, grads: float) -> float:
    """Communication buffers: FSDP2's all-gathered block in the compute dtype (the next one
    prefetched) and its fp32 reduce-scatter input; DDP's gradient buckets, a copy of every gradient
    (its reducer allocates them all when it wraps the model, and backward copies each gradient in)."""
    if "fsdp" in layout.enabled or ("zero" in layout.enabled and layout.cfg.parallel.zero.stage == 3):
        return layout.block_on_rank * (2 * layout.dtype_bytes + FP32)
    return grads if "dp" in layout.enabled else 0.0


def estimate_memory(layout: Layout, cal: Calibration | None = None) -> MemoryEstimate:
    """Per device; without a calibration, the tensors alone (activations unscaled, no overhead)."""
    params, grads, optimizer = model_state_bytes(layout, layout.stage)
    scale = cal.activation_factor(layout.compiled, layout.activation_checkpointing) if cal else 1.0
    casts, cached = weight_cast_bytes(layout)
    return MemoryEstimate(params / GB, grads / GB, optimizer / GB, scale * activation_bytes(layout) / GB,
                          logits_bytes(layout, cal) / GB, head_grad_bytes(layout, cal) / GB, casts / GB, cached / GB,
                          buffer_bytes(layout, grads) / GB, cal.memory_overhead_gb if cal else 0.0)
