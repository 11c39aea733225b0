"""Fitted latency lines along each axis of an inference grid measured one axis at a time around a
centre (as docs/results/2026-11-24_vllm_gpu.md): input length, batch size and output length."""

from __future__ import annotations

import pandas as pd
import pytest

from parbench.report.inference import fit_table


def grid_runs() -> pd.DataFrame:
    """7 runs around (in 1024, batch 16, out 128); latency linear in each axis, so each fit is exact."""
    centre = {"input_len": 1024, "batch_size": 16, "output_len": 128}
    points = [centre] + [{**centre, axis: v} for axis, values in
                         (("input_len", (256, 4096)), ("batch_size", (4, 64)), ("output_len", (32, 512))) for v in values]
    runs = pd.DataFrame(points).assign(layout="vllm_tp1_pp1")
    runs["metrics.ttft_s_p50"] = 1e-3 + 2e-6 * runs["input_len"] * runs["batch_size"] / 16
    runs["metrics.tpot_s_p50"] = 3e-3 + 1e-5 * runs["batch_size"]
    runs["metrics.e2e_s_p50"] = runs["metrics.ttft_s_p50"] + runs["metrics.tpot_s_p50"] * runs["output_len"]
    return runs


def test_one_line_per_axis_and_metric_through_the_centre():
    _, data = fit_table(grid_runs())
    assert sorted(data["against"].unique()) == ["batch_size", "input_len", "output_len"]
    assert len(data) == 6 and (data["points"] == 3).all() and (data["r2"] > 0.999).all()
    e2e_vs_output = data[(data["against"] == "output_len") & (data["metric"] == "e2e_s_p50")].iloc[0]
    assert e2e_vs_output["slope_s_per_unit"] == pytest.approx(3e-3 + 16e-5)  # the time per output token
    assert set(data[data["against"] == "batch_size"]["metric"]) == {"ttft_s_p50", "tpot_s_p50", "e2e_s_p50"}
    assert pd.isna(e2e_vs_output["output_len"]) and e2e_vs_output["batch_size"] == 16
