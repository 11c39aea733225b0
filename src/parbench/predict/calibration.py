"""What the model knows about a machine: achieved matmul, attention and memory rates, what eager and
compiled steps add to the element-wise minimum, what checkpointing recomputes and keeps, a
latency-bandwidth fit per link scope, and how much of each strategy's communication hides behind
compute. A calibration profile (`parbench calibrate`, versioned) holds measured figures: the user's
own under the profile directory (~/.cache/parbench/calibrations, PARBENCH_CACHE_DIR), the shipped
ones in conf/calibrations; without one the hardware config's spec figures stand in (predict/profiles.py),
and the prediction says so (docs/plan.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, Optional

from parbench.metrics.fits import SmoothRoofline, along, by_count, on_line

VERSION = 6  # 6, 5: grouped GEMMs on a smooth roofline (4: a rate curve; 3: decode attention by shape; 2: recompute a share)
ATTENTION_FIELDS = ("attention_tflops", "attention_extra_positions", "attention_call_s", "attention_forward_tflops",
                    "attention_forward_extra_positions", "attention_forward_call_s")

SPEC_MATMUL_HALF_GFLOP = 1.0  # a GEMM of this many FLOPs runs at half the large-GEMM rate (launch and tail effects)
# Fraction of each strategy's communication hidden behind compute, measured on 2 H200s (1.5B model, seq 4096;
# docs/results/2026-11-22_session3.md, 2026-11-22_h200x2.md). ZeRO's bucketed collectives are taken as fsdp's.
MEASURED_OVERLAP = {"dp": 0.867, "fsdp": 0.854, "zero": 0.854, "tp": 0.0, "pp": 0.0, "cp": 0.668, "ep": 0.142}
# Strategies whose wrappers add host work to an eager step's dispatches: tp (DTensor's dispatch of the sharded layers'
# ops), sp (its norms and activations' too), fsdp (FSDP2's hooks and copies), cp (its attention's dispatch and ring)
HOST_STRATEGIES = ("tp", "sp", "fsdp", "cp")
# Until measured: selective checkpointing recomputes the forward's element-wise share, full the whole forward.
SPEC_RECOMPUTE = {"none": 0.0, "selective": 0.15, "full": 1.0}

# What a GPU's idle time grows with beyond the step, by mode (device_idle_s's second key; predict/host.py)
IDLE_UNIT = {"eager": "per_dispatch", "compiled": "per_layer"}


def step_mode(compiled: bool) -> str:
    return "compiled" if compiled else "eager"  # the key of the figures by kind of step


def mode_key(compiled: bool, checkpointing: str) -> str:
    """The key of the per-mode figures: eager/none, compiled/full, ..."""
    return f"{step_mode(compiled)}/{checkpointing}"


# Positions a decode attention kernel reads a tile (cuDNN's, FlashAttention's): a part-filled tile costs a full one
# (H200, 256 blocks: 34.6 µs at 1,024 positions, 41.5 at 1,088; docs/results/2026-11-28_decode_grid31.md)
KV_TILE = 128


def kv_tiled(positions: float) -> float:  # positions rounded up to whole KV tiles: what a decode attention call reads
    return math.ceil(positions / KV_TILE) * KV_TILE


@dataclass
class LinkFit:
    """t(bytes) = latency_s + bytes x bus factor / busbw (nccl-tests' bus bandwidth convention)."""

    latency_s: float = 0.0
    busbw_gbps: float = 0.0


@dataclass
class Calibration:
    version: int = VERSION
    hardware: str = ""
    source: str = "spec"  # spec | measured (with the command and date)
    dtype: str = "bf16"  # the dtype matmul_tflops was measured in
    matmul_tflops: float = 0.0  # achieved on large GEMMs, per device
    matmul_half_gflop: float = SPEC_MATMUL_HALF_GFLOP
    # An unaligned GEMM's rate (a dimension whose rows are not 16-byte aligned, as GPT-2's 50,257-token
    # vocabulary) over an aligned one's of its size; 1.0 where not measured.
    unaligned_matmul_factor: float = 1.0
    # A grouped GEMM's (an MoE's experts, F.grouped_mm) metrics.fits.SmoothRoofline: its rate, its read of the matrices
    # given rows at one row each and the power of the rows it reads faster by, a call's fixed cost, the smooth maximum's
    # exponent (1: compute and read added; large: the longer): the grouped runs'; 0: plain GEMMs' figures.
    grouped_matmul_tflops: float = 0.0
    grouped_read_gbps: float = 0.0
    grouped_read_rows_exp: float = 0.0
    grouped_call_s: float = 0.0
    grouped_roofline_p: float = 0.0
    membw_gbps: float = 0.0  # achieved streaming bandwidth, per device
    intra_node: LinkFit = field(default_factory=LinkFit)
    inter_node: LinkFit = field(default_factory=LinkFit)
    overlap: Dict[str, float] = field(default_factory=lambda: dict(MEASURED_OVERLAP))
    memory_overhead_gb: float = 0.0  # what a rank holds beyond its tensors (measured: peak minus tensors)
    # Host time of an eager training step that the device model does not count (Python and op
    # dispatch): per step, plus per dispatch (a torch call of the Python forward or an aten op of the
    # autograd engine's backward: models/dispatch_table.py counts both per layer), plus what a
    # checkpointed layer adds per layer and per call of the forward it replays, by mode (full, selective); a profile
    # without the per-dispatch cost has one figure per layer instead.
    host_s_per_step: float = 0.0
    host_s_per_dispatch: float = 0.0
    host_s_per_replayed_call: Dict[str, float] = field(default_factory=dict)
    host_s_per_replayed_layer: Dict[str, float] = field(default_factory=dict)
    host_s_per_layer: float = 0.0
    host_s_per_layer_compiled: float = 0.0  # a compiled block's dispatch (0: the eager figure)
    # What an MoE layer's eager dispatch costs beyond its counted calls and ops (routing and grouped GEMM calls weigh more),
    # per layer pass: the host_moe run's in its dtype (in fp32, a CPU's, the tiny MoE's loop over 4 experts); 0: none.
    host_s_per_moe_layer: float = 0.0
    # What a dispatch costs beyond host_s_per_dispatch under a strategy whose wrappers add host work to an eager
    # step (HOST_STRATEGIES: tp's and sp's DTensor dispatch of the sharded layers' ops, FSDP2's hooks and copies),
    # by strategy; empty where not measured (one device).
    host_s_per_dispatch_by_strategy: Dict[str, float] = field(default_factory=dict)
    # An eager step's {"per_step", "per_dispatch"} on two or more ranks (each rank's collectives wait on the others'
    # hosts: H200, 12.9 µs a dispatch on two, 4.7 on one), saved by a calibration on several ranks, kept by one device's.
    host_s_several_ranks: Dict[str, float] = field(default_factory=dict)
    attention_tflops: float = 0.0  # causal attention's rate on long sequences (0: the large-GEMM rate)
    # What each query costs beyond its keys, in keys: a short sequence's attention runs at
    # attended / (attended + this) of attention_tflops (the masked diagonal tiles, each row's softmax
    # statistics); 0 where not measured.
    attention_extra_positions: float = 0.0
    # What each call of attention's forward and backward costs beyond its FLOPs (its kernels' ramp and
    # tail, which small batches show), per layer and micro-batch; 0 where not measured.
    attention_call_s: float = 0.0
    # The same three figures of the forward alone (a prefill's); 0: the forward and backward's.
    attention_forward_tflops: float = 0.0
    attention_forward_extra_positions: float = 0.0
    attention_forward_call_s: float = 0.0
    # The six attention_* figures above by head width ("64", "128": the attention run's shapes of that
    # width alone; a 128-wide head runs its FLOPs faster); empty: the figures above for every width.
    attention_widths: Dict[str, Dict[str, float]] = field(default_factory=dict)
    # Element-wise kernels' GB/s of their minimum bytes by eager/compiled, kernel and row width (the elementwise
    # run's; predict/elementwise.py reads them); empty where not measured: membw_gbps for every kernel.
    elementwise_gbps: Dict[str, Dict[str, Dict[str, float]]] = field(default_factory=dict)
    elementwise_factor: Dict[str, float] = field(default_factory=dict)  # time over that minimum (fitted residual)
    # Qwen3's q and k norms (one per head, over head_dim elements) per byte over the rest of the
    # element-wise work, by eager/compiled; 1 where not measured.
    qk_norm_factor: Dict[str, float] = field(default_factory=dict)
    # Share of the blocks' forward that checkpointing recomputes, by mode_key (else by mode, SPEC_RECOMPUTE).
    recompute: Dict[str, float] = field(default_factory=dict)
    # Measured / modelled saved activations, by mode_key; the loss's bytes per logit, by eager/compiled.
    activation_scale: Dict[str, float] = field(default_factory=dict)
    logits_bytes: Dict[str, float] = field(default_factory=dict)
    # What the peak holds per element of the output head's weight beyond the bytes per logit (fitted
    # with them from two batches: the peak's part that does not grow with the tokens), by eager/compiled.
    head_grad_bytes: Dict[str, float] = field(default_factory=dict)
    # The optimizer's kernels' time over its bytes at membw_gbps (several tensors streamed at once fall
    # short of a copy's bandwidth); 1 where not measured.
    optimizer_factor: float = 1.0
    # A GPU's idle time between a step's kernels (each launch's gap; the step's start after the last
    # one's sync), by eager/compiled: {"per_step", "per_dispatch"} (an eager step's calls and ops) or
    # {"per_step", "per_layer"} (a compiled step's layer passes); empty where not measured.
    device_idle_s: Dict[str, Dict[str, float]] = field(default_factory=dict)
    # Inference host time: an eager prefill's dispatch (hidden behind the device's work on a GPU)
    # and what each decode step adds (launch, sampling, the token to the host), per step and per layer.
    prefill_host_s: Dict[str, float] = field(default_factory=dict)
    decode_host_s: Dict[str, float] = field(default_factory=dict)
    # What a prefill replayed as a CUDA graph adds to its kernels, per step and per layer: the graph's
    # launch, its kernels' latencies, the first token's copy and the wait for it, none of it behind an
    # earlier step (a decode step's launch is); empty where not measured: a decode step's. With "per_kernel"
    # (the layer's figure over its kernels) a model whose block structure prefill_kernels_per_layer holds
    # takes it per kernel of its layer: the gaps between kernels and the short kernels' floors go by count.
    prefill_graph_host_s: Dict[str, float] = field(default_factory=dict)
    # Kernels a layer of compiled blocks runs in a replayed prefill (the engine's default on a GPU), by
    # models.block_structure (H200, 4 x 128 tokens: `gpt2/mha` 12.25, `llama/gqa` 16.0), counted by the
    # calibration's engine runs (prefill_kernels); empty where not counted.
    prefill_kernels_per_layer: Dict[str, float] = field(default_factory=dict)
    # A decode step's attention reads its KV cache this many times slower than a stream (1.0 where
    # not measured): small per-sequence reads, and the masked positions of a static buffer.
    kv_read_factor: float = 1.0
    # A decode step's GEMM of few rows (a GEMV), as the engine replays it in a graph: seconds of one call by
    # the bytes of its weights (a string key: bytes), measured from 8 KiB to 512 MiB by the calibration's
    # decode_matmul run (a GPU's); between two sizes on the line through them, beyond the largest at
    # decode_gemm_gbps, below the smallest as the smallest. Empty where not measured: the weights at
    # membw_gbps.
    decode_gemm_s: Dict[str, float] = field(default_factory=dict)
    decode_gemm_gbps: float = 0.0
    # An unaligned decode GEMM's time over an aligned one's of its weights' size (GPT-2's 50,257-token head, which
    # runs a slower kernel: H100, 3.6x), from the decode_matmul run's unaligned shape; 1.0 where not measured.
    decode_unaligned_factor: float = 1.0
    # A prefill's GEMM of few rows, timed so by the prefill_matmul run (a GPU's): seconds of one call by "ROWSxBYTES"
    # (the weights' bytes), two or more sizes at each of two or more row counts, up to where its FLOPs set its time;
    # read along the sizes, then the counts, each clamped (prefill_gemm_seconds), never below the weights' read at
    # membw_gbps; a GEMM takes that or the curve less its events' cost (costs.gemm_call_seconds). Empty: the read.
    prefill_gemm_s: Dict[str, float] = field(default_factory=dict)
    # The engine's decode step reads its weights this many times slower than a stream at membw_gbps, fitted
    # where decode_gemm_s is not measured (with it, 1: those GEMMs' times are the engine's, and what a layer
    # adds beyond them is decode_host_s's per layer); 1.0 where not measured.
    weight_read_factor: float = 1.0
    # A decode step's attention call by its shape, from the attention microbenchmark's decode shapes (a
    # GPU's), by kind: "64", "128" (grouped queries) and "64/mha", "128/mha" (one query per KV head). Each
    # holds the seconds of one call by "BLOCKSxPOSITIONS" (blocks: sequences x KV heads; positions: the
    # cache's length), two or more lengths at each of two or more block counts: a call's time is
    # read along the lengths at each count (the positions in whole KV tiles), then along the counts (piecewise
    # linear, the end segments extended). Empty where not measured: the cache at kv_read_factor.
    decode_attention_s: Dict[str, Dict[str, float]] = field(default_factory=dict)
    notes: Optional[str] = None

    @property
    def is_spec(self) -> bool:
        return self.source == "spec"

    def label(self, hardware: str) -> str:
        """Where the figures come from, as a prediction names them."""
        return f"spec figures of hardware={hardware}" if self.is_spec else self.source

    def matmul_rate(self, gemm_flops: float) -> float:
        """Achieved FLOP/s on a GEMM of this size: the large-GEMM rate, halved at matmul_half_gflop."""
        return self.matmul_tflops * 1e12 * gemm_flops / (gemm_flops + self.matmul_half_gflop * 1e9)

    def grouped_gemm_seconds(self, flops: float, weight_bytes: float, rows: float) -> float:
        """One grouped GEMM call reading `weight_bytes` of matrices (few rows in all: its reached experts'), `rows` a
        matrix; where not measured, its FLOPs at the plain rate curve or that read at the memory's bandwidth, the longer."""
        if not self.grouped_matmul_tflops:
            return max(flops / self.matmul_rate(flops), self.weight_read_seconds(weight_bytes))
        return float(SmoothRoofline(self.grouped_matmul_tflops * 1e12, self.grouped_read_gbps * 1e9, self.grouped_call_s,
                                    self.grouped_roofline_p, self.grouped_read_rows_exp)(flops, weight_bytes, max(rows, 1.0)))

    def decode_gemm_seconds(self, weight_bytes: float) -> float:
        """One decode GEMM reading `weight_bytes` of weights (decode_gemm_s)."""
        if not self.decode_gemm_s:
            return weight_bytes / (self.membw_gbps * 1e9)
        points = sorted((float(b), s) for b, s in self.decode_gemm_s.items())
        if weight_bytes >= points[-1][0]:
            return points[-1][1] + (weight_bytes - points[-1][0]) / (self.decode_gemm_gbps * 1e9)
        if weight_bytes <= points[0][0]:
            return points[0][1]
        (b0, s0), (b1, s1) = next((a, b) for a, b in zip(points, points[1:]) if weight_bytes <= b[0])
        return on_line(weight_bytes, b0, s0, b1, s1)

    def prefill_gemm_seconds(self, rows: float, weight_bytes: float) -> Optional[float]:
        """A prefill GEMM's memory side as prefill_gemm_s times one of `rows` rows on `weight_bytes` of weights
        (along the sizes, then the row counts, each clamped as the field says); None without the table."""
        if not self.prefill_gemm_s:
            return None
        sizes = by_count(self.prefill_gemm_s)
        at = [(count, along(points, max(weight_bytes, points[0][0]))) for count, points in sizes.items()]
        return max(self.weight_read_seconds(weight_bytes), along(at, min(max(rows, min(sizes)), max(sizes))))

    def weight_read_seconds(self, weight_bytes: float) -> float:  # at membw_gbps (0 where the profile has none)
        return weight_bytes / (self.membw_gbps * 1e9) if self.membw_gbps else 0.0

    def attention_at(self, head_dim: int) -> dict[str, float]:
        """The attention figures (ATTENTION_FIELDS) of the measured head width nearest this one (the
        wider of two as near), else the profile's."""
        if not self.attention_widths:
            return {f: getattr(self, f) for f in ATTENTION_FIELDS}
        return self.attention_widths[min(self.attention_widths, key=lambda k: (abs(int(k) - head_dim), -int(k)))]

    def attention_seconds(self, flops: float, attended: float, calls: float, head_dim: int,
                          forward_only: bool = False) -> float:
        """Attention's time in `calls` calls of heads `head_dim` wide, where each query attends `attended`
        keys on average: its FLOPs at the long-sequence rate, as if each query attended
        attention_extra_positions more, plus each call's fixed cost."""
        f = self.attention_at(head_dim)
        tflops, extra, call_s = f["attention_tflops"] or self.matmul_tflops, f["attention_extra_positions"], f["attention_call_s"]
        if forward_only and f["attention_forward_tflops"]:
            tflops, extra = f["attention_forward_tflops"], f["attention_forward_extra_positions"]
            call_s = f["attention_forward_call_s"]
        return flops * (1 + extra / attended) / (1e12 * tflops) + calls * call_s

    def decode_attention_call_s(self, head_dim: int, grouped: bool, blocks: float, positions: float) -> float:
        """One decode attention call over `positions` cached positions in `blocks` (sequence, KV head) pairs:
        the decode_attention_s kind nearest this one (the same kind where measured, the nearest head width, the
        wider of two as near), along its lengths at each block count and then along the counts; fewer blocks
        than its fewest take as long as its fewest, one wave of them."""
        kinds = [k for k, calls in self.decode_attention_s.items() if calls]
        if not kinds:
            raise ValueError("decode_attention_s holds no calls")
        same_kind = [k for k in kinds if k.endswith("/mha") != grouped] or kinds
        widths = {k: int(k.split("/")[0]) for k in same_kind}
        table = self.decode_attention_s[min(same_kind, key=lambda k: (abs(widths[k] - head_dim), -widths[k]))]
        lengths = by_count(table)
        at = [(count, along(points, kv_tiled(positions))) for count, points in lengths.items()]
        return max(0.0, along(at, max(blocks, min(lengths))))

    def inference_host(self, phase: str, layers: float, structure: str = "") -> float:
        """Host seconds of one prefill (launched or replayed: "prefill_graph") or decode step of a model
        with this many layers per rank, whose blocks are of this structure (models.block_structure)."""
        figures = {"prefill": self.prefill_host_s,
                   "prefill_graph": self.prefill_graph_host_s or self.decode_host_s}.get(phase, self.decode_host_s)
        kernels = self.prefill_kernels_per_layer.get(structure) if phase == "prefill_graph" else None
        per_layer = figures["per_kernel"] * kernels if kernels and "per_kernel" in figures else figures.get("per_layer", 0.0)
        return figures.get("per_step", 0.0) + per_layer * layers

    def host_figures(self, ranks: int) -> dict[str, float]:
        """The host's figures per step and per dispatch of an eager step on this many ranks."""
        figures = {"per_step": self.host_s_per_step, "per_dispatch": self.host_s_per_dispatch}
        return {**figures, **self.host_s_several_ranks} if ranks > 1 else figures

    def dispatch_seconds(self, strategies: tuple[str, ...], ranks: int = 1) -> float:
        """An eager dispatch's host cost on `ranks` under these HOST_STRATEGIES: the plain cost and each one's beyond."""
        return self.host_figures(ranks)["per_dispatch"] + sum(self.host_s_per_dispatch_by_strategy.get(s, 0.0)
                                                               for s in strategies)

    def elementwise(self, compiled: bool) -> float:
        return self.elementwise_factor.get(step_mode(compiled), 1.0)

    def qk_norm(self, compiled: bool) -> float:
        return self.qk_norm_factor.get(step_mode(compiled), 1.0)

    def recompute_share(self, compiled: bool, checkpointing: str) -> float:
        """Share of the blocks' forward that checkpointing repeats: this mode's figure, else eager's, else spec."""
        for key in (mode_key(compiled, checkpointing), mode_key(False, checkpointing)):
            if key in self.recompute:
                return self.recompute[key]
        return SPEC_RECOMPUTE[checkpointing]

    def activation_factor(self, compiled: bool, checkpointing: str) -> float:
        return self.activation_scale.get(mode_key(compiled, checkpointing),
                                         self.activation_scale.get(mode_key(False, checkpointing), 1.0))
