"""Latency of one request batch of the native inference engine under tp x pp, from the parts the
training step is made of: matmul FLOPs at the calibrated rate of their GEMM size, bytes over the
calibrated memory bandwidth, and tp's and pp's collectives through the latency-bandwidth fits.

A batch's forward passes the pipeline's stages one after the other, so its time is the sum over
the stages of one tp rank's work, i.e. the whole model's work over tp:

    TTFT = max(each GEMM as the profile timed its shape replayed, or its FLOPs / tp at the rate of its size
               (costs.gemm_call_seconds) + attention + element-wise traffic / tp / bandwidth,
               prefill dispatch)
           + tp all-reduces + pp sends     (a prefill replayed as a CUDA graph: its launch, latencies and first token's wait add)
    TPOT = max(decode FLOPs / tp / peak rate, GEMMs + attention) + decode step's host time (with an MoE's routing
           kernels) + tp all-reduces + pp sends
    GEMMs = read factor x (each block GEMM's and the head's calibrated time at its weights' size on one tp rank
                           + an MoE's grouped calls over the experts its tokens reach + the rest (norms) / tp / bandwidth)
    attention = layers x one call's calibrated time at its shape (sequences x KV heads on a rank, positions read),
                or without those KV cache x read factor / tp / bandwidth
    E2E  = TTFT + (output_len - 1) x TPOT

The host times are the calibration's (per step and per layer of the stage): an eager prefill's dispatch runs
ahead of the GPU, so only what exceeds the device's work counts (on a CPU all of it); each decode step waits for
its token, so its launch and sampling add. The prefill's element-wise work moves what a training forward's does,
at the calibrated factor of a compiled or eager step as the engine's decode mode runs it."""

from __future__ import annotations

from parbench.config.dims import ParallelDims
from parbench.config.schema import Config, head_width
from parbench.metrics.flops import attended_positions
from parbench.metrics.inference_cost import (decode_bytes_per_step, decode_flops, experts_reached, mean_decode_context,
                                             prefill_attention_flops)
from parbench.models import ParamCounts, block_structure
from parbench.models.shapes import aligned, numel
from parbench.predict.calibration import Calibration
from parbench.predict.comm import Comm, exposed_seconds
from parbench.predict.layout import Layout
from parbench.dtypes import GROUPED_DTYPE
from parbench.predict.costs import expert_gemm_seconds, gemm_call_seconds, gemm_seconds
from parbench.predict.elementwise import elementwise_seconds, layer_traffic
from parbench.predict.inference_result import Forward, InferencePrediction
from parbench.workloads.specs.inference import prefill_graphed, resolved_decode_mode, static_decode

TOKEN_ID_BYTES = 8  # the sampled tokens the last stage broadcasts are int64


def forward_comms(layout: Layout, tokens: float) -> list[Comm]:
    """One forward of `tokens` positions (over the batch), as workloads/inference/model_parallel.py
    runs it: tp all-reduces the hidden states after the vocab-split embedding and after every
    attention and MLP, and all-gathers the logits of the last positions; pp sends the hidden states
    across every stage boundary and broadcasts the sampled tokens from the last stage."""
    m, d, batch = layout.cfg.model, layout.dims, layout.cfg.workload.batch_size
    hidden = tokens * m.hidden * layout.dtype_bytes
    tp_across, pp_across = layout.crosses_nodes("tp"), layout.crosses_nodes("pp")
    return [Comm("tp", "all_reduce", hidden, 2 * m.layers + 1, d.tp, tp_across),
            Comm("tp", "all_gather", batch * m.vocab * layout.dtype_bytes, 1, d.tp, tp_across),
            Comm("pp", "send_recv", hidden, d.pp - 1, 2, pp_across),
            Comm("pp", "broadcast", batch * TOKEN_ID_BYTES, 1, d.pp, pp_across)]


def comm_seconds(layout: Layout, tokens: float, cal: Calibration) -> dict[str, float]:
    return {name: t for name, (t, _) in exposed_seconds(forward_comms(layout, tokens), cal).items() if t}


def peak_compute_seconds(layout: Layout, flops: float, cal: Calibration) -> float:
    """One tp rank's share at the large-GEMM rate: a decode GEMM's size penalty is its weight read,
    which the roofline's memory side already counts."""
    return flops / layout.dims.tp / (cal.matmul_tflops * 1e12)


def read_seconds(layout: Layout, nbytes: float, cal: Calibration) -> float:
    """One tp rank's share of the bytes over the memory bandwidth."""
    return nbytes / layout.dims.tp / (cal.membw_gbps * 1e9)


def host_seconds(layout: Layout, phase: str, cal: Calibration) -> float:
    """The calibration's host time of one step, for the layers of one pipeline stage (a batch passes the stages one
    after the other, so every stage's dispatch counts); a compiled replay's by its blocks' kernels where counted; a
    decode step's with an MoE layer's routing kernels (routing_seconds)."""
    pp, compiled = layout.dims.pp, resolved_decode_mode(layout.cfg) == "compile"  # the counts are compiled blocks'
    m, structure = layout.cfg.model, block_structure(layout.cfg.model)
    routing = routing_seconds(structure, cal) * m.layers if phase == "decode" else 0.0
    return pp * cal.inference_host(phase, m.layers / pp, structure if compiled else "") + routing


def routing_seconds(structure: str, cal: Calibration) -> float:
    """An MoE layer's routing kernels in a decode step (its top-k, sort, prefix sums and scatters, each short): the
    kernels its layer runs beyond its dense twin's (prefill_kernels_per_layer, the census's) at the replayed prefill's
    figure a kernel (H200: 16.9 of 1.39 µs; the 2.5B MoE's decode ran 21.4 short kernels a layer of 1.42 µs each, the
    1B Llama's 9.5, which the decode step's own figure a layer already covers), in any decode mode (launched one by
    one, they cost the host no less); 0 for a dense model or where not counted."""
    counts, dense = cal.prefill_kernels_per_layer, structure.replace("/moe", "")
    if dense == structure or not {structure, dense} <= counts.keys():
        return 0.0
    return cal.prefill_graph_host_s.get("per_kernel", 0.0) * max(0.0, counts[structure] - counts[dense])


def qkv_copy_per_token(layout: Layout) -> float:
    """Elements a layer's prefill moves per token to lay q, k and v out by heads and K and V into the cache. Without
    RoPE a copy of each out of the fused projection, read and written (GPT-2 XL, H100, 8 x 512 tokens: 1.2 of 6.2 ms
    of element-wise kernels); with RoPE the rotation's pass lays out q and k (layer_traffic counts it). Every family
    then copies K and V into the cache, read and written (GPT-2 XL, H100, 4 x 512: 0.65 ms beside the first's 0.61)."""
    m, fam = layout.cfg.model, layout.family
    hd = head_width(m)
    layout_copy = 2 * (m.heads + 2 * m.kv_heads) * hd if fam.learned_positions else 0.0
    return (layout_copy + 2 * 2 * m.kv_heads * hd) / layout.dims.tp


def prefill_elementwise_seconds(layout: Layout, tokens: float, cal: Calibration) -> float:
    """The prompts' element-wise kernels and copies through every layer (one tp rank's share), at the rates and
    factor of the decode mode's step (compile: the blocks are compiled for the prefill too)."""
    compiled = resolved_decode_mode(layout.cfg) == "compile"
    traffic = layer_traffic(layout, compiled, False, cal.qk_norm(compiled))
    traffic["copy", layout.cfg.model.hidden // layout.dims.tp] = qkv_copy_per_token(layout) * layout.dtype_bytes
    return elementwise_seconds(cal, compiled, traffic, tokens * layout.cfg.model.layers)


def prefill_attention_seconds(layout: Layout, cal: Calibration) -> float:
    """The prompts' causal attention at its forward rate for their length, a call per layer (stages in turn)."""
    w, m = layout.cfg.workload, layout.cfg.model
    flops = prefill_attention_flops(m, w.batch_size, w.input_len) / layout.dims.tp
    return cal.attention_seconds(flops, attended_positions(w.input_len, True, m.sliding_window), m.layers,
                                 head_width(m), forward_only=True)


def few_rows_head_factor(layout: Layout, cal: Calibration) -> float:
    """A head of few rows over an unaligned vocabulary (GPT-2's) runs a slower kernel: decode_unaligned_factor."""
    return 1.0 if aligned((layout.cfg.model.vocab,)) else cal.decode_unaligned_factor


def prefill_compute_seconds(layout: Layout, cal: Calibration) -> float:
    """The prompts' GEMMs as the engine runs them (its fused projections), each as the profile timed its
    shape (else at the rate of its size, or its weights' read), the last positions' head, and their attention."""
    w, m = layout.cfg.workload, layout.cfg.model
    tokens, tp = w.batch_size * w.input_len, layout.dims.tp
    # the head over each sequence's last position: a GEMM of `batch` rows, its weights' read
    head = gemm_call_seconds(cal, 2 * w.batch_size * m.vocab * m.hidden / tp, m.vocab * m.hidden * layout.dtype_bytes / tp,
                             w.batch_size) * few_rows_head_factor(layout, cal)
    return (gemm_seconds(layout, cal, tokens, 2 * tokens / tp, engine_gemm_weights(layout), by_shape=True) + head
            + prefill_attention_seconds(layout, cal))


def prefill(layout: Layout, cal: Calibration) -> Forward:
    """The prompts' forward: their GEMMs and attention (a GEMM's rate at its size already pays for
    reading its weights: the matmul benchmark's operands come from memory, never L2), plus the
    element-wise traffic, plus its collectives; and the host's part: a replayed graph's launch, token copy
    and per-layer latencies, as a decode step's, or the dispatch of a prefill launched op by op."""
    w = layout.cfg.workload
    tokens = w.batch_size * w.input_len
    memory = prefill_elementwise_seconds(layout, tokens, cal)
    graphed = prefill_graphed(layout.cfg)
    # A replayed prefill adds its launch, the first token's copy and wait, and per layer the gaps between
    # its kernels and their fixed latencies, which longer kernels do not hide (H100, the engine's own graphs:
    # 14-21 µs a layer of its TTFT ran no kernel, GPT-2 XL at 1 and 4 x 512 and the 1B Llama at 1 x 512;
    # docs/results/2026-11-27_gemm31.md).
    host = host_seconds(layout, "prefill_graph" if graphed else "prefill", cal)
    return Forward(prefill_compute_seconds(layout, cal), memory, comm_seconds(layout, tokens, cal),
                   roofline=False, host_s=host, host_hidden=layout.cfg.hardware.device_type != "cpu" and not graphed)


def decode_attention_seconds(layout: Layout, kv_cache_bytes: float, cal: Calibration) -> float:
    """A decode step's attention: every layer's call at its calibrated time by shape (each rank's sequences x
    KV heads, the positions it attends), or without those its KV cache (the static step's whole buffer) at
    the calibrated read factor."""
    m, w = layout.cfg.model, layout.cfg.workload
    if cal.decode_attention_s:
        blocks = w.batch_size * max(1, m.kv_heads // layout.dims.tp)
        call = cal.decode_attention_call_s(head_width(m), m.heads > m.kv_heads, blocks, attended_cache(layout))
        return m.layers * call
    return read_seconds(layout, kv_cache_bytes * static_cache_share(layout) * cal.kv_read_factor, cal)


def attended_cache(layout: Layout) -> float:
    """Positions a decode step's attention reads: the static step's whole buffer, else the mean context (or window)."""
    w, m = layout.cfg.workload, layout.cfg.model
    if static_decode(layout.cfg):
        return w.input_len + w.output_len
    context = mean_decode_context(w.input_len, w.output_len)
    return min(context, m.sliding_window) if m.sliding_window else context


def static_cache_share(layout: Layout) -> float:
    """The KV cache a decode step reads over what decode_bytes_per_step counts (the mean context, or
    the window): the static-shape step (graph, compile) attends the whole buffer (input_len +
    output_len positions, the later ones and those outside a sliding window masked)."""
    w, m = layout.cfg.workload, layout.cfg.model
    modelled = mean_decode_context(w.input_len, w.output_len)  # what decode_bytes_per_step counts
    return attended_cache(layout) / (min(modelled, m.sliding_window) if m.sliding_window else modelled)


# Projections the static decode modes (graph, compile) run as one GEMM each (llama.fuse_projections)
FUSED_PROJECTIONS = (("attention.wq.weight", "attention.wk.weight", "attention.wv.weight"),
                     ("feed_forward.w1.weight", "feed_forward.w3.weight"))


def engine_gemm_shapes(layout: Layout) -> dict[str, tuple[int, int]]:
    """(out, in) features of each of a block's GEMMs as the native engine runs them, prefill and decode,
    by weight name (q/k/v and gate/up one each, under the first's name, where the decode mode fuses
    them), whole (tp splits each)."""
    block = {name: shape for name, shape in layout.shapes.block if len(shape) == 2}
    groups = [group for group in FUSED_PROJECTIONS if all(n in block for n in group)] if static_decode(layout.cfg) else []
    fused = {name for group in groups for name in group}
    return {**{group[0]: (sum(block[n][0] for n in group), block[group[0]][1]) for group in groups},
            **{n: shape for n, shape in block.items() if n not in fused}}


def engine_gemm_weights(layout: Layout) -> list[int]:
    """Elements of each of a block's GEMMs as the native engine runs them (engine_gemm_shapes)."""
    return [numel(shape) for shape in engine_gemm_shapes(layout).values()]


def decode_weights_seconds(layout: Layout, weights: float, cal: Calibration) -> float:
    """A decode step's weights on one tp rank, times the engine's read factor: every layer's GEMMs and the head's,
    each at the calibrated time of a GEMM of its size (Calibration.decode_gemm_seconds), an MoE's experts (replicated
    over tp) in bf16 as the grouped calls that read the experts its tokens reach (costs.expert_gemm_seconds: H200,
    Mixtral's at 2.5-2.7 TB/s where a plain GEMM of one reads 4.3, docs/results/2026-11-29_scale31.md), in another
    dtype as a decode GEMM per expert reached (the engine's loop); the rest of `weights` at the memory's bandwidth."""
    m, tp, itemsize = layout.cfg.model, layout.dims.tp, layout.dtype_bytes
    block = engine_gemm_weights(layout)
    head = m.vocab * m.hidden
    reached = experts_reached(m, layout.cfg.workload.batch_size) if m.experts else 0.0
    experts = (expert_gemm_seconds(layout, cal, layout.cfg.workload.batch_size, 1)[0] if layout.dtype == GROUPED_DTYPE
               else m.layers * 3 * reached * cal.decode_gemm_seconds(m.hidden * m.ffn * itemsize))  # a GEMM an expert
    gemms = (m.layers * sum(cal.decode_gemm_seconds(p * itemsize / tp) for p in block) + experts
             + cal.decode_gemm_seconds(head * itemsize / tp) * few_rows_head_factor(layout, cal))
    read = (m.layers * (sum(block) + 3 * reached * m.hidden * m.ffn) + head) * itemsize
    rest = max(0.0, weights - read) / tp / (cal.membw_gbps * 1e9)
    return (gemms + rest) * cal.weight_read_factor


def decode_step(layout: Layout, counts: ParamCounts, cal: Calibration) -> Forward:
    """One token per sequence: the weights and the KV cache read once (the weights by the decode
    GEMMs' calls; the cache by each layer's attention call at its calibrated time by shape, or without
    those at the mean context, or the static step's whole buffer, at kv_read_factor), or its FLOPs when
    the batch is large enough to make the step compute-bound, plus its collectives."""
    w, m = layout.cfg.workload, layout.cfg.model
    flops = decode_flops(m, counts, w.batch_size, mean_decode_context(w.input_len, w.output_len))
    weights, kv_cache = decode_bytes_per_step(m, counts, w, layout.dtype_bytes)
    memory = decode_weights_seconds(layout, weights, cal) + decode_attention_seconds(layout, kv_cache, cal)
    return Forward(peak_compute_seconds(layout, flops, cal), memory,
                   comm_seconds(layout, w.batch_size, cal), roofline=True, host_s=host_seconds(layout, "decode", cal))


def predict_inference(cfg: Config, dims: ParallelDims, cal: Calibration) -> InferencePrediction:
    """TTFT, TPOT and E2E of one batch of the native engine on tp x pp ranks."""
    layout = Layout.of(cfg, dims)
    counts, w = layout.counts, cfg.workload
    return InferencePrediction(prefill(layout, cal), decode_step(layout, counts, cal), w.batch_size,
                               w.output_len, cal.label(cfg.hardware.name))
