"""Trace analysis on synthetic interval sets and synthetic Kineto traces with known answers."""

from __future__ import annotations

import gzip
import json

import pytest

from parbench.metrics import intervals as iv
from parbench.metrics import trace, trace_events
from parbench.metrics.timing import STEP_RANGE, median_ci_bootstrap, median_ci_order, summarize


def test_interval_algebra():
    assert iv.union([(5, 7), (0, 2), (1, 3), (7, 8), (9, 9)]) == [(0, 3), (5, 8)]
    assert iv.length([(0, 10), (5, 15), (20, 25)]) == 20
    assert iv.intersect([(0, 10), (20, 30)], [(5, 25)]) == [(5, 10), (20, 25)]
    assert iv.subtract([(0, 10), (20, 30)], [(2, 4), (8, 22), (25, 26)]) == [(0, 2), (4, 8), (22, 25), (26, 30)]
    assert iv.subtract([(0, 10)], []) == [(0, 10)] and iv.subtract([], [(0, 1)]) == []
    assert iv.clip([(0, 10), (12, 20)], (5, 15)) == [(5, 10), (12, 15)]


def test_step_breakdown_partitions_the_step():
    # compute 0-40 and 50-70; all_reduce 30-60 (overlaps compute 30-40 and 50-60);
    # all_gather 80-90 (alone); memcpy 85-95 (exposed only 90-95); nothing 70-80 and 95-100.
    b = trace.step_breakdown((0, 100), [(0, 40), (50, 70)], {"all_reduce": [(30, 60)], "all_gather": [(80, 90)]},
                             [(85, 95)])
    us = 1e-6
    assert b.wall_s == pytest.approx(100 * us)
    assert b.compute_s == pytest.approx(60 * us)
    assert b.comm_s == pytest.approx(40 * us)
    assert b.overlap_s == pytest.approx(20 * us)
    assert b.exposed_comm_s == pytest.approx(20 * us)
    assert b.memcpy_s == pytest.approx(5 * us)
    assert b.idle_s == pytest.approx(15 * us)
    assert b.compute_s + b.exposed_comm_s + b.memcpy_s + b.idle_s == pytest.approx(b.wall_s)
    assert b.comm_by_collective_s == pytest.approx({"all_reduce": 30 * us, "all_gather": 10 * us})
    m = trace.breakdown_metrics([b])
    assert m["comm_pct"] == pytest.approx(40) and m["exposed_comm_pct"] == pytest.approx(20)
    assert m["overlap_pct"] == pytest.approx(50)  # HTA: |compute & comm| / |comm| = 20 / 40
    assert m["idle_pct"] == pytest.approx(15) and m["comm_pct_all_gather"] == pytest.approx(10)


def test_step_breakdown_clips_to_the_window_and_pools_steps():
    a = trace.step_breakdown((0, 10), [(-5, 5)], {"all_reduce": [(8, 30)]}, [])
    b = trace.step_breakdown((10, 40), [(10, 40)], {"all_reduce": [(8, 30)]}, [])
    assert a.compute_s == pytest.approx(5e-6) and a.comm_s == pytest.approx(2e-6)
    assert b.overlap_s == pytest.approx(20e-6) and b.exposed_comm_s == 0
    m = trace.breakdown_metrics([a, b])  # time-weighted over both steps: 22 of 40 us
    assert m["comm_pct"] == pytest.approx(100 * 22 / 40) and m["overlap_pct"] == pytest.approx(100 * 20 / 22)


@pytest.mark.parametrize("raw,kind", [
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "all_reduce"),
    ("ncclKernel_AllGather_RING_LL_Sum_int8_t", "all_gather"), ("_allgather_base", "all_gather"),
    ("reduce_scatter_tensor_coalesced", "reduce_scatter"), ("ncclDevKernel_SendRecv", "send_recv"),
    ("gloo:all_reduce", "all_reduce"), ("all_to_allv", "all_to_all"), ("gloo:broadcast", "broadcast"),
    ("ncclDevKernel_Generic", "other")])
def test_collective_names(raw, kind):
    assert trace_events.collective_type(raw) == kind


def x(name, cat, ts, dur, tid=1, **args):
    return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "pid": 1, "tid": tid, "args": args}


def gpu_trace() -> dict:
    """One step on a GPU, launched by a 1000 us host range; its device work spans 100-900 us:
    forward kernels in layers.0, backward kernels whose autograd node links (by sequence number)
    to layers.0, an NCCL all_reduce overlapping 100 us of backward compute and then running
    100 us alone, an optimizer kernel and a memcpy."""
    return {"distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 2}, "traceEvents": [
        x(STEP_RANGE, "user_annotation", 0, 1000),
        x(f"{trace_events.LAYER_RANGE_PREFIX} layers.0", "user_annotation", 10, 200),
        x("aten::mm", "cpu_op", 20, 10, **{"External id": 1, "Sequence number": 7}),
        x(f"{trace_events.BACKWARD_PREFIX} MmBackward0", "cpu_op", 300, 300, tid=2, **{"Sequence number": 7}),
        x("aten::mm", "cpu_op", 310, 10, tid=2, **{"External id": 2}),
        x("record_param_comms", "cpu_op", 500, 10, tid=2, **{"External id": 3}),
        x("Optimizer.step#AdamW.step", "user_annotation", 800, 150),
        x("aten::_foreach_add_", "cpu_op", 810, 10, **{"External id": 4}),
        x("sm90_gemm_fwd", "kernel", 100, 200, tid=7, **{"External id": 1}),
        x("sm90_gemm_bwd", "kernel", 400, 200, tid=7, **{"External id": 2}),
        x("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "kernel", 500, 200, tid=8,
          **{"External id": 3, "Collective name": "allreduce", "In msg nelems": 1000, "Out msg nelems": 1000,
             "dtype": "BFloat16", "Group size": 2}),
        x("multi_tensor_apply_kernel", "kernel", 850, 50, tid=7, **{"External id": 4}),
        x("Memcpy DtoD (Device -> Device)", "gpu_memcpy", 720, 30, tid=7),
        x("sm90_gemm_fwd", "kernel", 2000, 100, tid=7),  # after the step: left out
    ]}


def test_gpu_trace_analysis():
    result = trace.analyze(gpu_trace())
    assert result.device == "gpu" and len(result.steps) == 1
    m = result.metrics()
    # Step 100-900 (800 us). compute 100-300, 400-600, 850-900 = 450; comm 500-700 = 200, 100 of
    # it under compute; memcpy 30; idle 800 - 450 - 100 - 30 = 220.
    assert m["compute_pct"] == pytest.approx(56.25) and m["comm_pct"] == pytest.approx(25)
    assert m["comm_pct_all_reduce"] == pytest.approx(25)
    assert m["overlap_pct"] == pytest.approx(50) and m["exposed_comm_pct"] == pytest.approx(12.5)
    assert m["memcpy_pct"] == pytest.approx(3.75) and m["idle_pct"] == pytest.approx(27.5)
    (coll,) = result.collectives
    assert coll["collective"] == "all_reduce" and coll["bytes"] == 2000
    assert coll["algbw_gbps"] == pytest.approx(2000 / 200e-6 / 1e9)
    assert coll["busbw_gbps"] == pytest.approx(coll["algbw_gbps"] * 2 * (2 - 1) / 2)
    rows = {(r["phase"], r["layer"], r["op"]): r for r in result.ops}
    assert rows[("forward", "layers.0", "aten::mm")]["total_s"] == pytest.approx(200e-6)
    assert rows[("backward", "layers.0", "aten::mm")]["total_s"] == pytest.approx(200e-6)  # via sequence number
    assert rows[("backward", "layers.0", "all_reduce")]["kind"] == "comm"
    assert rows[("optimizer", "-", "aten::_foreach_add_")]["total_s"] == pytest.approx(50e-6)
    assert sum(r["share_pct"] for r in result.ops) == pytest.approx(100)
    # the compute by kind: the two GEMMs' kernels, the optimizer's; in all, the step's compute
    assert m["kernel_time_s/gemm"] == pytest.approx(400e-6) and m["kernel_time_s/optimizer"] == pytest.approx(50e-6)
    assert m["kernel_time_s/attention"] == m["kernel_time_s/other"] == 0
    assert m["kernel_time_s"] == pytest.approx(450e-6)


@pytest.mark.parametrize("phase, op, kind", [
    ("forward", "aten::_scaled_dot_product_cudnn_attention", "attention"),
    ("backward", "aten::_flash_attention_backward", "attention"),
    ("backward", "aten::_efficient_attention_backward", "attention"), ("forward", "aten::addmm", "gemm"),
    ("backward", "aten::_grouped_mm", "gemm"),  # an MoE's experts
    ("forward", "triton_poi_fused__to_copy_add_mul_0", "other"), ("optimizer", "aten::_foreach_mul_", "optimizer"),
    ("optimizer", "aten::mm", "optimizer")])
def test_compute_kinds_follow_the_launching_op_and_the_optimizer_phase(phase, op, kind):
    assert trace.compute_kind({"phase": phase, "op": op}) == kind


def cpu_trace() -> dict:
    """Two gloo steps of 100 us: main-thread ops (thread 1) and gloo worker collectives (thread 9);
    c10d calls only enqueue and the wait blocks: neither is compute."""
    return {"distributedInfo": {"backend": "gloo", "pg_config": [{"pg_size": 2}, {"pg_size": 1}]}, "traceEvents": [
        x(STEP_RANGE, "user_annotation", 0, 100), x(STEP_RANGE, "user_annotation", 200, 100),
        x("aten::linear", "cpu_op", 0, 40), x("aten::addmm", "cpu_op", 5, 30),
        x(f"{trace_events.BACKWARD_PREFIX} AddmmBackward0", "cpu_op", 40, 20), x("aten::mm", "cpu_op", 40, 20),
        x("c10d::allreduce_", "cpu_op", 50, 2),
        x("gloo:all_reduce", "user_annotation", 55, 30, tid=9, **{"Input Dims": [[250]], "Input type": ["float"]}),
        x("aten::copy_", "cpu_op", 60, 5, tid=9),  # gloo's own copies: part of the collective
        x("c10d::wait", "cpu_op", 60, 25),
        x("aten::mul", "cpu_op", 200, 30),
        x("c10d::_allgather_base_", "cpu_op", 230, 1),
        x("gloo:all_gather", "user_annotation", 232, 40, tid=9, **{"Input Dims": [[100]], "Input type": ["c10::BFloat16"]}),
        x("aten::mul", "cpu_op", 240, 22),
    ]}


def test_cpu_gloo_trace_analysis():
    result = trace.analyze(cpu_trace())
    assert result.device == "cpu" and len(result.steps) == 2
    first, second = result.steps
    # step 1: compute 0-60, comm 55-85 (5 us under compute), nothing 85-100.
    assert first.compute_s == pytest.approx(60e-6) and first.comm_s == pytest.approx(30e-6)
    assert first.exposed_comm_s == pytest.approx(25e-6) and first.idle_s == pytest.approx(15e-6)
    # step 2: compute 200-230 and 240-262, all_gather 232-272.
    assert second.compute_s == pytest.approx(52e-6) and second.overlap_s == pytest.approx(22e-6)
    assert second.exposed_comm_s == pytest.approx(18e-6) and second.idle_s == pytest.approx(30e-6)
    m = result.metrics()
    assert m["comm_pct"] == pytest.approx(35) and m["comm_pct_all_gather"] == pytest.approx(20)
    sizes = {c["collective"]: c for c in result.collectives}
    assert sizes["all_reduce"]["bytes"] == 250 * 4
    assert sizes["all_gather"]["bytes"] == 100 * 2 * 2  # gloo records the local input: x group size
    rows = {(r["phase"], r["op"]): r for r in result.ops}
    assert rows[("backward", "all_reduce")]["kind"] == "comm"  # anchored to the c10d call that queued it
    assert rows[("forward", "all_gather")]["kind"] == "comm"
    assert rows[("forward", "aten::linear")]["total_s"] == pytest.approx(10e-6)  # self time: 40 - 30
    assert not any(r["op"].startswith(("c10d::", "autograd::")) for r in result.ops)


def test_cpu_time_blocked_inside_an_autograd_node_is_not_compute():
    """FSDP's post-backward node waits for its reduce-scatter: only its operators are compute."""
    result = trace.analyze({"traceEvents": [
        x(STEP_RANGE, "user_annotation", 0, 100),
        x(f"{trace_events.BACKWARD_PREFIX} RegisterPostBackwardFunctionBackward", "cpu_op", 0, 100),
        x("RegisterPostBackwardFunctionBackward", "cpu_op", 0, 100),
        x("fsdp::chunk_cat", "cpu_op", 0, 10), x("c10d::_reduce_scatter_base_", "cpu_op", 10, 1),
        x("gloo:all_reduce", "user_annotation", 12, 80, tid=9), x("aten::div_", "cpu_op", 95, 5),
    ]})
    (step,) = result.steps
    assert step.compute_s == pytest.approx(15e-6) and step.exposed_comm_s == pytest.approx(80e-6)
    assert step.idle_s == pytest.approx(5e-6)


def test_trace_without_steps_is_an_error_naming_the_cause(tmp_path):
    path = tmp_path / "t.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": [x("aten::mm", "cpu_op", 0, 1)]}, f)
    with pytest.raises(ValueError, match=STEP_RANGE):
        trace.analyze(trace_events.load_trace(path))


def test_median_confidence_intervals():
    values = [float(v) for v in (5, 1, 9, 3, 7, 2, 8, 4, 10, 6)]
    low, high, level = median_ci_order(values, 0.95)
    assert (low, high) == (2.0, 9.0)  # x(2), x(9) of 10: coverage 1 - 2 * 11/1024
    assert level == pytest.approx(1 - 2 * 11 / 1024)
    assert median_ci_order([1.0, 2.0, 3.0], 0.95) == (1.0, 3.0, 0.75)  # too few: the achieved level says so
    boot = median_ci_bootstrap(values, 0.9, 500)
    assert boot == median_ci_bootstrap(values, 0.9, 500) and boot[0] <= 5.5 <= boot[1]
    stats = summarize(values, "t")
    assert stats["t"] == 5.5 and stats["t_ci_low"] == 2.0 and stats["t_ci_high"] == 9.0


def test_gpu_steps_are_placed_by_the_host_range_that_launched_them():
    """The host runs a step ahead: step 1 is launched (host 150-250) while the device still runs
    step 0 (200-500). Step 1 on the device starts when step 0 ends, so its 50 us gap is idle."""
    result = trace.analyze({"traceEvents": [
        x(STEP_RANGE, "user_annotation", 0, 100),
        x(STEP_RANGE, "user_annotation", 150, 100),
        x("cudaLaunchKernel", "cuda_runtime", 10, 5, correlation=1),
        x("cudaLaunchKernel", "cuda_runtime", 160, 5, correlation=2),
        x("cudaLaunchKernel", "cuda_runtime", 170, 5, correlation=3),
        x("gemm", "kernel", 200, 300, tid=7, correlation=1),
        x("gemm", "kernel", 520, 280, tid=7, correlation=2),
        x("gemm", "kernel", 850, 50, tid=7, correlation=3),
    ]})
    assert [s.wall_s for s in result.steps] == pytest.approx([300e-6, 400e-6])
    assert [s.idle_s for s in result.steps] == pytest.approx([0, 70e-6])


def test_device_mirrors_of_ranges_are_ignored():
    """Kineto mirrors record_function ranges onto the GPU timeline, late by the launch queue:
    the layer of a host op comes from host ranges only."""
    events = trace_events.complete_events({"traceEvents": [
        x(f"{trace_events.LAYER_RANGE_PREFIX} layers.1", "user_annotation", 140, 60),
        x(f"{trace_events.LAYER_RANGE_PREFIX} layers.0", "gpu_user_annotation", 145, 155, tid=7),
        x("aten::add", "cpu_op", 150, 5, **{"External id": 5}),
        x("vectorized_elementwise_kernel", "kernel", 400, 10, tid=7, **{"External id": 5}),
    ]})
    ctx = trace.Context(events)
    anchor = ctx.anchor(events[-1])
    assert anchor.name == "aten::add"
    assert ctx.layer(anchor, ctx.phase(anchor)) == "layers.1"
