"""The inference prediction (parbench.predict.inference): TTFT and TPOT by hand for the tiny model
on CPU, what tp changes, the switch to compute-bound decode, and a real run that logs the
predicted figures beside the measured ones."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from parbench.metrics.inference_cost import prefill_attention_flops
from parbench.prepare import validate
from parbench.predict import prediction_errors
from parbench.predict.calibration import KV_TILE, Calibration, LinkFit
from parbench.predict.calibration_file import load_calibration
from parbench.predict.costs import expert_gemm_seconds, gemm_call_seconds, gemm_seconds
from parbench.predict.inference import decode_weights_seconds, engine_gemm_weights, predict_inference, routing_seconds
from parbench.predict.layout import Layout
from parbench.predict.profiles import in_dtype
from parbench.models.shapes import model_shapes, param_counts
from conftest import compose

FP32 = 4
# Rates without a GEMM-size penalty, so each part is a plain quotient.
CAL = Calibration(source="test", matmul_tflops=1.0, matmul_half_gflop=0.0, membw_gbps=10.0,
                  intra_node=LinkFit(1e-4, 1.0), inter_node=LinkFit(1e-3, 0.1))


def prediction(*overrides: str, cal: Calibration = CAL):
    cfg = compose("hardware=cpu", "workload=inference", "workload.input_len=32", "workload.output_len=8",
                  "workload.batch_size=2", *overrides)
    return cfg, predict_inference(cfg, validate(cfg, None), cal)


def decode_bytes(cfg) -> float:
    """Every weight that multiplies activations and the KV cache at the mean context (32 + 8/2)."""
    m, w = cfg.model, cfg.workload
    kv = 2 * m.layers * m.kv_heads * (m.hidden // m.heads) * FP32 * w.batch_size * 36
    return param_counts(m).matmul_active * FP32 + kv


def prefill_elementwise_bytes(cfg) -> float:
    """Per token and layer: the two norms and residuals (10 h), RoPE on q and k, SwiGLU (3 ffn), and K and
    V copied into the cache (read and written)."""
    m, w = cfg.model, cfg.workload
    qk, kv = (m.heads + m.kv_heads) * (m.hidden // m.heads), m.kv_heads * (m.hidden // m.heads)
    return (10 * m.hidden + 2 * qk + 3 * m.ffn + 4 * kv) * FP32 * w.batch_size * w.input_len * m.layers


def test_tpot_is_the_bytes_read_over_the_bandwidth_and_ttft_each_gemm_plus_its_element_wise_traffic():
    """A decode step is the bytes it reads. A prefill is each GEMM, at its FLOPs or the read of its
    weights where that is longer (the matmul benchmark's operands come from memory, so a GEMM's rate
    already pays for its read, and nothing reads the weights again), then attention and element-wise."""
    cfg, p = prediction()
    m = cfg.model
    assert p.tpot_s == pytest.approx(decode_bytes(cfg) / 10e9)
    gemm = lambda rows, weights: max(2 * rows * weights / 1e12, weights * FP32 / 10e9)  # noqa: E731
    block = [math.prod(shape) for name, shape in model_shapes(m).block if len(shape) == 2]
    norms = param_counts(m).matmul_active - m.layers * sum(block) - m.vocab * m.hidden  # 6N's convention counts them
    attention = prefill_attention_flops(m, 2, 32) / 1e12
    assert p.ttft_s == pytest.approx(m.layers * sum(gemm(64, w) for w in block) + gemm(2, m.vocab * m.hidden)
                                     + 2 * 64 * norms / 1e12 + attention + prefill_elementwise_bytes(cfg) / 10e9)
    assert p.e2e_s == pytest.approx(p.ttft_s + 7 * p.tpot_s) and p.output_tokens_per_s == pytest.approx(16 / p.e2e_s)
    assert p.decode.bottleneck == "memory bandwidth"


def test_the_prefills_element_wise_work_runs_at_the_factor_of_the_decode_modes_step():
    factors = replace(CAL, elementwise_factor={"eager": 3.0, "compiled": 1.0})
    cfg, eager = prediction("workload.decode_mode=eager", cal=factors)
    _, compiled = prediction("workload.decode_mode=compile", cal=factors)
    assert eager.ttft_s - compiled.ttft_s == pytest.approx(2.0 * prefill_elementwise_bytes(cfg) / 10e9)


def test_a_decode_steps_gemms_take_the_calibrated_time_of_a_gemm_of_their_size():
    """With the decode_matmul run's figures, each GEMM of a decode step (q/k/v and gate/up one each where
    the decode mode fuses them; the CPU's eager decode does not) and the head's take the time measured at
    their weights' size, on the line between two measured sizes, beyond the largest at its bandwidth,
    times the engine's factor."""
    curve = {"1000": 2e-6, "1000000": 4e-6, "100000000": 50e-6}
    gemv = replace(CAL, decode_gemm_s=curve, decode_gemm_gbps=2000.0, weight_read_factor=1.5)
    assert gemv.decode_gemm_seconds(10) == 2e-6 and gemv.decode_gemm_seconds(500500) == pytest.approx(3e-6)
    assert gemv.decode_gemm_seconds(300e6) == pytest.approx(50e-6 + 200e6 / 2000e9)
    for decode_mode, fused in (("eager", False), ("compile", True)):
        cfg, p = prediction(f"workload.decode_mode={decode_mode}")
        m, weights = cfg.model, param_counts(cfg.model).matmul_active * FP32
        _, q = prediction(f"workload.decode_mode={decode_mode}", cal=gemv)
        block = dict(model_shapes(m).block)
        gemms = [math.prod(block[f"attention.w{x}.weight"]) for x in "qkvo"] + \
                [math.prod(block[f"feed_forward.w{i}.weight"]) for i in (1, 2, 3)]
        if fused:
            gemms = [sum(gemms[:3]), gemms[3], gemms[4] + gemms[6], gemms[5]]
        head = m.vocab * m.hidden
        rest = weights - (m.layers * sum(gemms) + head) * FP32  # norms: a read
        expected = 1.5 * (m.layers * sum(gemv.decode_gemm_seconds(g * FP32) for g in gemms)
                          + gemv.decode_gemm_seconds(head * FP32) + rest / 10e9)
        assert q.tpot_s - p.tpot_s == pytest.approx(expected - weights / 10e9), decode_mode


ROOFLINE = {"grouped_matmul_tflops": 500.0, "grouped_read_gbps": 2000.0, "grouped_read_rows_exp": 0.1,
            "grouped_call_s": 10e-6, "grouped_roofline_p": 2.0}


def grouped_call(flops: float, nbytes: float, rows: float) -> float:
    """ROOFLINE's time of one grouped call of `rows` a matrix, written out."""
    return 10e-6 + ((flops / 500e12) ** 2 + (nbytes / (2000e9 * max(rows, 1) ** 0.1)) ** 2) ** 0.5


def test_an_moe_decode_step_reads_the_experts_its_tokens_reach_as_grouped_calls():
    """moe_2_5b at batch 4: each of a layer's three expert matrices one grouped call over the 8 tokens' rows, reading
    the 8 x (1 - 0.75^4) experts reached on average (H200: Mixtral's at 2.5-2.7 TB/s, a plain GEMM of one at 4.3)."""
    cal = replace(load_calibration("h200"), **ROOFLINE)
    cfg = compose("hardware=h200", "hardware.gpus_per_node=1", "workload=inference", "model=moe_2_5b",
                  "workload.batch_size=4")
    layout, m = Layout.of(cfg, validate(cfg, None)), cfg.model
    reached = 8 * (1 - 0.75 ** 4)
    experts = m.layers * 3 * grouped_call(2 * 4 * 2 * m.hidden * m.ffn, reached * m.hidden * m.ffn * 2, 4 * 2 / reached)
    dense = m.layers * sum(cal.decode_gemm_seconds(2 * p) for p in engine_gemm_weights(layout))
    head = cal.decode_gemm_seconds(2 * m.vocab * m.hidden)
    # no bytes beyond the GEMMs' (weights=0): the GEMMs alone, times the engine's read factor
    assert decode_weights_seconds(layout, 0.0, cal) == pytest.approx((dense + experts + head) * cal.weight_read_factor)
    # a step's weights beyond those the GEMMs read (the reached experts', the blocks', the head's) at the bandwidth
    gemm_read = (m.layers * (sum(engine_gemm_weights(layout)) + 3 * reached * m.hidden * m.ffn) + m.vocab * m.hidden) * 2
    weights = gemm_read + 1e9
    assert decode_weights_seconds(layout, weights, cal) - decode_weights_seconds(layout, 0.0, cal) == pytest.approx(
        1e9 / (cal.membw_gbps * 1e9) * cal.weight_read_factor)
    # fp16: the engine loops over the experts, a decode GEMM an expert reached
    fp16 = compose("hardware=h200", "hardware.gpus_per_node=1", "workload=inference", "model=moe_2_5b",
                   "workload.batch_size=4", "workload.dtype=fp16")
    layout16 = Layout.of(fp16, validate(fp16, None))
    per_expert = m.layers * 3 * reached * cal.decode_gemm_seconds(2 * m.hidden * m.ffn)
    dense16 = m.layers * sum(cal.decode_gemm_seconds(2 * p) for p in engine_gemm_weights(layout16))  # not fused in fp16
    assert decode_weights_seconds(layout16, 0.0, cal) == pytest.approx((dense16 + per_expert + head) * cal.weight_read_factor)


def test_an_moe_decode_step_adds_its_routing_kernels_beyond_its_dense_twins():
    """An MoE layer runs the census's kernels beyond its dense twin's (top-k, sort, prefix sums, scatters), each at the
    replayed prefill's figure a kernel, in every decode step (not in its prefill, whose replay counts them already); a
    dense model adds none, nor an MoE whose twin the census did not count."""
    cal = replace(load_calibration("h200"), prefill_kernels_per_layer={"llama/gqa": 16.0, "llama/gqa/moe": 33.0},
                  prefill_graph_host_s={"per_step": 50e-6, "per_layer": 20e-6, "per_kernel": 1.5e-6})
    assert routing_seconds("llama/gqa/moe", cal) == pytest.approx(17 * 1.5e-6)
    assert routing_seconds("llama/gqa", cal) == 0.0 and routing_seconds("llama/mha/moe", cal) == 0.0
    moe = compose("hardware=h200", "hardware.gpus_per_node=1", "workload=inference", "model=moe_2_5b", "workload.batch_size=4")
    uncounted = replace(cal, prefill_kernels_per_layer={"llama/gqa/moe": 33.0})  # its dense twin not counted
    with_routing, without = (predict_inference(moe, validate(moe, None), c) for c in (cal, uncounted))
    assert with_routing.tpot_s - without.tpot_s == pytest.approx(16 * 17 * 1.5e-6)  # 16 layers
    assert with_routing.ttft_s == without.ttft_s
    dense = compose("hardware=h200", "hardware.gpus_per_node=1", "workload=inference", "model=llama3_2_1b")
    assert predict_inference(dense, validate(dense, None), cal).tpot_s == predict_inference(dense, validate(dense, None), uncounted).tpot_s


def test_an_moe_step_prices_each_expert_matrix_as_a_grouped_gemm_on_its_calibrated_roofline():
    """Three expert matrices a layer, three grouped calls each in a training step (forward, backward's two), each
    on the grouped roofline of its FLOPs and the experts its tokens reach; no expert also priced as a plain GEMM (the
    block's own weights, the active experts, the head and the final norm are every active parameter)."""
    cal = replace(load_calibration("h200"), **ROOFLINE)
    cfg = compose("hardware=h200", "hardware.gpus_per_node=1", "workload=train", "model=moe_2_5b",
                  "workload.batch_size=2", "workload.seq_len=2048")
    layout, m = Layout.of(cfg, validate(cfg, None)), cfg.model
    tokens, expert_bytes = layout.microbatch_tokens, m.hidden * m.ffn * 2
    seconds, params = expert_gemm_seconds(layout, cal, tokens, 3)
    assert seconds == pytest.approx(3 * 16 * 3 * grouped_call(2 * tokens * 2 * m.hidden * m.ffn, 8 * expert_bytes, tokens * 2 / 8))
    assert params == 3 * 16 * 2 * m.hidden * m.ffn
    one_token, _ = expert_gemm_seconds(layout, cal, 1, 3)  # one token reaches top_k = 2 experts
    assert one_token == pytest.approx(3 * 16 * 3 * grouped_call(2 * 2 * m.hidden * m.ffn, 2 * expert_bytes, 1))
    block = sum(math.prod(shape) for name, shape in layout.shapes.block if ".experts." not in name)  # with its norms
    assert layout.counts.matmul_active == block * m.layers + params + m.vocab * m.hidden + m.hidden  # the final norm


def test_moe_experts_split_over_ep_and_in_fp32_run_one_gemm_each():
    """ep=2: a rank's 4 experts take the tokens of both ranks, so at one token a rank experts_reached(2 tokens) / 2 of
    them are read; fp32: one plain GEMM per expert reached, over its share of the rows."""
    from parbench.metrics.inference_cost import experts_reached

    cal = replace(load_calibration("h200"), **ROOFLINE)
    cfg = compose("hardware=h200", "hardware.gpus_per_node=2", "workload=train", "model=moe_2_5b", "parallel=ep",
                  "parallel.ep=2")
    layout, m = Layout.of(cfg, validate(cfg, None)), cfg.model
    assert layout.dims.ep == 2
    expert_bytes = m.hidden * m.ffn * 2
    one_token, _ = expert_gemm_seconds(layout, cal, 1, 1)
    reached = experts_reached(m, 2) / 2
    assert one_token == pytest.approx(3 * 16 * grouped_call(2 * 2 * m.hidden * m.ffn, reached * expert_bytes, 2 / reached))
    fp32 = compose("hardware=h200", "hardware.gpus_per_node=1", "workload=train", "model=moe_2_5b", "workload.dtype=fp32")
    layout = Layout.of(fp32, validate(fp32, None))
    tokens = layout.microbatch_tokens
    per_expert = gemm_call_seconds(cal, 2 * tokens * 2 * m.hidden * m.ffn / 8, m.hidden * m.ffn * 4)
    assert expert_gemm_seconds(layout, cal, tokens, 3)[0] == pytest.approx(3 * 16 * 3 * 8 * per_expert, rel=1e-6)


def test_a_head_over_an_unaligned_vocabulary_takes_the_calibrated_factor_in_decode_and_prefill():
    """GPT-2's 50,257-token head runs a slower kernel at a batch's rows: its decode GEMM and the prefill's head
    take decode_unaligned_factor times the aligned figure; an aligned vocabulary's take it as measured."""
    gemv = replace(CAL, decode_gemm_s={"1000": 2e-6, "100000000": 50e-6}, decode_gemm_gbps=2000.0)
    slow = replace(gemv, decode_unaligned_factor=3.0)
    cfg, p = prediction("model.vocab=509", cal=gemv)
    _, q = prediction("model.vocab=509", cal=slow)
    m, w = cfg.model, cfg.workload
    head_bytes = m.vocab * m.hidden * FP32
    assert q.tpot_s - p.tpot_s == pytest.approx(2 * gemv.decode_gemm_seconds(head_bytes))
    head_call = gemm_call_seconds(gemv, 2 * w.batch_size * m.vocab * m.hidden, head_bytes, w.batch_size)
    assert q.ttft_s - p.ttft_s == pytest.approx(2 * head_call)
    assert prediction(cal=slow)[1].as_dict() == prediction(cal=gemv)[1].as_dict()  # 512 tokens: aligned


def test_under_tp_each_decode_gemm_takes_the_time_of_its_share_and_the_prefill_its_fused_gemms():
    """tp=2 halves every GEMM's weights, so each takes the calibrated time at half its size (not half the
    time of its whole size); the prefill's GEMMs are the engine's, q/k/v and gate/up one each under
    compile, each at the rate of its own size."""
    curve = {"1000": 2e-6, "1000000": 4e-6, "100000000": 50e-6}
    gemv = replace(CAL, decode_gemm_s=curve, decode_gemm_gbps=2000.0, weight_read_factor=1.0)

    def layout(*overrides: str) -> Layout:
        cfg = compose("hardware=cpu", "workload=inference", "workload.batch_size=2", *overrides)
        return Layout.of(cfg, validate(cfg, None))

    one, two = layout("hardware.gpus_per_node=1"), layout("hardware.gpus_per_node=2", "parallel=tp")
    m = one.cfg.model
    gemms = engine_gemm_weights(one)
    assert engine_gemm_weights(two) == gemms and len(gemms) == 7  # the CPU's eager decode: no fusing
    weights = one.counts.matmul_active * FP32
    rest = weights - (m.layers * sum(gemms) + m.vocab * m.hidden) * FP32
    half = (m.layers * sum(gemv.decode_gemm_seconds(g * FP32 / 2) for g in gemms)
            + gemv.decode_gemm_seconds(m.vocab * m.hidden * FP32 / 2) + rest / 2 / 10e9)
    assert decode_weights_seconds(two, weights, gemv) == pytest.approx(half)
    curved = replace(CAL, matmul_half_gflop=1e-4, membw_gbps=1e9)  # each GEMM at its rate, not its read
    compiled = layout("hardware.gpus_per_node=1", "workload.decode_mode=compile")
    fused = engine_gemm_weights(compiled)
    assert len(fused) == 4 and sum(fused) == sum(gemms)
    tokens = 2 * compiled.cfg.workload.input_len
    rate = lambda p: 2 * tokens * p / curved.matmul_rate(2 * tokens * p)  # noqa: E731
    assert gemm_seconds(compiled, curved, tokens, 2 * tokens, fused) - gemm_seconds(compiled, curved, tokens, 2 * tokens) \
        == pytest.approx(m.layers * (sum(map(rate, fused)) - sum(map(rate, gemms))))
    assert gemm_seconds(compiled, curved, tokens, 2 * tokens, fused) < gemm_seconds(compiled, curved, tokens, 2 * tokens)


def test_a_prefill_without_rope_copies_q_k_and_v_into_the_heads_layout_and_the_cache():
    """GPT-2 has no RoPE pass to write K and V where attention and the cache read them: its prefill
    copies q, k and v out of the fused projection (read and written), as RoPE's pass would rotate q and k,
    and then K and V into the cache, as every family does."""
    gpt2 = ["model=gpt2_xl", "model.hidden=64", "model.heads=4", "model.kv_heads=4", "model.ffn=256", "model.vocab=512",
            "model.layers=2", "model.max_seq_len=64"]
    cfg, p = prediction(*gpt2)
    m, w = cfg.model, cfg.workload
    hd = m.hidden // m.heads
    per_token = 10 * m.hidden + 2 * m.ffn + 2 * (m.heads + 2 * m.kv_heads) * hd + 4 * m.kv_heads * hd
    assert p.prefill.memory_s == pytest.approx(per_token * FP32 * w.batch_size * w.input_len * m.layers / 10e9)


def test_a_static_decode_step_reads_its_whole_cache_buffer():
    """graph and compile attend all input_len + output_len positions (the later ones masked): 40, not 36."""
    cfg, eager = prediction("workload.decode_mode=eager")
    _, static = prediction("workload.decode_mode=compile")
    kv_per_position = (decode_bytes(cfg) - param_counts(cfg.model).matmul_active * FP32) / 36
    assert static.tpot_s - eager.tpot_s == pytest.approx(4 * kv_per_position / 10e9)


def test_a_prefill_replayed_as_a_cuda_graph_costs_its_kernels_and_a_decode_steps_latencies_not_its_dispatch():
    """On a GPU, compile decode replays prefills of up to 8192 tokens as graphs: the prefill's dispatch
    (here far above its device work) gives way to what a replay adds beyond its GEMMs and attention, its
    launch and each layer's latencies (a decode step's where the profile has no replay's own); past 8192 tokens, or with workload.prefill_graph=false, the
    prefill waits on its dispatch again."""
    host = replace(CAL, matmul_tflops=1000.0, membw_gbps=3000.0, prefill_host_s={"per_step": 1.0, "per_layer": 0.0},
                   decode_host_s={"per_step": 1e-4, "per_layer": 1e-5})

    def gpu(*overrides: str):
        cfg = compose("hardware=h100_sxm", "hardware.gpus_per_node=1", "workload=inference", "model=llama3_2_1b",
                      "workload.decode_mode=compile", "workload.output_len=8", *overrides)
        return predict_inference(cfg, validate(cfg, None), host).prefill

    graphed = gpu("workload.batch_size=1", "workload.input_len=512")
    assert graphed.seconds == pytest.approx(graphed.device_s + 1e-4 + 16 * 1e-5) and graphed.device_s < 0.1
    launched = gpu("workload.batch_size=1", "workload.input_len=512", "workload.prefill_graph=false")
    assert launched.seconds == pytest.approx(1.0) and launched.bottleneck == "host dispatch"
    assert gpu("workload.batch_size=16", "workload.input_len=1024").seconds == pytest.approx(1.0)  # 16384 tokens
    host = replace(host, prefill_graph_host_s={"per_step": 2e-4, "per_layer": 3e-5})  # a replay's own, where measured
    replayed = gpu("workload.batch_size=1", "workload.input_len=512")
    assert replayed.seconds == pytest.approx(graphed.device_s + 2e-4 + 16 * 3e-5)
    eager = gpu("workload.batch_size=1", "workload.input_len=512", "workload.decode_mode=eager")
    assert eager.seconds == pytest.approx(1.0)


def test_a_decode_steps_attention_takes_its_calls_time_by_kind_blocks_and_positions():
    """With decode attention calls by shape, each layer's call is the nearest kind's (grouped queries or one
    query per KV head, the nearest head width, the wider of two as near): a line in the positions at each
    measured block count, a line between the counts (beyond them too), and fewer blocks than its fewest as
    the fewest. Without them, the one KV read factor."""
    table = {"64": {"8x1024": 20e-6, "8x4096": 50e-6, "512x1024": 60e-6, "512x4096": 200e-6},
             "128": {"8x1024": 30e-6, "8x4096": 90e-6, "256x1024": 70e-6, "256x4096": 210e-6},
             "64/mha": {"32x1024": 10e-6, "32x4096": 20e-6, "512x1024": 50e-6, "512x4096": 170e-6}}
    cal = replace(CAL, decode_attention_s=table)
    assert cal.decode_attention_call_s(64, True, 8, 2560) == pytest.approx(35e-6)  # halfway along a count's line
    assert cal.decode_attention_call_s(64, True, 260, 1024) == pytest.approx(40e-6)  # halfway between the counts
    assert cal.decode_attention_call_s(64, True, 1016, 1024) == pytest.approx(100e-6)  # beyond the most, on that line
    assert cal.decode_attention_call_s(64, True, 2, 1024) == pytest.approx(20e-6)  # fewer than the fewest: one wave
    assert cal.decode_attention_call_s(96, True, 8, 1024) == pytest.approx(30e-6)  # as near to both: the wider
    assert cal.decode_attention_call_s(128, False, 32, 1024) == pytest.approx(10e-6)  # the only one of its kind
    cfg, eager = prediction("workload.decode_mode=eager", cal=cal)
    m, w = cfg.model, cfg.workload
    assert m.heads > m.kv_heads and abs(m.hidden // m.heads - 64) < abs(m.hidden // m.heads - 128)
    weights = param_counts(m).matmul_active * FP32
    call = cal.decode_attention_call_s(64, True, w.batch_size * m.kv_heads, w.input_len + w.output_len / 2)
    assert eager.decode.memory_s == pytest.approx(weights / 10e9 + m.layers * call)  # the mean context, every layer
    graphed = prediction("workload.decode_mode=compile", cal=cal)[1]  # a static step reads its whole buffer
    whole = cal.decode_attention_call_s(64, True, w.batch_size * m.kv_heads, w.input_len + w.output_len)
    assert graphed.decode.memory_s == pytest.approx(weights / 10e9 + m.layers * whole)


def test_a_decode_call_is_read_along_every_measured_count_and_length():
    """A count or length between others is a corner of the polyline, not passed over: 64 blocks measured
    at 90 µs make 64 blocks cost 90 µs; beyond the last segment the line goes on."""
    cal = replace(CAL, decode_attention_s={"64": {"8x1024": 20e-6, "8x2048": 30e-6, "8x4096": 50e-6, "64x1024": 90e-6,
                                                  "64x4096": 120e-6, "512x1024": 100e-6, "512x4096": 200e-6}})
    assert cal.decode_attention_call_s(64, True, 64, 1024) == pytest.approx(90e-6)
    assert cal.decode_attention_call_s(64, True, 8, 1536) == pytest.approx(25e-6)  # between the first two lengths
    assert cal.decode_attention_call_s(64, True, 8, 6144) == pytest.approx(70e-6)  # on from the last two
    assert cal.decode_attention_call_s(64, True, 960, 1024) == pytest.approx(110e-6)  # on from 64 and 512 blocks


def test_a_decode_call_reads_whole_kv_tiles():
    """A decode attention kernel reads the cache 128 positions a tile: 1,088 positions take as long as 1,152 (nine
    tiles, H200: 41.5 µs against 34.6 at 1,024), and 1,024 as 1,024."""
    cal = replace(CAL, decode_attention_s={"64": {"8x1024": 20e-6, "8x2048": 36e-6, "512x1024": 60e-6, "512x2048": 100e-6}})
    assert cal.decode_attention_call_s(64, True, 8, 1088) == pytest.approx(22e-6)  # read at 1,152
    assert cal.decode_attention_call_s(64, True, 8, 1025) == cal.decode_attention_call_s(64, True, 8, 1152)
    assert cal.decode_attention_call_s(64, True, 8, 1024) == pytest.approx(20e-6)


def test_a_decode_calls_blocks_are_a_ranks_and_its_positions_a_windows():
    """Under tp each rank runs its share of the KV heads; an eager step over a sliding window reads the
    window, not the mean context."""
    table = {"64": {"1x16": 1e-6, "1x4096": 100e-6, "64x16": 2e-6, "64x4096": 200e-6}}
    cal = replace(CAL, decode_attention_s=table)
    cfg, one = prediction("workload.decode_mode=eager", cal=cal)
    two = prediction("workload.decode_mode=eager", "parallel=tp", cal=cal)[1]
    m, w = cfg.model, cfg.workload
    call = lambda blocks, positions: m.layers * cal.decode_attention_call_s(16, True, blocks, positions)  # noqa: E731
    weights = param_counts(m).matmul_active * FP32
    assert one.decode.memory_s == pytest.approx(weights / 10e9 + call(w.batch_size * m.kv_heads, 36))
    assert two.decode.memory_s == pytest.approx(weights / 2 / 10e9 + call(w.batch_size * m.kv_heads // 2, 36))
    windowed = prediction("workload.decode_mode=eager", "model.sliding_window=20", cal=cal)[1]
    assert windowed.decode.memory_s == pytest.approx(weights / 10e9 + call(w.batch_size * m.kv_heads, 20))


def test_an_fp32_run_on_a_bf16_profile_reads_its_decode_calls_at_twice_the_bytes_a_position():
    """Of whole KV tiles: half of the shortest measured cache (128 positions) is a part-filled tile, which
    reads a whole one."""
    cal = load_calibration("h100_sxm")
    fp32 = in_dtype(cal, compose("hardware=h100_sxm", "hardware.gpus_per_node=1").hardware, "fp32")
    for kind, calls in cal.decode_attention_s.items():
        for shape, seconds in calls.items():
            blocks, positions = (int(v) for v in shape.split("x"))
            if positions < 2 * KV_TILE:
                continue
            assert fp32.decode_attention_call_s(int(kind.split("/")[0]), "mha" not in kind, blocks, positions / 2) \
                == pytest.approx(seconds)


def test_tp2_halves_the_bytes_per_device_and_adds_two_all_reduces_per_layer():
    cfg, p = prediction("parallel=tp")
    m = cfg.model
    # 2 per layer and one after the vocab-split embedding, of batch x hidden fp32, bus factor 2(n-1)/n = 1;
    # then the last position's logits all-gathered (bus factor 1/2).
    all_reduces = (2 * m.layers + 1) * (1e-4 + 2 * m.hidden * FP32 / 1e9)
    gather = 1e-4 + 2 * m.vocab * FP32 / 2 / 1e9
    assert p.decode.memory_s == pytest.approx(decode_bytes(cfg) / 2 / 10e9)
    assert p.decode.comm_s == {"tp": pytest.approx(all_reduces + gather)}
    assert p.tpot_s == pytest.approx(decode_bytes(cfg) / 2 / 10e9 + all_reduces + gather)


def test_pp2_sends_the_hidden_states_once_and_keeps_the_bytes_of_the_whole_model():
    cfg, p = prediction("parallel=pp")
    send, broadcast = 1e-4 + 2 * cfg.model.hidden * FP32 / 1e9, 1e-4 + 2 * 8 / 1e9
    assert p.decode.comm_s == {"pp": pytest.approx(send + broadcast)}
    assert p.decode.memory_s == pytest.approx(decode_bytes(cfg) / 10e9)  # the stages run one after the other


def test_a_large_batch_makes_decode_compute_bound():
    # 1 FLOP per byte: one sequence reads 4 B per parameter for 2 FLOPs; 64 do 128 FLOPs.
    balanced = Calibration(source="test", matmul_tflops=1.0, matmul_half_gflop=0.0, membw_gbps=1000.0)
    assert prediction("workload.batch_size=1", cal=balanced)[1].decode.bottleneck == "memory bandwidth"
    _, large = prediction("workload.batch_size=64", cal=balanced)
    assert large.decode.bottleneck == "matmul compute" and large.tpot_s == pytest.approx(large.decode.compute_s)


def test_errors_are_taken_against_the_median_latencies():
    errors = prediction_errors({"predicted_ttft_s": 0.03, "predicted_tpot_s": 0.002},
                               {"ttft_s_p50": 0.02, "tpot_s_p50": 0.004})
    assert errors == pytest.approx({"predicted_ttft_s": 0.03, "predicted_tpot_s": 0.002,
                                    "predicted_ttft_error_pct": 50.0, "predicted_tpot_error_pct": -50.0})


def test_an_inference_run_logs_its_predicted_latencies_and_their_errors(cli):
    proc = cli.run("workload=inference", "workload.input_len=16", "workload.output_len=4", "workload.repeats=1",
                   "workload.warmup=0", "workload.profile=false", "dry_run=true")
    assert "[parbench] predicted (" in proc.stdout and "TPOT" in proc.stdout and "bottleneck: prefill" in proc.stdout
    cli.run("workload=inference", "workload.input_len=16", "workload.output_len=4", "workload.repeats=1",
            "workload.warmup=0", "workload.profile=false")
    run = cli.runs().iloc[0]
    for name in ("ttft", "tpot"):
        measured, predicted = run[f"metrics.{name}_s_p50"], run[f"metrics.predicted_{name}_s"]
        assert predicted > 0 and run[f"metrics.predicted_{name}_error_pct"] == pytest.approx(
            100 * (predicted - measured) / measured)


def test_plan_still_ranks_training_layouts_only(capsys):
    from parbench.planner import main

    assert main(["workload=inference", "hardware=cpu"]) == 2
    assert "parbench plan ranks training layouts" in capsys.readouterr().err


# a prefill GEMM's memory side at 16 and 256 rows (seconds by 'ROWSxBYTES')
PREFILL_GEMMS = {"16x1000": 2e-6, "16x1000000": 4e-6, "16x100000000": 50e-6,
                 "256x1000": 3e-6, "256x1000000": 6e-6, "256x100000000": 70e-6}


def test_a_prefill_gemms_memory_side_is_read_along_its_sizes_then_its_row_counts():
    """Between two sizes on the line through them, beyond the largest on the last segment, below a count's
    smallest as that smallest; between two row counts on the line, fewer rows than the fewest as the fewest,
    more than the most as the most (the FLOPs side sets the time there); never below the weights' read at
    membw; no table: None."""
    cal = replace(CAL, membw_gbps=1e6, prefill_gemm_s=PREFILL_GEMMS)
    assert cal.prefill_gemm_seconds(16, 500500) == pytest.approx(3e-6)
    assert cal.prefill_gemm_seconds(136, 1000) == pytest.approx(2.5e-6)
    assert cal.prefill_gemm_seconds(136, 500500) == pytest.approx((3e-6 + 4.5e-6) / 2)
    assert cal.prefill_gemm_seconds(16, 10) == cal.prefill_gemm_seconds(1, 1000) == 2e-6
    assert cal.prefill_gemm_seconds(4096, 1000000) == 6e-6
    assert cal.prefill_gemm_seconds(256, 199000000) == pytest.approx(70e-6 + 99e6 * 64e-6 / 99e6)
    apart = replace(cal, prefill_gemm_s={"16x1000": 2e-6, "16x2000": 3e-6, "256x5000": 7e-6, "256x9000": 9e-6})
    assert apart.prefill_gemm_seconds(256, 1000) == pytest.approx(7e-6)
    assert apart.prefill_gemm_seconds(16, 5000) == pytest.approx(6e-6)
    assert replace(cal, membw_gbps=0.1).prefill_gemm_seconds(16, 1000) == pytest.approx(1000 / 0.1e9)  # the read, longer
    assert CAL.prefill_gemm_seconds(16, 1000) is None


def test_a_prefill_gemm_takes_its_flops_or_its_timed_memory_side_the_longer_and_training_keeps_the_read():
    """With prefill_gemm_s, a prefill's fused GEMMs and its head over the last positions take the larger of
    their FLOPs at the rate and the table's time at their rows and size (here the table's: the rate is
    far above the rows' FLOPs); a training step's GEMMs keep the weights' read at membw."""
    from parbench.predict.costs import gemm_call_seconds

    fast = replace(CAL, matmul_tflops=1e6, membw_gbps=1e6)  # FLOPs and a plain read take next to nothing
    timed = replace(fast, prefill_gemm_s=PREFILL_GEMMS)
    assert gemm_call_seconds(timed, 2e3, 1e6, rows=16) == pytest.approx(4e-6)
    assert gemm_call_seconds(timed, 2e3, 1e6) == gemm_call_seconds(fast, 2e3, 1e6, rows=16) == pytest.approx(1e-9)
    slow = replace(timed, matmul_tflops=1e-6)  # the FLOPs side longer than the table's
    assert gemm_call_seconds(slow, 2e3, 1e6, rows=16) == pytest.approx(2e3 / 1e6)
    cfg, p = prediction("workload.decode_mode=compile", cal=fast)
    _, q = prediction("workload.decode_mode=compile", cal=timed)
    layout = Layout.of(cfg, validate(cfg, None))
    tokens, m = cfg.workload.batch_size * cfg.workload.input_len, cfg.model
    gemms = m.layers * sum(timed.prefill_gemm_seconds(tokens, g * FP32) for g in engine_gemm_weights(layout))
    head = timed.prefill_gemm_seconds(cfg.workload.batch_size, m.vocab * m.hidden * FP32)
    assert q.prefill.compute_s - p.prefill.compute_s == pytest.approx(gemms + head, rel=1e-3)
    assert q.tpot_s == p.tpot_s
    assert gemm_seconds(layout, timed, tokens, 6 * tokens) == gemm_seconds(layout, fast, tokens, 6 * tokens)
    # under tp each rank's GEMMs are the same rows on half the weights
    _, p2 = prediction("workload.decode_mode=compile", "parallel=tp", cal=fast)
    _, q2 = prediction("workload.decode_mode=compile", "parallel=tp", cal=timed)
    half = m.layers * sum(timed.prefill_gemm_seconds(tokens, g * FP32 / 2) for g in engine_gemm_weights(layout))
    head2 = timed.prefill_gemm_seconds(cfg.workload.batch_size, m.vocab * m.hidden * FP32 / 2)
    assert q2.prefill.compute_s - p2.prefill.compute_s == pytest.approx(half + head2, rel=1e-3)


def test_a_short_prefill_gemm_is_priced_as_replayed_not_at_the_rate_curves_fixed_cost():
    """The matmul run's events put a fixed cost on every call (the curve's matmul_half_gflop) that a replayed GEMM
    does not pay: within the table's rows a short GEMM takes the table's time where the curve says more; beyond them
    the curve's growth from where the table left it, with no step at the table's edge; a compute-bound GEMM its FLOPs
    at the large-GEMM rate."""
    from parbench.predict.costs import gemm_call_seconds, matmul_fixed_seconds

    cal = replace(CAL, matmul_tflops=100.0, matmul_half_gflop=0.5, membw_gbps=1e6, prefill_gemm_s=PREFILL_GEMMS)
    assert matmul_fixed_seconds(cal) == pytest.approx(5e-6)

    def call(rows: int) -> float:  # 1,000 bytes of weights: 500 bf16 elements
        return gemm_call_seconds(cal, 2 * rows * 500, 1000, rows)

    def curve(flops: float) -> float:
        return flops / cal.matmul_rate(flops)

    assert curve(2 * 256 * 500) > 5e-6 and call(256) == pytest.approx(3e-6)
    assert call(257) == pytest.approx(call(256), rel=1e-3)
    assert call(4096) == pytest.approx(curve(2 * 4096 * 500) - (curve(2 * 256 * 500) - 3e-6))
    assert gemm_call_seconds(cal, 2 * 65536 * 5e7, 1e8, 65536) == pytest.approx(2 * 65536 * 5e7 / 100e12)


def test_a_profiles_prefill_gemms_stand_for_a_slower_dtype_but_not_a_faster_one():
    """Timed by bytes, a bf16 table serves an fp32 run (whose FLOPs at the scaled rate are the longer side); an
    fp32 table would hold a bf16 run's GEMMs to fp32 FLOPs, so there the weights' read stands in."""
    hw = compose("hardware=h100_sxm", "hardware.gpus_per_node=1").hardware
    bf16 = replace(load_calibration("h100_sxm"), prefill_gemm_s=PREFILL_GEMMS)
    assert bf16.dtype == "bf16" and in_dtype(bf16, hw, "fp32").prefill_gemm_s == PREFILL_GEMMS
    assert in_dtype(replace(bf16, dtype="fp32"), hw, "bf16").prefill_gemm_s == {}
