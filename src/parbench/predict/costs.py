"""Compute time of one training step on one device, op by op:

    dense GEMMs     6 x matmul parameters x tokens, each block matrix at the calibrated rate of its
                    own GEMM's size (the head at the MLP's; an unaligned vocabulary's at the calibrated
                    unaligned rate)
    attention       causal QK^T and AV (forward and backward), at attention's own calibrated rate
                    for the sequence's length
    element-wise    norms, RoPE, SwiGLU, residuals, the weights' casts and the loss over the logits:
                    bytes over the memory bandwidth, times what eager or compiled steps were measured
                    to move beyond that minimum
    optimizer       AdamW's (or SGD's) sweep over the parameters this device updates
    recompute       the share of the forward that the checkpointing mode repeats (measured)

The host's dispatch of a step is predict/host.py's."""

from __future__ import annotations

from dataclasses import dataclass

from parbench.config.schema import ModelConfig, head_width
from parbench.dtypes import GROUPED_DTYPE
from parbench.metrics.fits import by_count
from parbench.metrics.flops import attended_positions, attention_flops_per_token
from parbench.metrics.inference_cost import experts_reached
from parbench.predict.calibration import Calibration
from parbench.predict.elementwise import elementwise_seconds, layer_traffic
from parbench.predict.layout import Layout
from parbench.predict.memory import model_state_bytes
from parbench.models.shapes import FP32, aligned, numel, size

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


def gemm_call_seconds(cal: Calibration, flops: float, weight_bytes: float, rows: float | None = None) -> float:
    """One GEMM: its FLOPs at the rate of its size, or its weights' read at the memory's bandwidth where that is longer.
    A prefill GEMM of `rows` rows where the profile timed such GEMMs replayed in graphs (prefill_gemm_s): the table's
    time at its rows and size (rows clamped to the table's), or the rate curve where longer, the curve less what it
    puts above the table at the table's rows, at most its fixed cost. The matmul run times each call between events,
    which a replay does not pay: H100, 2.9-3.1 µs a call from 8 KiB to 8 MiB of weights at 64 to 4,096 rows, so a
    64-wide GEMM the curve put at 6.0 µs runs 2.3-2.9 in a graph at any of those rows
    (docs/results/2026-12-07_tiny31.md)."""
    curve = flops / cal.matmul_rate(flops)
    timed = cal.prefill_gemm_seconds(rows, weight_bytes) if rows is not None else None
    if timed is None:
        return max(curve, cal.weight_read_seconds(weight_bytes))
    at_table = flops * min(1.0, max(by_count(cal.prefill_gemm_s)) / rows)  # the same GEMM at the table's most rows
    above = min(max(0.0, at_table / cal.matmul_rate(at_table) - timed), matmul_fixed_seconds(cal))
    return max(timed, curve - above)


def matmul_fixed_seconds(cal: Calibration) -> float:
    """What the rate curve puts on every call beyond its FLOPs at the large-GEMM rate: matmul_half_gflop's."""
    return cal.matmul_half_gflop * 1e9 / (cal.matmul_tflops * 1e12)


def gemm_seconds(layout: Layout, cal: Calibration, gemm_tokens: float, flops_per_param: float,
                 matrices: list[int] | None = None, by_shape: bool = False) -> float:
    """The dense GEMMs but the head's: each block weight matrix's FLOPs (flops_per_param per
    parameter) as GEMMs over `gemm_tokens` rows on one tp rank, each at the rate of its own size
    (gemm_call_seconds), so a block's small projections (k and v under GQA, GPT-2's 1,600-wide ones)
    run below its MLP's rate; an MoE's experts as grouped GEMMs (expert_gemm_seconds). `matrices`: the block's GEMMs' elements
    where they are not its weights one by one (an inference engine's fused projections). `by_shape`: each
    of those as the profile timed a GEMM of its rows and size, where it did (an inference forward's)."""
    m, tp = layout.cfg.model, layout.dims.tp
    calls = flops_per_param * tp / (2 * gemm_tokens)  # GEMMs of each matrix (forward, backward's two)
    if matrices is None:
        matrices = [numel(shape) for name, shape in layout.shapes.block if len(shape) == 2 and ".experts." not in name]
    rows = gemm_tokens if by_shape else None
    own = sum(calls * m.layers * gemm_call_seconds(cal, 2 * gemm_tokens * p / tp, p * layout.dtype_bytes / tp, rows)
              for p in matrices)
    experts, expert_params = expert_gemm_seconds(layout, cal, gemm_tokens, calls)
    rest = layout.counts.matmul_active - sum(matrices) * m.layers - m.vocab * m.hidden - expert_params
    return own + experts + flops_per_param * rest / cal.matmul_rate(typical_gemm_flops(m, gemm_tokens, tp))


def expert_gemm_seconds(layout: Layout, cal: Calibration, gemm_tokens: float, calls: float) -> tuple[float, int]:
    """(seconds, active parameters) of an MoE's experts (replicated over tp, split over ep): each of a layer's three
    expert matrices a call over the tokens' top_k rows that reads the rank's experts they reach (models/moe.py). In
    bf16 one grouped GEMM (Calibration.grouped_gemm_seconds); else one GEMM per expert reached, over its share."""
    m, ep = layout.cfg.model, layout.dims.ep
    if not m.experts:
        return 0.0, 0
    flops = 2 * gemm_tokens * m.top_k * m.hidden * m.ffn
    reached = experts_reached(m, gemm_tokens * ep) / ep  # each rank's experts take tokens from every ep rank
    expert_bytes = m.hidden * m.ffn * layout.dtype_bytes
    per_call = (cal.grouped_gemm_seconds(flops, reached * expert_bytes, gemm_tokens * m.top_k / reached)
                if layout.dtype == GROUPED_DTYPE
                else reached * gemm_call_seconds(cal, flops / reached, expert_bytes))
    return 3 * m.layers * calls * per_call, 3 * m.layers * m.top_k * m.hidden * m.ffn


def head_flops(layout: Layout) -> float:
    """The head's GEMM FLOPs on one device of the last stage, which holds it and sets the pipeline's pace."""
    m = layout.cfg.model
    return 6 * m.vocab * m.hidden / layout.dims.tp * tokens_per_device(layout) * layout.dims.pp


def matmul_seconds(layout: Layout, cal: Calibration) -> tuple[float, float]:
    """(all dense GEMMs, the head's among them): the blocks' matrices at the rates of their sizes
    (gemm_seconds), the head's FLOPs shared evenly by the devices at the rate of the layout's typical
    GEMM, at the unaligned rate where the vocabulary is not a multiple of 8."""
    m = layout.cfg.model
    rate = cal.matmul_rate(typical_gemm_flops(m, layout.microbatch_tokens, layout.dims.tp))
    head_share = 6 * m.vocab * m.hidden * tokens_per_device(layout) / rate  # the head's FLOPs spread over the devices
    seconds = gemm_seconds(layout, cal, layout.microbatch_tokens, 6 * tokens_per_device(layout)) + head_share
    head = head_flops(layout) / rate
    if not aligned((m.vocab,)):
        head_gemm = 2 * layout.microbatch_tokens * m.vocab * m.hidden / layout.dims.tp
        unaligned = head_flops(layout) / cal.matmul_rate(head_gemm) * (1 / cal.unaligned_matmul_factor - 1)
        seconds, head = seconds + unaligned, head + unaligned
    return seconds, head


def attention_seconds(layout: Layout, cal: Calibration) -> float:
    """A step's attention on one device: its FLOPs, and its calls: one per layer of the stage and
    micro-batch, cp of them under context parallelism on GPUs (torch's ring attention calls SDPA once
    per ring step; the CPU path gathers K and V for one call)."""
    m = layout.cfg.model
    flops = attention_flops_per_token(m, layout.seq_len, causal=True) * tokens_per_device(layout)
    ring_steps = layout.dims.cp if layout.cfg.hardware.device_type == "cuda" else 1
    calls = m.layers / layout.dims.pp * layout.microbatches * ring_steps
    return cal.attention_seconds(flops, attended_positions(layout.seq_len, True, m.sliding_window), calls,
                                 head_width(m))


def block_elementwise_seconds(layout: Layout, cal: Calibration) -> float:
    """The blocks' element-wise kernels: each layer's forward (layer_traffic) and twice that backward."""
    tokens = layout.microbatch_tokens * layout.microbatches
    traffic = layer_traffic(layout, layout.compiled, qk_norm_factor=cal.qk_norm(layout.compiled))
    return elementwise_seconds(cal, layout.compiled, traffic, 3 * tokens * layout.cfg.model.layers / layout.dims.pp)


def streamed_bytes(layout: Layout) -> float:
    """The step's element-wise traffic beyond the blocks': the loss's softmax and cross-entropy over fp32
    logits; the weights cast to the compute dtype, and their gradients back (an MoE's every expert: H200, 2.5B MoE,
    4.1 and 3.2 ms of a compiled step; docs/results/2026-11-29_grouped31.md)."""
    m, d = layout.cfg.model, layout.dims
    tokens = layout.microbatch_tokens * layout.microbatches
    loss = 6 * tokens * m.vocab / d.tp * FP32
    casts = 2 * size(layout.stage) * (FP32 + layout.dtype_bytes) * layout.microbatches if layout.dtype_bytes < FP32 else 0
    return loss + casts


def optimizer_seconds(layout: Layout, cal: Calibration) -> float:
    params, _, _ = model_state_bytes(layout, layout.stage)
    traffic = OPTIMIZER_TRAFFIC.get(layout.cfg.workload.optimizer, 28) * params / FP32
    return traffic / (cal.membw_gbps * 1e9) * cal.optimizer_factor


def step_compute(layout: Layout, cal: Calibration) -> Compute:
    """The step's device work; checkpointing repeats a share of the blocks' forward (never the head's
    or the loss's)."""
    (matmul, head), attention = matmul_seconds(layout, cal), attention_seconds(layout, cal)
    blocks = block_elementwise_seconds(layout, cal)
    # the loss and the casts as one stream (a kernel with no rate of its own: at membw_gbps)
    elementwise = blocks + elementwise_seconds(cal, layout.compiled, {("stream", 0): streamed_bytes(layout)}, 1.0)
    blocks_forward = (matmul - head + attention + blocks) / 3
    recompute = cal.recompute_share(layout.compiled, layout.activation_checkpointing) * blocks_forward
    return Compute(matmul, attention, elementwise, optimizer_seconds(layout, cal), recompute)
