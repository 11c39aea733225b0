"""Fitted latency lines along each axis of an inference grid measured one axis at a time around a
centre (as docs/results/2026-11-24_vllm_gpu.md): input length, batch size and output length; never
through two models' points (docs/results/2026-11-25_vllm_gpu28.md); the intervals named by the level
the runs logged."""

from __future__ import annotations

import pandas as pd
import pytest

from parbench.report.inference import fit_table, inference_runs, inference_section, latency_table, percentile_table
from parbench.report.inference_verdict import verdict
from parbench.report.runs import RunSet, annotate


def grid_runs() -> pd.DataFrame:
    """7 runs around (in 1024, batch 16, out 128); latency linear in each axis, so each fit is exact."""
    centre = {"input_len": 1024, "batch_size": 16, "output_len": 128}
    points = [centre] + [{**centre, axis: v} for axis, values in
                         (("input_len", (256, 4096)), ("batch_size", (4, 64)), ("output_len", (32, 512))) for v in values]
    runs = pd.DataFrame(points).assign(model="llama3_2_1b", layout="vllm_tp1_pp1")
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


def logged(model: str, tpot: float, outputs: tuple[int, ...], level: float = 0.9375) -> list[dict]:
    """vLLM runs of `model` at input 1024, batch 16 as mlflow.search_runs returns them, one per output
    length: E2E = TTFT + TPOT x output exactly; intervals of the `level` their batches reached."""
    ttft = 0.065 if model == "llama3_2_1b" else 0.349
    return [{"run_id": f"{model}-out{out}", "status": "FINISHED", "tags.mlflow.runName":
             f"{model} 1 rank inference vllm in1024 out{out} bs16", "params.workload.name": "inference",
             "params.workload.engine": "vllm", "params.model.name": model, "params.parallel.tp": "1",
             "params.parallel.pp": "1", "params.workload.input_len": "1024", "params.workload.output_len": str(out),
             "params.workload.batch_size": "16", "metrics.requests_measured": 80.0, "metrics.output_tokens_per_s":
             16 * out / (ttft + tpot * out), "metrics.ttft_s_p50": ttft, "metrics.tpot_s_p50": tpot,
             "metrics.e2e_s_p50": ttft + tpot * out,
             **{f"metrics.{name}_{end}": value for name in ("ttft_s", "tpot_s", "e2e_s") for end, value in
                (("ci_low", 0.0), ("ci_high", 10.0), ("ci_level", level))}} for out in outputs]


def several_models(*runs: list[dict]) -> pd.DataFrame:
    return inference_runs(annotate(pd.DataFrame([row for model in runs for row in model])))


def test_the_fits_never_mix_two_models():
    """The GPU store's case: llama3_2_1b at output 32 and 512, llama2_7b at 128. Labelled "vllm 1
    rank" both, their three points made one line (R² 0.53); two points of one model make none."""
    done = several_models(logged("llama3_2_1b", 3e-3, (32, 512)), logged("llama2_7b", 9e-3, (128,)))
    assert fit_table(done)[1].empty
    done = several_models(logged("llama3_2_1b", 3e-3, (32, 128, 512)), logged("llama2_7b", 9e-3, (32, 128, 512)))
    lines = fit_table(done)[1].set_index("model")
    assert sorted(lines.index) == ["llama2_7b", "llama3_2_1b"] and (lines["points"] == 3).all()
    assert (lines["r2"] > 0.999).all() and lines.loc["llama2_7b", "slope_s_per_unit"] == pytest.approx(9e-3)
    assert lines.loc["llama3_2_1b", "layout"] == "llama3_2_1b vllm 1 rank"


def test_the_tables_and_the_verdict_name_the_model():
    done = several_models(logged("llama3_2_1b", 3e-3, (128,)), logged("llama2_7b", 9e-3, (128,)))
    for shown, data in (latency_table(done), percentile_table(done)):
        assert set(shown["layout"]) == {"llama3_2_1b vllm 1 rank", "llama2_7b vllm 1 rank"}
        assert set(data["model"]) == {"llama3_2_1b", "llama2_7b"}
    assert verdict(done) == []  # one layout per model: no model ranked against the other
    alone = several_models(logged("llama3_2_1b", 3e-3, (128,)))
    assert set(alone["layout"]) == {"vllm 1 rank"}  # one model: the labels stay short


def latency_text(tmp_path, runs: pd.DataFrame) -> tuple[str, pd.DataFrame]:
    section = inference_section(RunSet(annotate(runs), "synthetic"), tmp_path, lambda run_id, path: None)
    table = next(b for b in section.blocks if getattr(b, "csv", "") == "inference_latency.csv")
    return " ".join(b.text for b in section.blocks if hasattr(b, "text")), table


def test_the_intervals_are_named_by_the_level_the_runs_logged(tmp_path):
    """5 batches give the order statistics 93.75 %, 3 give 75 %: the page said 95 % for both."""
    text, table = latency_text(tmp_path, pd.DataFrame(logged("llama3_2_1b", 3e-3, (32, 512))))
    assert "in brackets their 93.8 % interval over the measured batches" in text and "95 %" not in text
    assert "interval" not in table.shown and (table.data["ci_level"] == 0.9375).all()
    text, table = latency_text(tmp_path, pd.DataFrame(logged("llama3_2_1b", 3e-3, (32,))
                                                      + logged("llama2_7b", 9e-3, (128,), level=0.75)))
    assert "at the level in its row's 'interval' column (75.0 % / 93.8 %" in text
    assert dict(zip(table.shown["layout"], table.shown["interval"])) == {"llama3_2_1b vllm 1 rank": "93.8 %",
                                                                         "llama2_7b vllm 1 rank": "75.0 %"}
