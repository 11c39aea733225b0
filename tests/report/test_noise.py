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
