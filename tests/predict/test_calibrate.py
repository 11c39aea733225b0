"""`parbench calibrate` as a user meets it, with each benchmark's result made by the model from a
known calibration (the runs themselves are the CLI's, tested elsewhere): one device ends with a
profile in the user's directory and the shipped ones untouched, an interrupted calibration goes
on at the next run, and the fits give back the figures that made the results."""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest

from parbench import calibrate, calibration_fit, calibration_runs
from parbench.calibration_runs import (CENSUS_PREFIX, DECODE_ATTENTION_BLOCKS, GROUPED_RUNS, GROUPS, DECODE_ATTENTION_POSITIONS,
                                      INFER_KV_RUN, INFER_TINY_PREFIX, grouped_calls)
from parbench.prepare import validate
from parbench.paths import CONF_DIR
from parbench.predict import predict
from parbench.config import ConfigError
from parbench.metrics import KERNEL_TIME
from parbench.metrics.flops import attended_positions
from parbench.models import block_structure
from parbench.models.shapes import aligned
from parbench.predict.calibration import ATTENTION_FIELDS, VERSION, Calibration
from parbench.predict.calibration_file import load_calibration, save_calibration, user_calibration_dir
from parbench.predict.microbench_fits import GROUPED_FIELDS, decode_gemm_figures, grouped_gemm_figures, prefill_gemm_figures
from parbench.predict.inference import predict_inference
from parbench.predict.step import predict_step
from conftest import ATTENTION_WIDTHS, compose

ONE_CPU = ["hardware=cpu", "hardware.gpus_per_node=1"]
REAL_RUN = subprocess.run  # what is not a calibration run (mlflow's own git calls) runs for real
TRUTH = replace(load_calibration("cpu"), attention_tflops=0.05, attention_extra_positions=300.0, attention_call_s=3e-4,
                attention_forward_tflops=0.07, attention_forward_extra_positions=200.0, attention_forward_call_s=1e-4,
                elementwise_factor={"eager": 2.5, "compiled": 1.2}, qk_norm_factor={"eager": 2.0, "compiled": 1.4},
                recompute={"eager/selective": 0.3, "eager/full": 0.9, "compiled/selective": 0.1, "compiled/full": 0.8},
                activation_scale={"eager/none": 1.3, "eager/selective": 1.1, "compiled/none": 0.7, "compiled/selective": 0.6},
                logits_bytes={"eager": 14.0, "compiled": 6.0}, host_s_per_step=3e-3, host_s_per_dispatch=8e-6,
                host_s_per_replayed_call={"full": 40e-6, "selective": 90e-6},
                host_s_per_replayed_layer={"full": 1.5e-3, "selective": 3e-3}, host_s_per_layer_compiled=0.4e-3,
                host_s_per_moe_layer=2e-3,
                prefill_host_s={"per_step": 2e-3, "per_layer": 5e-4}, decode_host_s={"per_step": 1e-3, "per_layer": 1e-4},
                kv_read_factor=2.5,
                # the calibration's eager kernels at its two widths (a CPU's run), each its own rate
                elementwise_gbps={"eager": {kernel: {"64": 4.0 + i, "128": 6.0 + 2 * i} for i, kernel in enumerate(
                    ("layer_norm", "rms_norm", "add", "gelu_tanh", "swiglu", "rope", "copy"))}})


# A replayed prefill's kernels a layer by block structure, and those outside the layers (embedding, head, sampling)
LAYER_KERNELS = {"llama/gqa": 15.0, "gpt2/mha": 12.0, "llama/gqa/qk_norm": 15.5, "llama/mha": 14.0, "llama/gqa/moe": 33.0}
OUTSIDE_KERNELS = 6.0


def unaligned_factor(truth: Calibration, dims: tuple[int, int]) -> float:
    return 1.0 if aligned(dims) else truth.decode_unaligned_factor


def expected_groups_read(rows: int) -> float:
    """The groups a router's rows reach, on average (of few rows, not all)."""
    return GROUPS * (1 - (1 - 1 / GROUPS) ** rows)


def synthetic_metrics(overrides: list[str], name: str, truth: Calibration = TRUTH) -> dict:
    """What the run would measure on a machine that `truth` describes exactly."""
    if name == "matmul":
        return {f"matmul_tflops/{n}x{n}x{n}": truth.matmul_rate(2 * n**3) / 1e12 for n in (128, 256, 512, 1024)}
    if name == "membw":
        return {"membw_gbps": truth.membw_gbps}
    if name == "elementwise":
        return {f"elementwise_gbps/{mode}/{kernel}/{width}": gbps for mode, kernels in truth.elementwise_gbps.items()
                for kernel, widths in kernels.items() for width, gbps in widths.items()}
    if name in GROUPED_RUNS:  # each call on the grouped roofline, reading the matrices of the groups given rows
        run = dict(o.split("=", 1) for o in calibrate.benchmarks(compose(*overrides))[name][1:])
        shapes = json.loads(run["workload.shapes"])
        return {**{f"matmul_groups_read/{m}x{k}x{n}": expected_groups_read(m) for m, k, n in shapes},
                **{f"matmul_time_us/{m}x{k}x{n}": 1e6 * truth.grouped_gemm_seconds(2 * m * k * n, expected_groups_read(m) * k * n * 2,
                                                                                   m / expected_groups_read(m))
                   for m, k, n in shapes}}
    if name in ("decode_matmul", "prefill_matmul"):  # bf16 weights: each call's time by its rows and bytes
        run = dict(o.split("=", 1) for o in calibrate.benchmarks(compose(*overrides))[name][1:])
        return {f"matmul_time_us/{m}x{k}x{n}": 1e6 * (truth.decode_gemm_seconds(2 * k * n) * unaligned_factor(truth, (k, n))
                                                      if name == "decode_matmul" else truth.prefill_gemm_seconds(m, 2 * k * n))
                for m, k, n in json.loads(run["workload.shapes"])}
    if name == "attention":  # one call of forward and backward, or of the forward, per shape
        run = dict(o.split("=", 1) for o in calibrate.benchmarks(compose(*overrides))["attention"][1:])
        return {**{f"attention_{p}tflops/{'x'.join(map(str, s))}": attention_tflops(s, p == "fwd_", truth)
                   for s in json.loads(run["workload.shapes"]) for p in ("", "fwd_")},
                **decode_attention_metrics(json.loads(run.get("workload.decode_shapes", "[]")), truth)}
    layout = calibration_runs.benchmark_layout(overrides, name)
    if name.startswith(("infer_", CENSUS_PREFIX)):
        p = predict_inference(layout.cfg, layout.dims, truth)
        kernels = OUTSIDE_KERNELS + layout.cfg.model.layers * LAYER_KERNELS[block_structure(layout.cfg.model)]
        return {"ttft_s_p50": p.ttft_s, "tpot_s_p50": p.tpot_s, **({"prefill_kernels": kernels} if layout.cfg.hardware.device_type == "cuda" else {})}
    p = predict_step(layout, truth)
    profiled = "profile.enabled=true" in calibrate.benchmarks(compose(*overrides))[name]
    kernels = {KERNEL_TIME: p.compute.total_s, f"{KERNEL_TIME}/optimizer": p.compute.optimizer_s} if profiled else {}
    return {"step_time_s": p.step_time_s, "mem_peak_allocated_gb": p.memory.total_gb, **kernels}


def attention_tflops(shape: list[int], forward: bool, truth: Calibration) -> float:
    batch, heads, _, seq, head_dim = shape
    attended = attended_positions(seq, True)
    flops = (1 if forward else 3) * 4 * batch * heads * seq * head_dim * attended
    return flops / truth.attention_seconds(flops, attended, 1, head_dim, forward_only=forward) / 1e12


def decode_attention_metrics(shapes: list[list[int]], truth: Calibration) -> dict:
    """A decode step's attention per shape: its time on the truth's lines (bf16)."""
    metrics = {}
    for shape in shapes:
        batch, heads, kv_heads, positions, head_dim = shape
        seconds = truth.decode_attention_call_s(head_dim, heads > kv_heads, batch * kv_heads, positions)
        name = "x".join(map(str, shape))
        nbytes = 2 * batch * kv_heads * positions * head_dim * 2
        metrics |= {f"decode_attention_time_us/{name}": seconds * 1e6, f"decode_attention_gbps/{name}": nbytes / seconds / 1e9}
    return metrics


class FakeRuns:
    """subprocess.run for the calibration's runs: writes the job's results.json; interrupts at `stop`. The
    tiny model's inference runs are made by `tiny_truth` where given (its layers cost what a real width's
    do not)."""

    def __init__(self, overrides: list[str], stop: str | None = None, truth: Calibration = TRUTH,
                 tiny_truth: Calibration | None = None):
        self.overrides, self.stop, self.names, self.truth = overrides, stop, [], truth
        self.tiny_truth = tiny_truth or truth

    def __call__(self, cmd, **kwargs):
        if "parbench" not in cmd:
            return REAL_RUN(cmd, **kwargs)
        job_dir = Path(next(a for a in cmd if a.startswith("hydra.run.dir=")).split("=", 1)[1])
        name = job_dir.name
        if name == self.stop:
            raise KeyboardInterrupt
        self.names.append(name)
        job_dir.mkdir(parents=True, exist_ok=True)
        truth = self.tiny_truth if name.startswith(INFER_TINY_PREFIX) else self.truth
        (job_dir / "results.json").write_text(json.dumps({"metrics": synthetic_metrics(self.overrides, name, truth)}))
        return subprocess.CompletedProcess(cmd, 0, "", "")


def test_one_device_calibration_saves_a_profile_outside_the_source_tree(monkeypatch, tmp_path, capsys):
    """`parbench calibrate hardware=cpu hardware.gpus_per_node=1`: no link to fit, no traceback,
    the profile in the user's directory (which runs then read), conf/calibrations left alone."""
    shipped = (CONF_DIR / "calibrations" / "cpu.yaml").read_text()
    runs = FakeRuns(ONE_CPU)
    monkeypatch.setattr(subprocess, "run", runs)
    assert calibrate.main([*ONE_CPU, "--work", str(tmp_path / "work"), f"tracking.uri=sqlite:///{tmp_path}/m.db"]) == 0
    out = capsys.readouterr().out
    assert "collectives" not in runs.names and "one device: no link" in out
    assert (CONF_DIR / "calibrations" / "cpu.yaml").read_text() == shipped
    mine = user_calibration_dir() / "cpu.yaml"
    assert mine.exists() and load_calibration("cpu").source.startswith("measured")
    mine.unlink()


def test_a_profile_of_an_older_version_is_recalibrated_from_the_shipped_one(monkeypatch, tmp_path, capsys):
    """The user's profile from an older parbench cannot be read: calibrate says so and keeps what no run measures on
    one device (the link, the overlap) from the shipped profile, not from blank figures."""
    mine = user_calibration_dir() / "cpu.yaml"
    mine.parent.mkdir(parents=True, exist_ok=True)
    older = (CONF_DIR / "calibrations" / "cpu.yaml").read_text().replace(f"version: {VERSION}", "version: 3")
    mine.write_text(older + "grouped_matmul_half_gflop: 0.0\n")  # a field this version no longer has
    monkeypatch.setattr(subprocess, "run", FakeRuns(ONE_CPU))
    try:
        assert calibrate.main([*ONE_CPU, "--work", str(tmp_path / "work"), f"tracking.uri=sqlite:///{tmp_path}/m.db"]) == 0
        assert "has version 3" in capsys.readouterr().out
        shipped = load_calibration(str(CONF_DIR / "calibrations" / "cpu.yaml"))
        assert load_calibration("cpu").intra_node == shipped.intra_node and shipped.intra_node.busbw_gbps > 0
    finally:
        mine.unlink()


def test_the_fits_give_back_the_figures_that_made_the_runs(monkeypatch, tmp_path):
    """One device's runs give back the figures that made them, and keep the base's host figures on several ranks
    (only several ranks measure them), saying so."""
    runs = FakeRuns(ONE_CPU)
    monkeypatch.setattr(subprocess, "run", runs)
    cfg, overrides = calibrate.local_config(ONE_CPU)
    results = calibrate.run_all(overrides, calibrate.benchmarks(cfg), tmp_path)
    several = {"per_step": 3e-3, "per_dispatch": 13e-6}
    cal, notes = calibration_fit.fit(cfg, overrides, results, replace(load_calibration("cpu"), host_s_several_ranks=several))
    assert cal.host_s_several_ranks == several and "host figures on several ranks" in notes[0]
    assert not [n for n in notes if "kept the figure" in n]
    assert [getattr(cal, f) for f in ATTENTION_FIELDS] == pytest.approx([getattr(TRUTH, f) for f in ATTENTION_FIELDS], rel=1e-2)
    host = ("host_s_per_step", "host_s_per_dispatch", "host_s_per_layer_compiled", "host_s_per_moe_layer", "kv_read_factor")
    assert [getattr(cal, f) for f in host] == pytest.approx([getattr(TRUTH, f) for f in host], rel=1e-2)
    # (no head-gradient term: on a CPU the overhead's run is the calibration's tiny model, same head, one constant)
    assert cal.elementwise_gbps == TRUTH.elementwise_gbps  # the kernels' own rates, read as the factors are fitted
    for field in ("elementwise_factor", "qk_norm_factor", "recompute", "activation_scale", "logits_bytes", "prefill_host_s",
                  "decode_host_s", "host_s_per_replayed_call", "host_s_per_replayed_layer"):
        assert getattr(cal, field) == pytest.approx(getattr(TRUTH, field), rel=5e-2), field
    assert cal.decode_attention_s == {}  # no decode shapes on a CPU: the one read factor serves every width


def test_several_ranks_save_their_host_figures_and_one_device_keeps_them():
    """A calibration on two ranks saves its figures per step and per dispatch as the several ranks' too; one device,
    which cannot measure them, keeps the base's."""
    fitted = replace(load_calibration("cpu"), host_s_per_step=3e-3, host_s_per_dispatch=13e-6)
    base = replace(fitted, host_s_several_ranks={"per_step": 2e-3, "per_dispatch": 9e-6})
    two, _ = calibrate.local_config(["hardware=cpu", "hardware.gpus_per_node=2"])
    one, _ = calibrate.local_config(ONE_CPU)
    assert calibration_fit.several_rank_host(two, fitted, base) == {"per_step": 3e-3, "per_dispatch": 13e-6}
    assert calibration_fit.several_rank_host(one, fitted, base) == base.host_s_several_ranks


# an H100's decode GEMMs (docs/results/2026-11-27_gemm31): a few µs at the tiny model's sizes, then a ramp
DECODE_GEMM_S = {"8192": 2.2e-6, "2097152": 4.4e-6, "8388608": 6.6e-6, "134217728": 48.5e-6}
# its prefill GEMMs' memory side at the fewest and most rows the run times (the rows between on the line)
PREFILL_GEMM_S = {"16x8192": 2.2e-6, "16x2097152": 4.5e-6, "16x134217728": 48.7e-6, "16x536870912": 194e-6,
                  "256x8192": 2.6e-6, "256x2097152": 6.6e-6, "256x134217728": 57.3e-6, "256x536870912": 230e-6}
# and its decode attention calls (graph-replayed): one wave of blocks paced by positions, every SM busy by bytes
DECODE_ATTENTION_S = {"64": {"8x1024": 25e-6, "8x4096": 68e-6, "512x1024": 73e-6, "512x4096": 242e-6},
                      "128": {"8x1024": 31e-6, "8x4096": 89e-6, "256x1024": 66e-6, "256x4096": 204e-6},
                      "64/mha": {"32x1024": 14e-6, "32x4096": 22e-6, "512x1024": 53e-6, "512x4096": 180e-6},
                      "128/mha": {"32x1024": 18e-6, "32x4096": 35e-6, "512x1024": 98e-6, "512x4096": 358e-6}}


def test_a_gpu_calibration_fits_the_decode_steps_latencies_weights_and_attention(monkeypatch, tmp_path):
    """On a GPU attention's rate curve and call cost are fitted per head width, and the attention
    microbenchmark's decode shapes are kept as calls by kind, blocks and positions. The decode GEMMs' run
    gives a call's time by its weights and the bandwidth beyond them; with both, the tiny model's two depths
    fix a decode step's latency per step and the 1B's depths its latency per layer (nothing is left for a
    read factor to fit), and so for a replayed prefill's, whose per-layer figure the engine runs' kernel counts (the
    1B's depths, one run of each other block structure) also give per kernel. The fully checkpointed runs at two batches tell the loss's bytes per logit from
    what the head's gradient adds per element. The profiled none runs at two depths give the optimizer's
    factor (its kernels) and the device's idle gaps (the step beyond its kernels) per step and per
    dispatch or layer."""
    one_gpu = ["hardware=h100_sxm", "hardware.gpus_per_node=1"]
    truth = replace(load_calibration("h100_sxm"), decode_attention_s=DECODE_ATTENTION_S, attention_widths=ATTENTION_WIDTHS,
                    decode_gemm_s=DECODE_GEMM_S, decode_gemm_gbps=2840.0, decode_unaligned_factor=3.6,
                    grouped_matmul_tflops=640.0, grouped_read_gbps=2500.0, grouped_read_rows_exp=0.1, grouped_call_s=12e-6,
                    grouped_roofline_p=2.5,
                    decode_host_s={"per_step": 50e-6, "per_layer": 20e-6},
                    prefill_graph_host_s={"per_step": 90e-6, "per_layer": 22e-6},
                    logits_bytes={"eager": 12.0, "compiled": 2.5}, head_grad_bytes={"eager": 1.5, "compiled": 9.0},
                    optimizer_factor=1.15, device_idle_s={"eager": {"per_step": 2e-3, "per_dispatch": 0.8e-6},
                                                          "compiled": {"per_step": 1.5e-3, "per_layer": 0.15e-3}})
    tiny = replace(truth, decode_host_s={"per_step": 50e-6, "per_layer": 12e-6},
                   prefill_graph_host_s={"per_step": 90e-6, "per_layer": 7e-6})
    truth, tiny = replace(truth, prefill_gemm_s=PREFILL_GEMM_S), replace(tiny, prefill_gemm_s=PREFILL_GEMM_S)
    monkeypatch.setattr(subprocess, "run", FakeRuns(one_gpu, truth=truth, tiny_truth=tiny))
    cfg, overrides = calibrate.local_config(one_gpu)
    runs = calibrate.benchmarks(cfg)
    assert any(o.startswith("workload.decode_shapes=") for o in runs["attention"])
    base = replace(load_calibration("h100_sxm"), weight_read_factor=1.3)  # a factor the GEMMs' curve leaves no room for
    results = calibrate.run_all(overrides, runs, tmp_path)
    cal, notes = calibration_fit.fit(cfg, overrides, results, base)
    assert not [n for n in notes if "kept the figure" in n]
    for width, figures in ATTENTION_WIDTHS.items():  # each head width's own attention curve
        assert cal.attention_widths[width] == pytest.approx(figures, rel=1e-2), width
    assert cal.decode_attention_s.keys() == DECODE_ATTENTION_S.keys()
    for kind, calls in cal.decode_attention_s.items():  # every shape timed, on the truth's lines
        assert len(calls) == len(DECODE_ATTENTION_BLOCKS) * len(DECODE_ATTENTION_POSITIONS), kind
        for shape, seconds in calls.items():
            blocks, positions = map(int, shape.split("x"))
            truth_s = truth.decode_attention_call_s(int(kind.split("/")[0]), not kind.endswith("/mha"), blocks, positions)
            assert seconds == pytest.approx(truth_s, rel=1e-6), (kind, shape)
    assert "workload.graph_calls=40" in runs["decode_matmul"] and "workload.b_transposed=true" in runs["decode_matmul"]
    for name in GROUPED_RUNS:
        assert {"workload.groups=8", "workload.routed_groups=true"} <= set(runs[name])  # as a router splits rows
    # a decode step's few rows graphed (an sm90 GPU's offsets stay on the device), the compute-bound calls by events
    assert "workload.graph_calls=40" in runs["grouped_decode_matmul"] and not any("graph" in o for o in runs["grouped_matmul"])
    assert (cal.grouped_matmul_tflops, cal.grouped_read_gbps, cal.grouped_read_rows_exp, cal.grouped_call_s,
            cal.grouped_roofline_p) == pytest.approx((640.0, 2500.0, 0.1, 12e-6, 2.5), rel=1e-3)
    measured = {int(b) for b in cal.decode_gemm_s}  # every size the run measured, on the truth's curve
    assert len(measured) == 8 and cal.decode_gemm_gbps == pytest.approx(2840.0, rel=1e-3)
    assert [cal.decode_gemm_seconds(b) for b in measured] == pytest.approx([truth.decode_gemm_seconds(b) for b in measured])
    assert cal.weight_read_factor == 1.0 and cal.decode_unaligned_factor == pytest.approx(3.6)  # GPT-2's head
    timed = json.loads(dict(o.split("=", 1) for o in runs["prefill_matmul"][1:])["workload.shapes"])
    assert {(m, 2 * k * n) for m, k, n in timed} == {tuple(map(int, shape.split("x"))) for shape in cal.prefill_gemm_s}
    assert [cal.prefill_gemm_seconds(m, 2 * k * n) for m, k, n in timed] == pytest.approx(
        [truth.prefill_gemm_seconds(m, 2 * k * n) for m, k, n in timed])
    assert cal.decode_host_s == pytest.approx(truth.decode_host_s, rel=1e-2)  # the step's the tiny model's, the layer's the 1B's
    assert "workload.prefill_graph=true" in runs[f"{INFER_TINY_PREFIX}4_layers"] and "infer_graph_16_layers" in runs
    graph = cal.prefill_graph_host_s  # as the decode step's; and per kernel of the 1B's layers, as its runs counted them
    assert graph == pytest.approx({**truth.prefill_graph_host_s, "per_kernel": 22e-6 / LAYER_KERNELS["llama/gqa"]}, rel=1e-2)
    assert cal.prefill_kernels_per_layer == pytest.approx(LAYER_KERNELS)  # each structure's census run, beside the 1B's
    # an MoE's prefill replays only where its grouped GEMMs keep their offsets on the device (sm90+)
    assert "census_moe" not in calibrate.benchmarks(compose("hardware=a100_80g", "hardware.gpus_per_node=1"))
    assert (cal.logits_bytes, cal.head_grad_bytes) == (pytest.approx(truth.logits_bytes, rel=1e-2),
                                                       pytest.approx(truth.head_grad_bytes, rel=1e-2))
    assert cal.optimizer_factor == pytest.approx(truth.optimizer_factor, rel=1e-3)
    for mode, figures in truth.device_idle_s.items():
        assert cal.device_idle_s[mode] == pytest.approx(figures, rel=1e-3), mode
    # --host over a profile with another host's engine figures: the GPU's engine runs (the tiny model's and the 1B's
    # replays among them) give the same figures back, the replay's per kernel too
    other_host = replace(cal, prefill_host_s={}, decode_host_s={"per_step": 1e-3, "per_layer": 1e-3}, prefill_graph_host_s={})
    host_only = {name: m for name, m in results.items() if calibration_runs.is_host_run(name)}
    assert {n for n in host_only if n.startswith("infer_")} == {n for n in runs if calibration_runs.is_engine_host_run(n)}
    again, _ = calibration_fit.fit_host_only(cfg, overrides, host_only, other_host)
    for field in ("prefill_host_s", "decode_host_s", "prefill_graph_host_s"):
        assert getattr(again, field) == pytest.approx(getattr(cal, field), rel=1e-6), field


VALID_CALLS = {"8x1024": 1e-5, "8x4096": 2e-5, "512x1024": 3e-5, "512x4096": 4e-5}


@pytest.mark.parametrize("calls", [{"wide": VALID_CALLS}, {"64": {"8x1024": 1e-5, "8x4096": 2e-5, "512x1024": 3e-5}},
                                   {"64": {**VALID_CALLS, "512by4096": 4e-5}}, {"64": {**VALID_CALLS, "8x4096": 0.0}},
                                   {"64": {**VALID_CALLS, "8x4096": float("nan")}}, {"64": {**VALID_CALLS, "8x4096": 5e-6}},
                                   {"64": {**VALID_CALLS, "512x1024": 5e-6}}])
def test_a_profile_with_decode_attention_calls_that_cannot_be_read_is_refused(tmp_path, calls):
    """A kind that is not a head width, a block count at one length, a shape that is not BLOCKSxPOSITIONS,
    a call of no time or of no number, a call faster than a shorter one at its count or than the fewest
    blocks' at its length: each refused on load with what to give."""
    save_calibration(replace(load_calibration("h100_sxm"), decode_attention_s={"64": VALID_CALLS}), tmp_path / "ok.yaml")
    assert load_calibration(str(tmp_path / "ok.yaml")).decode_attention_s == {"64": VALID_CALLS}
    path = save_calibration(replace(load_calibration("h100_sxm"), decode_attention_s=calls), tmp_path / "bad.yaml")
    with pytest.raises(ConfigError, match=r"decode_attention_s\[.*BLOCKSxPOSITIONS"):
        load_calibration(str(path))


@pytest.mark.parametrize("idle", [{"eager": {"per_step": 1e-3, "per_layer": 1e-4}}, {"graph": {"per_step": 1e-3}},
                                  {"compiled": {"per_step": -1e-3, "per_layer": 1e-4}}])
def test_a_profile_whose_device_idle_cannot_be_read_is_refused(tmp_path, idle):
    path = save_calibration(replace(load_calibration("h100_sxm"), device_idle_s=idle), tmp_path / "bad.yaml")
    with pytest.raises(ConfigError, match=r"device_idle_s\[.*eager with per_step and per_dispatch"):
        load_calibration(str(path))
    path = save_calibration(replace(load_calibration("h100_sxm"), attention_widths={"64": {"attention_tflops": 400.0}}),
                            tmp_path / "bad_widths.yaml")
    with pytest.raises(ConfigError, match=r"attention_widths\['64'\].*attention_call_s"):
        load_calibration(str(path))


@pytest.mark.parametrize("curve, gbps", [({"8KiB": 2e-6, "2097152": 4e-6}, 2800.0), ({"8192": 2e-6, "2097152": 0.0}, 2800.0),
                                         ({"8192": 2e-6, "2097152": 4e-6}, 0.0)])
def test_a_profile_whose_decode_gemms_cannot_be_read_is_refused(tmp_path, curve, gbps):
    path = save_calibration(replace(load_calibration("h100_sxm"), decode_gemm_s=curve, decode_gemm_gbps=gbps),
                            tmp_path / "bad.yaml")
    with pytest.raises(ConfigError, match=r"decode_gemm_s = .*seconds by weight bytes"):
        load_calibration(str(path))


GOOD_PREFILL = {"16x1000": 2e-6, "16x2000": 3e-6, "256x1000": 4e-6, "256x2000": 5e-6}


@pytest.mark.parametrize("table", [{"16x1000": 2e-6, "16x2000": 3e-6, "256x1000": 4e-6},
                                   {**GOOD_PREFILL, "256by2000": 5e-6},
                                   {**GOOD_PREFILL, "256x2000": float("nan")},
                                   {**GOOD_PREFILL, "256x2000": 3e-6}])
def test_a_profile_whose_prefill_gemms_cannot_be_read_is_refused(tmp_path, table):
    """One size at a row count, a shape that is not ROWSxBYTES, a time that is not a number, a larger size
    faster than a smaller one at its rows: refused on load (a table that reads is kept)."""
    save_calibration(replace(load_calibration("h100_sxm"), prefill_gemm_s=GOOD_PREFILL), tmp_path / "ok.yaml")
    assert load_calibration(str(tmp_path / "ok.yaml")).prefill_gemm_s == GOOD_PREFILL
    path = save_calibration(replace(load_calibration("h100_sxm"), prefill_gemm_s=table), tmp_path / "bad.yaml")
    with pytest.raises(ConfigError, match=r"prefill_gemm_s = .*seconds by 'ROWSxBYTES'"):
        load_calibration(str(path))


def test_the_prefill_gemms_fit_keeps_each_rows_and_size_and_needs_two_of_each():
    """The median where shapes share rows and size, a larger size at least a smaller one's time, no rows beyond
    PREFILL_GEMM_ROWS' most (a ledger of a longer run); one row count, or one size at a count, is no table."""
    metrics = {"matmul_time_us/16x1024x4096": 5.0, "matmul_time_us/16x4096x1024": 7.0, "matmul_time_us/16x4096x4096": 16.0,
               "matmul_time_us/256x1024x4096": 8.0, "matmul_time_us/256x4096x4096": 20.0,
               "matmul_time_us/256x4096x16384": 19.0, "matmul_time_us/1024x1024x4096": 30.0,
               "matmul_time_us/1024x4096x4096": 60.0}
    assert prefill_gemm_figures(metrics, 2)["prefill_gemm_s"] == pytest.approx(
        {"16x8388608": 6e-6, "16x33554432": 16e-6, "256x8388608": 8e-6, "256x33554432": 20e-6, "256x134217728": 20e-6})
    assert prefill_gemm_figures({k: v for k, v in metrics.items() if "/16x" in k}, 2) == {"prefill_gemm_s": {}}
    assert prefill_gemm_figures({**metrics, "matmul_time_us/64x1024x4096": 7.0}, 2) == {"prefill_gemm_s": {}}


def test_the_grouped_roofline_needs_five_calls_and_takes_the_matrices_and_rows_each_call_reads():
    """Without the run, or with fewer calls than the roofline's five figures: no grouped figures (the plain curve and
    membw stand in). Each call's read is its matrices of groups given rows (matmul_groups_read), each of M / that many
    rows; all of them in a ledger from before that metric. A roofline is refused on load unless whole."""
    unmeasured = dict.fromkeys(GROUPED_FIELDS, 0.0)
    assert grouped_gemm_figures({}, 8, 2) == unmeasured
    four = {"matmul_time_us/64x1024x1024": 10.0, "matmul_time_us/128x1024x1024": 10.5, "matmul_time_us/8192x1024x1024": 60.0,
            "matmul_time_us/16384x1024x1024": 110.0}
    assert grouped_gemm_figures(four, 8, 2) == unmeasured
    assert grouped_gemm_figures({**four, "matmul_time_us/32x1024x1024": 0.0}, 8, 2) == unmeasured  # a call of no time
    truth = replace(load_calibration("h200"), grouped_matmul_tflops=600.0, grouped_read_gbps=2200.0, grouped_read_rows_exp=0.1,
                    grouped_call_s=10e-6, grouped_roofline_p=1.5)
    shapes = [(2, 2048, 8192), (8, 2048, 8192), (32, 1024, 4096), (128, 2048, 8192), (512, 2048, 8192), (4096, 2048, 8192),
              (16384, 1024, 4096)]
    read = {(m, k, n): expected_groups_read(m) for m, k, n in shapes}
    metrics = {f"matmul_time_us/{m}x{k}x{n}": 1e6 * truth.grouped_gemm_seconds(2 * m * k * n, r * k * n * 2, m / r)
               for (m, k, n), r in read.items()}
    figures = {"grouped_matmul_tflops": 600.0, "grouped_read_gbps": 2200.0, "grouped_read_rows_exp": 0.1,
               "grouped_call_s": 10e-6, "grouped_roofline_p": 1.5}
    fitted = grouped_gemm_figures({**metrics, **{f"matmul_groups_read/{m}x{k}x{n}": r for (m, k, n), r in read.items()}}, 8, 2)
    assert fitted == pytest.approx(figures, rel=1e-3)
    assert grouped_gemm_figures(metrics, 8, 2) != pytest.approx(figures, rel=0.05)  # every call read as all 8 matrices
    nan = {**metrics, "matmul_time_us/64x2048x8192": float("nan")}  # a call that is not a number is left out
    assert grouped_gemm_figures({**nan, **{f"matmul_groups_read/{m}x{k}x{n}": r for (m, k, n), r in read.items()}}, 8, 2) == (
        pytest.approx(figures, rel=1e-3))
    # one run alone is no roofline: the few-row calls leave the rate free, the compute-bound ones the read
    few = {f"matmul_time_us/{m}x{k}x{n}": t for (m, k, n), t in zip(shapes, metrics.values()) if m <= 128}
    assert grouped_calls({"grouped_decode_matmul": few}) == {} and grouped_calls({"grouped_matmul": metrics}) == {}
    assert grouped_calls({"grouped_decode_matmul": few, "grouped_matmul": {}}) == few
    cal = replace(load_calibration("h100_sxm"), grouped_matmul_tflops=0.0, grouped_read_gbps=0.0)  # not measured
    flops, nbytes = 2 * 8192 * 1024 * 1024, 8 * 2 * 1024**2
    assert cal.grouped_gemm_seconds(flops, nbytes, 1024) == pytest.approx(max(flops / cal.matmul_rate(flops),
                                                                              cal.weight_read_seconds(nbytes)))


def test_a_grouped_call_reads_faster_the_more_rows_a_group_takes():
    """The read at one row a group times rows^grouped_read_rows_exp (H200: 1-16 rows a group at 2.0-2.6 TB/s, 64 at
    2.9-3.1): a read-bound call of 64 rows a group takes 64^-exp of the read of one row's (beside the fixed cost); fewer
    than one row a group (a call of none) reads as one."""
    cal = replace(load_calibration("h200"), grouped_matmul_tflops=600.0, grouped_read_gbps=2000.0, grouped_read_rows_exp=0.1,
                  grouped_call_s=0.0, grouped_roofline_p=16.0)
    nbytes = 8 * 2048 * 8192 * 2
    assert cal.grouped_gemm_seconds(0.0, nbytes, 1) == pytest.approx(nbytes / 2000e9)
    assert cal.grouped_gemm_seconds(0.0, nbytes, 64) == pytest.approx(nbytes / (2000e9 * 64 ** 0.1))
    assert cal.grouped_gemm_seconds(0.0, nbytes, 0.5) == cal.grouped_gemm_seconds(0.0, nbytes, 1)


@pytest.mark.parametrize("figures", [{"grouped_roofline_p": 0.0}, {"grouped_read_gbps": 0.0}, {"grouped_call_s": -1e-6},
                                     {"grouped_read_rows_exp": 1.5}, {"grouped_matmul_tflops": -600.0}])
def test_a_profile_with_part_of_a_grouped_roofline_is_refused(tmp_path, figures):
    path = save_calibration(replace(load_calibration("h200"), **figures), tmp_path / "bad.yaml")
    with pytest.raises(ConfigError, match=r"grouped_matmul_tflops = .*p of 1 or more"):
        load_calibration(str(path))


def test_the_decode_gemms_fit_keeps_every_size_and_the_bandwidth_beyond_the_largest():
    """The median where shapes share a size; beyond the largest the slope between the two largest, or the
    largest's own bandwidth where they do not rise; one size is not a curve (the weights at membw)."""
    metrics = {"matmul_time_us/8x1024x1024": 4.0, "matmul_time_us/8x4096x256": 5.0, "matmul_time_us/8x256x4096": 9.0,
               "matmul_time_us/8x4096x4096": 16.0, "matmul_time_us/8x8192x8192": 48.0}
    figures = decode_gemm_figures(metrics, 2)
    assert figures["decode_gemm_s"] == pytest.approx({"2097152": 5e-6, "33554432": 16e-6, "134217728": 48e-6})
    assert figures["decode_gemm_gbps"] == pytest.approx((134217728 - 33554432) / 32e-6 / 1e9)
    flat = decode_gemm_figures({**metrics, "matmul_time_us/8x8192x8192": 16.0}, 2)
    assert flat["decode_gemm_gbps"] == pytest.approx(134217728 / 16e-6 / 1e9)
    assert figures["decode_unaligned_factor"] == 1.0
    unaligned = decode_gemm_figures({**metrics, "matmul_time_us/8x4096x4095": 48.0}, 2)  # as 32 MiB aligned: 16 µs
    assert unaligned["decode_gemm_s"] == figures["decode_gemm_s"]
    assert unaligned["decode_unaligned_factor"] == pytest.approx(48e-6 / figures_at(figures, 2 * 4096 * 4095))
    assert decode_gemm_figures({"matmul_time_us/8x1024x1024": 4.0}, 2) == {"decode_gemm_s": {}, "decode_gemm_gbps": 0.0,
                                                                          "decode_unaligned_factor": 1.0}


def figures_at(figures: dict, weight_bytes: int) -> float:
    """A decode GEMM's seconds at this size on the fitted table."""
    return Calibration(**figures).decode_gemm_seconds(weight_bytes)


def test_a_profile_measured_in_bf16_predicts_an_fp32_run_at_fp32_rates():
    """The shipped H100 profile is bf16's; an fp32 run gets its GEMM and attention rates scaled by the peaks."""
    from parbench.predict.profiles import calibration_for

    hw = compose("hardware=h100_sxm", "hardware.gpus_per_node=1").hardware
    bf16, fp32 = calibration_for(hw, "bf16", None), calibration_for(hw, "fp32", None)
    assert bf16 == load_calibration("h100_sxm") and fp32.dtype == "fp32" and fp32.membw_gbps == bf16.membw_gbps
    assert fp32.matmul_tflops == pytest.approx(bf16.matmul_tflops * 67 / 989)
    assert fp32.attention_tflops == pytest.approx(bf16.attention_tflops * 67 / 989)
    for width, figures in bf16.attention_widths.items():  # each head width's rates too, not its call cost
        assert fp32.attention_widths[width] == pytest.approx(
            {**figures, "attention_tflops": figures["attention_tflops"] * 67 / 989,
             "attention_forward_tflops": figures["attention_forward_tflops"] * 67 / 989})
    assert set(bf16.attention_widths) == {"64", "128"}


def test_an_interrupted_calibration_continues_at_the_next_run(monkeypatch, tmp_path, capsys):
    """Ctrl-C during run k+1 of n: the k finished are kept; the same command runs k+1..n only."""
    args = [*ONE_CPU, "--work", str(tmp_path / "work"), "--out", str(tmp_path / "cpu.yaml"),
            f"tracking.uri=sqlite:///{tmp_path}/m.db"]
    first = FakeRuns(ONE_CPU, stop="eager_none")
    monkeypatch.setattr(subprocess, "run", first)
    assert calibrate.main(args) == 130
    assert "interrupted after 4 of" in capsys.readouterr().err and not (tmp_path / "cpu.yaml").exists()
    second = FakeRuns(ONE_CPU)
    monkeypatch.setattr(subprocess, "run", second)
    assert calibrate.main(args) == 0
    assert second.names[0] == "eager_none" and not set(first.names) & set(second.names)
    assert (tmp_path / "cpu.yaml").exists()


def test_a_failed_run_ends_with_its_reason_not_a_traceback(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: subprocess.CompletedProcess(cmd, 1, "", "boom")
                        if "parbench" in cmd else REAL_RUN(cmd, **kw))
    assert calibrate.main([*ONE_CPU, "--work", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "calibration run matmul failed (exit 1)" in err and "Traceback" not in err


def predicted(cal, *overrides: str):
    cfg = compose("hardware=h100_sxm", "hardware.gpus_per_node=1", *overrides)
    p = predict(cfg, validate(cfg, None), cal)
    return p.step_time_s, p.memory.total_gb


# Measured on one H100 (docs/results/2026-11-24_calibration_h100/measured.json, the 1B Llama's shapes at
# 8 layers): against eager without checkpointing, compile is faster and holds less, full and
# selective checkpointing are slower and hold less; compiled, full checkpointing is slower and holds less.
MEASURED_DIRECTIONS = {("eager", "none", "compiled", "none"): (-1, -1), ("eager", "none", "eager", "full"): (1, -1),
                       ("eager", "none", "eager", "selective"): (1, -1), ("compiled", "none", "compiled", "full"): (1, -1)}


def mode(compiled: str, ac: str) -> list[str]:
    return [f"workload.compile={str(compiled == 'compiled').lower()}", f"workload.activation_checkpointing={ac}"]


@pytest.mark.parametrize("change", list(MEASURED_DIRECTIONS), ids=lambda c: "->".join(c))
def test_compile_and_checkpointing_move_the_prediction_in_the_measured_direction(change):
    """With the shipped H100 profile: step time on another shape than the calibration's (the whole
    1B model at 4096 tokens), peak memory there and on the tiny model."""
    cal = load_calibration(str(CONF_DIR / "calibrations" / "h100_sxm.yaml"))
    time_sign, memory_sign = MEASURED_DIRECTIONS[change]
    for shape, check_time in ((["model=llama3_2_1b", "workload.seq_len=4096", "workload.batch_size=2"], True),
                              (["model=tiny"], False)):
        (t0, m0), (t1, m1) = predicted(cal, *shape, *mode(*change[:2])), predicted(cal, *shape, *mode(*change[2:]))
        assert (m1 - m0) * memory_sign > 0, shape
        assert not check_time or (t1 - t0) * time_sign > 0, shape


def test_an_uncalibrated_gpu_run_says_so_and_the_tiny_model_is_not_far_off():
    """No profile for h100_pcie: the table's note names the spec figures and the command that measures
    them; the tiny model's first run (8.2 ms a step measured on one H100 SXM) is predicted within 2x."""
    from parbench.orchestrator import prediction_source

    cfg = compose("hardware=h100_pcie", "hardware.gpus_per_node=1")
    p = predict(cfg, validate(cfg, None))
    assert "spec figures" in prediction_source(cfg, p.as_dict())
    assert "parbench calibrate hardware=h100_pcie" in prediction_source(cfg, p.as_dict())
    assert 8.2e-3 / 2 < p.step_time_s < 8.2e-3 * 2


def test_a_run_far_off_a_shipped_profile_is_told_to_calibrate_this_machine(monkeypatch, tmp_path):
    """The default CPU run measured 40 % over the shipped cpu.yaml on a slower day of the same machine type: the table's
    note says the profile is another machine's and names the command; within FAR_OFF_PCT, for a memory error, or with
    this machine's own profile, it says only where the figures come from."""
    from parbench.orchestrator import prediction_source

    monkeypatch.setenv("PARBENCH_CACHE_DIR", str(tmp_path))
    cfg = compose()
    prediction = predict(cfg, validate(cfg, None)).as_dict()
    far = prediction_source(cfg, prediction, {"predicted_step_time_error_pct": -39.9})
    assert "the prediction is -40 % off this run's measurement" in far and "measured on another machine or day; `parbench calibrate hardware=cpu`" in far
    assert "another machine" not in prediction_source(cfg, prediction, {"predicted_step_time_error_pct": -12.0})
    assert "another machine" not in prediction_source(cfg, prediction, {"predicted_mem_peak_error_pct": 40.0})  # not a time
    save_calibration(load_calibration("cpu"), tmp_path / "calibrations" / "cpu.yaml")
    assert "another machine" not in prediction_source(cfg, prediction, {"predicted_step_time_error_pct": -39.9})


def test_a_run_far_off_with_a_block_no_calibration_ran_says_so():
    """The H200's profile counted the kernels of a few blocks; an MoE's with q/k norms is none of them (2026-11-29: an
    MoE's decode, before any calibration counted one, 64 % slower than predicted): the note names the block, not the
    machine."""
    from parbench.orchestrator import prediction_source

    cfg = compose("hardware=h200", "hardware.gpus_per_node=1", "model=moe_2_5b", "model.qk_norm=true", "workload=inference")
    prediction = predict_inference(cfg, validate(cfg, None), load_calibration("h200")).as_dict()
    far = prediction_source(cfg, prediction, {"predicted_tpot_error_pct": -63.5})
    assert "-64 % off" in far and "no calibration run had this model's block (llama/gqa/qk_norm/moe" in far
    assert "another machine" not in far


def test_a_far_off_gpu_step_that_is_mostly_dispatch_is_told_to_measure_its_host():
    """Host 1651724063242 (2026-12-07) stepped GPT-2 XL eager, fully checkpointed at 8 x 512 in 342 ms, 52 % over the
    shipped H100 profile, whose host dispatches that step in 71 % of it: the note names `--host`. A step that is the
    GPU's (the compiled Llama) far off gets the whole calibration named."""
    from parbench.orchestrator import prediction_source

    def note(*overrides: str) -> str:
        cfg = compose("hardware=h100_sxm", "hardware.gpus_per_node=1", "workload.batch_size=8", *overrides)
        prediction = predict(cfg, validate(cfg, None), load_calibration("h100_sxm")).as_dict()
        return prediction_source(cfg, prediction, {"predicted_step_time_error_pct": -51.9})

    host_bound = note("model=gpt2_xl", "workload.seq_len=512", *mode("eager", "full"))
    assert "dispatch is 71 % of the predicted step," in host_bound
    assert "`parbench calibrate hardware=h100_sxm --host`" in host_bound
    gpu_bound = note("model=llama3_2_1b", "workload.seq_len=1024", *mode("compiled", "none"))
    assert "--host" not in gpu_bound and "`parbench calibrate hardware=h100_sxm` measures this one" in gpu_bound


def test_a_far_off_tiny_model_inference_run_on_a_gpu_is_told_to_measure_its_host():
    """Host 1651924068614 (2026-12-07) ran the default inference run (the tiny model) in a TTFT of 121 µs, 69 % under
    the shipped H100 profile's 205, whose replayed prefill is all the host's: the note names `--host`, which now
    measures the engine's host time too (the TTFT then -10 %). The 1B Llama's prefill at batch 32 is the GPU's."""
    from parbench.orchestrator import prediction_source

    def note(*overrides: str) -> str:
        cfg = compose("hardware=h100_sxm", "hardware.gpus_per_node=1", "workload=inference", *overrides)
        prediction = predict_inference(cfg, validate(cfg, None), load_calibration("h100_sxm")).as_dict()
        return prediction_source(cfg, prediction, {"predicted_ttft_error_pct": 69.5})

    tiny = note()
    assert "of the predicted prefill (TTFT)" in tiny and "`parbench calibrate hardware=h100_sxm --host`" in tiny
    gpu_bound = note("model=llama3_2_1b", "workload.batch_size=32", "workload.input_len=512")
    assert "--host" not in gpu_bound and "`parbench calibrate hardware=h100_sxm` measures this one" in gpu_bound


def test_the_far_off_advice_weighs_the_host_in_the_time_that_is_off():
    """The 1B Llama's prefill launched op by op at batch 4 lasts its dispatch, which the device's work hides but for a
    tenth: the whole dispatch is what a slower host lengthens, so a far-off TTFT is told `--host`; its decode step is
    the GPU's, so a far-off TPOT of the same run is told the whole calibration."""
    from parbench.orchestrator import prediction_source

    cfg = compose("hardware=h100_sxm", "hardware.gpus_per_node=1", "workload=inference", "model=llama3_2_1b",
                  "workload.batch_size=4", "workload.input_len=512", "workload.prefill_graph=false")
    prediction = predict_inference(cfg, validate(cfg, None), load_calibration("h100_sxm")).as_dict()
    assert prediction["prefill"]["host_s"] < 0.2 * prediction["prefill"]["host_dispatch_s"]
    ttft = prediction_source(cfg, prediction, {"predicted_ttft_error_pct": 40.0, "predicted_tpot_error_pct": 2.0})
    assert "dispatch is 100 % of the predicted prefill (TTFT)" in ttft and "--host`" in ttft
    tpot = prediction_source(cfg, prediction, {"predicted_ttft_error_pct": 2.0, "predicted_tpot_error_pct": 40.0})
    assert "+40 % off" in tpot and "--host" not in tpot and "`parbench calibrate hardware=h100_sxm` measures" in tpot


HOST_FIELDS = ("host_s_per_step", "host_s_per_dispatch", "host_s_per_layer", "host_s_per_layer_compiled",
               "host_s_per_moe_layer", "host_s_per_replayed_layer", "host_s_per_replayed_call")
ENGINE_HOST_FIELDS = ("prefill_host_s", "decode_host_s")  # a CPU's engine has no replayed prefill


def calibrate_host(monkeypatch, tmp_path: Path) -> tuple[Calibration, dict, "FakeRuns", list[str]]:
    """`parbench calibrate --host` on a CPU whose host is TRUTH's, its device the shipped profile's: the shipped
    profile, this host's figures, the runs made and the command's arguments."""
    monkeypatch.setenv("PARBENCH_CACHE_DIR", str(tmp_path))
    shipped = load_calibration(str(CONF_DIR / "calibrations" / "cpu.yaml"))
    other_host = {f: getattr(TRUTH, f) for f in (*HOST_FIELDS, *ENGINE_HOST_FIELDS)}
    assert all(other_host[f] != getattr(shipped, f) for f in ("host_s_per_step", *ENGINE_HOST_FIELDS))
    runs = FakeRuns(ONE_CPU, truth=replace(shipped, **other_host))
    monkeypatch.setattr(subprocess, "run", runs)
    args = [*ONE_CPU, "--host", "--work", str(tmp_path / "work"), f"tracking.uri=sqlite:///{tmp_path}/m.db"]
    assert calibrate.main(args) == 0
    return shipped, other_host, runs, args


def test_a_host_calibration_measures_only_the_host_runs_and_keeps_the_device_figures(monkeypatch, tmp_path):
    """`parbench calibrate --host` on a host whose dispatch is TRUTH's, the device the shipped profile's: only the host
    runs (training and the engine's) are made, the profile has this host's figures and every other figure of the
    shipped one, and a second --host (refitting the same runs) over it replaces its host figures rather than adding
    to its source."""
    shipped, other_host, runs, args = calibrate_host(monkeypatch, tmp_path)
    cfg, _ = calibrate.local_config(ONE_CPU)
    assert runs.names == [n for n in calibrate.benchmarks(cfg) if n.startswith(("host_", "infer_")) and n != INFER_KV_RUN]
    assert {"host_compiled", "infer_2_layers"} <= set(runs.names)
    mine = load_calibration("cpu")
    for field in HOST_FIELDS[:2] + HOST_FIELDS[3:]:  # host_s_per_layer is per dispatch x a layer's dispatches
        assert getattr(mine, field) == pytest.approx(other_host[field], rel=5e-2), field
    for field in ENGINE_HOST_FIELDS:
        assert getattr(mine, field) == pytest.approx(other_host[field], rel=1e-6), field
    device = {f: v for f, v in vars(shipped).items() if f not in (*HOST_FIELDS, *ENGINE_HOST_FIELDS, "source", "notes")}
    assert {f: getattr(mine, f) for f in device} == device
    assert mine.source.startswith(shipped.source) and "; host figures: measured" in mine.source
    assert "training steps took" in mine.notes and "x (median 1.00x)" not in mine.notes
    assert calibrate.main([*args, "--fit-only"]) == 0  # over the profile just saved
    again = load_calibration("cpu").source
    assert again.startswith(shipped.source) and again.count(calibration_fit.HOST_SOURCE) == 1
    refitted = f"{calibration_fit.HOST_SOURCE}runs measured earlier, refitted {time.strftime('%Y-%m-%d')}: parbench calibrate --host"
    assert refitted in again


def test_a_host_refit_over_a_whole_ledger_lacking_engine_runs_keeps_the_engines_figures(monkeypatch, tmp_path, capsys):
    """`--host --fit-only` over a ledger that also holds a whole calibration's device runs (the default --work is the
    same) names none of them as no longer a calibration run; with some of the engine's host runs missing (an
    interrupted --host) it keeps the base's engine figures, which a part of their runs would misplace, and says so,
    while it still fits the training steps' host figures."""
    shipped, other_host, _, args = calibrate_host(monkeypatch, tmp_path)
    ledger = tmp_path / "work" / calibrate.MEASURED_FILE
    measured = json.loads(ledger.read_text())
    missing = [name for name in sorted(measured) if calibration_runs.is_engine_host_run(name)][:1]
    measured = {name: entry for name, entry in measured.items() if name not in missing}
    ledger.write_text(json.dumps({**measured, "matmul": measured["host_2_layers"]}))  # a device run beside them
    (user_calibration_dir() / "cpu.yaml").unlink()  # the base is the shipped profile again
    capsys.readouterr()
    assert calibrate.main([*args, "--fit-only"]) == 0
    assert "left out" not in capsys.readouterr().out
    mine = load_calibration("cpu")
    assert {f: getattr(mine, f) for f in ENGINE_HOST_FIELDS} == {f: getattr(shipped, f) for f in ENGINE_HOST_FIELDS}
    assert f"the engine's host figures kept: no {', '.join(missing)} measured" in mine.notes and missing
    assert mine.host_s_per_step == pytest.approx(other_host["host_s_per_step"], rel=5e-2)
