"""The report on synthetic runs with known noise: the flags it must raise (efficiency above 100 %,
wide intervals, a fit from too few input lengths), rankings only within a device count, one
scaling baseline, percentiles only where the samples support them, and the inference verdict."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from parbench.report import noise
from parbench.report.runs import RunSet, annotate
from parbench.report.training import scaling_table, training_section, verdict

TOKENS = 1024.0


def train_run(name: str, layout: str, devices: int, tok_s: float, low: float, high: float) -> dict:
    """One finished strong-scaling run as mlflow.search_runs returns it."""
    step = TOKENS / tok_s
    return {"run_id": f"{name}-id", "status": "FINISHED", "tags.mlflow.runName": f"tiny {name} seq64",
            "params.workload.name": "train", "params.parallel.name": layout, "params.hardware.nodes": "1",
            "params.hardware.gpus_per_node": str(devices), "params.workload.global_batch_size": "16",
            "params.stats.confidence": "0.95", "metrics.plan_world_size": float(devices),
            "metrics.plan_tokens_per_step": TOKENS, "metrics.step_time_s": step,
            "metrics.step_time_s_ci_low": TOKENS / high, "metrics.step_time_s_ci_high": TOKENS / low,
            "metrics.throughput_tokens_per_s": tok_s, "metrics.throughput_tokens_per_s_ci_low": low,
            "metrics.throughput_tokens_per_s_ci_high": high, "metrics.throughput_tokens_per_s_per_device": tok_s / devices,
            "metrics.mfu": 0.01, "metrics.comm_pct": 10.0, "metrics.exposed_comm_pct": 5.0,
            "metrics.mem_peak_allocated_gb": 0.4}


@pytest.fixture
def noisy() -> pd.DataFrame:
    """The issue's case: a 1-device dp run slowed down (the sweep's first point), dp2 with a wide
    interval and an apparent efficiency above 100 %, fsdp2 steady."""
    return annotate(pd.DataFrame([train_run("dp1", "dp", 1, 300, 290, 310), train_run("fsdp1", "fsdp", 1, 380, 370, 390),
                                  train_run("dp2", "dp", 2, 1100, 330, 1300), train_run("fsdp2", "fsdp", 2, 600, 580, 620)]))


def test_rankings_stay_within_a_device_count_and_scaling_has_one_baseline(noisy):
    table = scaling_table(annotate(noisy), "strong").set_index("run")
    assert list(table.index) == ["fsdp1", "dp1", "dp2", "fsdp2"]  # by devices, fastest first within
    assert table.loc["fsdp1", "vs_fastest"] == "fastest" and table.loc["dp1", "vs_fastest"] == "slower"
    assert set(table.loc[["dp2", "fsdp2"], "vs_fastest"]) == {"tied for fastest"}  # intervals overlap: no winner
    assert set(table["baseline"]) == {"fsdp1"} and table.loc["fsdp1", "speedup"] == 1.0
    assert table.loc["dp2", "speedup"] == pytest.approx(1100 / 380)
    assert table.loc["dp2", "speedup_ci_low"] == pytest.approx(330 / 390)
    assert table.loc["dp2", "speedup_ci_high"] == pytest.approx(1300 / 370)


def test_efficiency_above_100_pct_and_wide_intervals_are_flagged(noisy):
    table = scaling_table(annotate(noisy), "strong").set_index("run")
    assert table.loc["dp2", "parallel_efficiency"] > 1
    assert "efficiency above 100 % (within noise)" in table.loc["dp2", "notes"]
    assert "wide interval" in table.loc["dp2", "notes"] and "wide" not in table.loc["fsdp2", "notes"]
    superlinear = scaling_table(annotate(pd.DataFrame([train_run("a1", "dp", 1, 100, 99, 101),
                                                       train_run("a2", "dp", 2, 300, 290, 310)])), "strong")
    assert superlinear.set_index("run").loc["a2", "notes"] == "efficiency above 100 %"  # beyond the intervals


def test_the_verdict_names_a_winner_only_where_the_intervals_allow(noisy):
    table = scaling_table(annotate(noisy), "strong")
    one, two, scaling = verdict(table, "strong")[:3]
    assert "**fsdp1** is the fastest" in one
    assert "no winner" in two and "**dp2**" in two and "**fsdp2**" in two
    assert "one baseline, fsdp1" in scaling and "above 100 %" in scaling


def test_the_section_states_the_caveats(noisy, tmp_path):
    section = training_section(RunSet(annotate(noisy), "synthetic"), tmp_path, lambda run_id, path: None)
    text = " ".join(b.text for b in section.blocks if hasattr(b, "text"))
    assert "**Wide intervals** (dp2" in text and "**Efficiency above 100 %** (dp2" in text
    assert "**One device, different figures**" in text and "workload.steps" in text
    assert {"training_throughput.png", "training_scaling.png", "training_memory.png"} <= {p.name for p in tmp_path.iterdir()}


def test_noise_helpers():
    assert noise.supported_percentiles(5) == (50,) and noise.supported_percentiles(10) == (50, 90)
    assert noise.supported_percentiles(100) == (50, 90, 99)
    assert noise.overlaps(1, 2, 2, 3) and not noise.overlaps(1, 2, 2.5, 3) and noise.overlaps(1, 2, np.nan, 3)
    assert noise.wide_note(100, 80, 130) == "wide interval (±25 %)" and noise.wide_note(100, 95, 105) == ""


def inference_run(tp: int, pp: int, input_len: int, tok_s: float, spread: float, ttft: float) -> dict:
    """A native-engine run of 5 batches of 4 requests, output 16: its E2E interval is ±spread."""
    e2e = 4 * 16 / tok_s
    layout = " ".join(f"{d}{n}" for d, n in (("tp", tp), ("pp", pp)) if n > 1) or "1 rank"
    return {"run_id": f"{layout}-{input_len}", "status": "FINISHED", "tags.mlflow.runName": f"tiny {layout} inference in{input_len}",
            "params.workload.name": "inference", "params.workload.engine": "native", "params.parallel.tp": str(tp),
            "params.parallel.pp": str(pp), "params.workload.input_len": str(input_len), "params.workload.output_len": "16",
            "params.workload.batch_size": "4", "params.workload.dtype": "fp32", "params.model.name": "tiny",
            "params.hardware.name": "cpu", "params.hardware.nodes": "1", "params.hardware.gpus_per_node": str(tp * pp),
            "metrics.requests_measured": 20.0, "metrics.output_tokens_per_s": tok_s,
            "metrics.e2e_s_p50": e2e, "metrics.e2e_s_ci_low": e2e * (1 - spread), "metrics.e2e_s_ci_high": e2e * (1 + spread),
            "metrics.ttft_s_p50": ttft, "metrics.ttft_s_ci_low": ttft * 0.95, "metrics.ttft_s_ci_high": ttft * 1.05,
            "metrics.tpot_s_p50": e2e / 16, "metrics.ttft_s_p90": ttft * 1.1, "metrics.ttft_s_p99": ttft * 1.1}


@pytest.fixture
def inference() -> pd.DataFrame:
    """pp2 clearly fastest at in64 (and more than twice the 1-rank throughput); at in128 tp2 and
    pp2 overlap; two input lengths only."""
    return annotate(pd.DataFrame([inference_run(1, 1, 64, 1000, 0.05, 0.030), inference_run(2, 1, 64, 1500, 0.05, 0.020),
                                  inference_run(1, 2, 64, 2600, 0.05, 0.025), inference_run(1, 1, 128, 900, 0.05, 0.060),
                                  inference_run(2, 1, 128, 1400, 0.2, 0.040), inference_run(1, 2, 128, 1500, 0.2, 0.045)]))


def test_the_inference_verdict_and_flags(inference, tmp_path):
    from parbench.report.inference import fit_table, inference_runs, percentile_table
    from parbench.report.inference_verdict import scaling_table as inference_scaling, verdict as inference_verdict

    done = inference_runs(RunSet(inference, "synthetic").of("inference"))
    assert set(done["layout"]) == {"1 rank", "tp2", "pp2"}  # the run names' words, not `tp1_pp2`
    in64, in128 = inference_verdict(done)
    assert in64.startswith("in64 out16 bs4: **pp2** has the most output tokens/s") and "lowest TTFT: **tp2**" in in64
    assert "no winner" in in128 and "**tp2**" in in128 and "**pp2**" in in128
    overhead = inference_scaling(done).set_index(["layout", "input_len"])
    assert overhead.loc[("pp2", 64), "scaling_efficiency"] == pytest.approx(1.3)
    assert overhead.loc[("pp2", 64), "notes"] == "efficiency above 100 %"  # beyond both intervals
    assert fit_table(done)[1].empty  # two input lengths: no line
    shown, data = percentile_table(done)
    assert (data["samples"] == 5).all() and data["ttft_s_p90"].isna().all() and data["ttft_s_p50"].notna().all()
    assert shown["TTFT p99"].eq("–").all()
    from parbench.report.inference import inference_section

    section = inference_section(RunSet(inference, "synthetic"), tmp_path, lambda run_id, path: None)
    text = " ".join(b.text for b in section.blocks if hasattr(b, "text"))
    assert "**Efficiency above 100 %** (pp2" in text
    assert (tmp_path / "inference_latency_vs_input.png").exists()  # the points, without lines
    assert "inference_fits.csv" not in {b.csv for b in section.blocks if hasattr(b, "csv")}


def test_vllm_runs_without_a_decode_mode_tag_get_str_labels(inference):
    """vLLM runs log no decode_mode tag: the 'eager' filled in is str like the layout labels it is
    appended to. As object, pandas 3.0 refused the str + object (even on no rows), describe_sweep
    failed and the sweep's parent run was left open, then marked FAILED as an orphan."""
    from parbench.report.inference import inference_runs

    vllm = inference.assign(**{"params.workload.engine": "vllm"})
    assert "tags.decode_mode" not in vllm
    done = inference_runs(RunSet(vllm, "synthetic").of("inference"))
    assert done["decode_mode"].dtype == done["layout"].dtype and set(done["decode_mode"]) == {"eager"}
    assert set(done["layout"]) == {"vllm 1 rank", "vllm tp2", "vllm pp2"}


def test_a_line_needs_three_input_lengths_and_says_when_it_is_noise():
    from parbench.metrics.fits import fit_line
    from parbench.report.inference import trend

    line = fit_line([64, 128, 256], [0.030, 0.028, 0.031])
    assert line.slope_low < 0 < line.slope_high and trend(line.slope_low, line.slope_high) == "none beyond noise"
    steep = fit_line([64, 128, 256, 512], [0.010, 0.020, 0.041, 0.079])
    assert trend(steep.slope_low, steep.slope_high) == "grows"
    assert np.isnan(fit_line([64, 128], [0.03, 0.02]).slope_low)  # two points: no interval


def test_children_that_share_a_name_are_named_apart(tmp_path):
    from parbench.report.mlflow_view import distinct_names
    from parbench.tracking.store import Store

    store = Store(f"sqlite:///{tmp_path / 'mlflow.db'}", "names")
    parent = store.create_run("sweep", {})
    for hardware in ("h100", "h200"):
        run = store.create_run("llama dp2 seq64 mbs4", {}, parent)
        store.log_params(run, {"hardware.name": hardware, "parallel.name": "dp"})
    renamed = distinct_names(store, store.child_runs(parent))
    names = sorted(store.child_runs(parent)["tags.mlflow.runName"])
    assert names == ["llama dp2 seq64 mbs4 hardware=h100", "llama dp2 seq64 mbs4 hardware=h200"]
    assert sorted(renamed["tags.mlflow.runName"]) == names


def test_a_child_closed_before_it_could_describe_itself_gets_its_reason(tmp_path):
    from parbench.report.mlflow_view import describe_undescribed
    from parbench.tracking.store import Store

    store = Store(f"sqlite:///{tmp_path / 'mlflow.db'}", "notes")
    parent = store.create_run("sweep", {})
    run = store.create_run("inference input_len=256", {"failure_reason": "invalid config: too long"}, parent)
    store.close(run, "FAILED")
    describe_undescribed(store, store.child_runs(parent))
    note = store.child_runs(parent)["tags.mlflow.note.content"].iloc[0]
    assert note == "**FAILED**: invalid config: too long"


def test_the_experiment_description_links_the_latest_sweep_unless_the_user_wrote_one(tmp_path):
    from parbench.report.mlflow_view import point_to_latest
    from parbench.tracking.store import Store

    store = Store(f"sqlite:///{tmp_path / 'mlflow.db'}", "latest")
    parent = store.create_run("sweep parallel=dp,fsdp", {})
    children = annotate(pd.DataFrame([train_run("dp1", "dp", 1, 300, 290, 310)]))
    point_to_latest(store, parent, children, "sweep-abc")
    note = store.experiment_tags()["mlflow.note.content"]
    assert note.startswith(f"**Latest sweep**: [its 1 point, best tokens/s first](#/experiments/{store.experiment_id}"
                           "/runs?viewStateShareKey=sweep-abc)") and note.endswith("`sweep parallel=dp,fsdp`")
    store.set_experiment_tag("mlflow.note.content", "our cluster's runs")
    point_to_latest(store, parent, children, "sweep-def")
    assert store.experiment_tags()["mlflow.note.content"] == "our cluster's runs"
