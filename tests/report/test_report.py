"""`parbench report` on sweeps made here (real torchrun, real MLflow store): each section only when
its runs exist, speedup and efficiency from the logged step times, strong vs weak scaling, the
report on the sweep's parent run, failed points listed; the fits on synthetic points."""

from __future__ import annotations

import json
import sys

import mlflow
import numpy as np
import pandas as pd
import pytest

from conftest import Cli
from parbench.__main__ import main as parbench_main
from parbench.fmt import format_metric
from parbench.report.__main__ import main as report_main
from parbench.report.baseline import significance
from parbench.report.runs import latest_sweep
from parbench.metrics.fits import fit_alpha_beta, fit_line

QUICK_TRAIN = ("parallel=dp", "workload.steps=4", "workload.warmup_steps=1")


def parent_id(cli: Cli) -> str:
    return json.loads((cli.root / "sweep" / "mlflow_parent_run.json").read_text())["run_id"]


def sweep(root, name: str, uri: str, *overrides: str) -> Cli:
    """A multirun in root/name whose runs go to the shared store `uri`."""
    cli = Cli(root / name)
    cli.root.mkdir()
    cli.uri = uri
    proc = cli.run(*overrides, multirun=True, timeout=900, check=False)
    assert proc.returncode in (0, 1), proc.stderr  # 1: a point FAILED, on purpose (strong scaling's 3 ranks)
    cli.stdout, cli.returncode = proc.stdout, proc.returncode
    return cli


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    return root, f"sqlite:///{root / 'mlflow.db'}"


@pytest.fixture(scope="module")
def strong(store) -> Cli:
    """Strong scaling over 1 and 2 ranks (one global batch); 3 ranks cannot split the batch: a
    FAILED point, the first, so that the sweep is seen to go on after it."""
    root, uri = store
    return sweep(root, "strong", uri, *QUICK_TRAIN, "hardware.gpus_per_node=3,1,2", "workload.global_batch_size=4",
                 "invalid_points=record")


def children_step_times(cli: Cli) -> dict[str, float]:
    """hardware.gpus_per_node -> step_time_s of the sweep's finished runs."""
    runs = cli.runs()
    runs = runs[(runs["tags.mlflow.parentRunId"] == parent_id(cli)) & (runs["status"] == "FINISHED")]
    return dict(zip(runs["params.hardware.gpus_per_node"], runs["metrics.step_time_s"]))


def report(uri: str, out, *args: str) -> int:
    return report_main(["--uri", uri, "--out", str(out), *args])


def test_sweep_end_report_on_the_parent_run(strong, store):
    root, uri = store
    client = mlflow.MlflowClient(uri)
    parent = parent_id(strong)
    logged = {a.path for a in client.list_artifacts(parent, "report")}
    assert {"report/report.html", "report/report.md", "report/training.csv", "report/failed_runs.csv",
            "report/training_throughput.png", "report/training_scaling.png", "report/training_memory.png",
            "report/training_breakdown.png", "report/training_layers.png"} <= logged  # profiled by default
    folder = strong.root / "sweep" / "report"
    markdown = (folder / "report.md").read_text()
    assert "## Training" in markdown and "Strong scaling" in markdown and "## Failed runs" in markdown
    assert "## Inference" not in markdown and "## Microbenchmarks" not in markdown
    page = (folder / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 5 and "src='training" not in page  # self-contained
    failed = pd.read_csv(folder / "failed_runs.csv")
    assert len(failed) == 1 and "gpus_per_node=3" in failed["run"][0] and "multiple of" in failed["reason"][0]
    # invalid_points=record: the invalid first point is a FAILED run with its reason, the points after
    # it ran, and the sweep exits 1 (the fast set's case of tests/launch/test_torchrun.py's).
    runs = strong.runs()
    points = runs[runs["tags.mlflow.parentRunId"] == parent]
    assert list(points.status) == ["FAILED", "FINISHED", "FINISHED"] and strong.returncode == 1
    assert points.iloc[0]["tags.failure_reason"].startswith("invalid config: ")

    # Speedup and efficiency from the children's logged step times (one global batch: time ratios).
    step = children_step_times(strong)
    table = pd.read_csv(folder / "training.csv").set_index("devices")
    assert table.loc[2, "speedup"] == pytest.approx(step["1"] / step["2"], rel=1e-9)
    assert table.loc[2, "parallel_efficiency"] == pytest.approx(step["1"] / step["2"] / 2, rel=1e-9)
    assert table.loc[1, "speedup"] == pytest.approx(1.0)
    assert set(table["vs_fastest"]) == {"only run"}  # one run per device count: nothing to rank within


def test_cli_latest_sweep_and_baseline(strong, store, monkeypatch, capsys):
    root, uri = store
    out = root / "cli"
    parent = parent_id(strong)
    assert report(uri, out, "--sweep", parent, "--baseline", parent) == 0
    against = pd.read_csv(out / "baseline_training.csv")
    assert set(against["verdict"]) <= {"within noise", "no interval logged"}  # a sweep against itself
    assert {"step_time_s", "throughput_tokens_per_s", "mfu", "comm_pct", "mem_peak_allocated_gb"} <= set(against["metric"])
    timed = against[against["metric"].isin(["step_time_s", "throughput_tokens_per_s", "mfu"])]
    assert (timed["verdict"] == "within noise").all() and (against["change_pct"].fillna(0) == 0).all()
    monkeypatch.setattr(sys, "argv", ["parbench", "report", "--uri", uri, "--experiment", "nope"])
    with pytest.raises(SystemExit) as exit_status:  # the console script hands `report` to the report CLI
        parbench_main()
    assert exit_status.value.code == 2 and "no experiment 'nope'" in capsys.readouterr().err


@pytest.mark.slow
def test_weak_scaling_is_told_apart_and_mixing_is_refused(strong, store, capsys):
    root, uri = store
    weak = sweep(root, "weak", uri, *QUICK_TRAIN, "hardware.gpus_per_node=1,2", "workload.batch_size=2")
    assert report(uri, root / "weak_report", "--sweep", parent_id(weak)) == 0
    markdown = (root / "weak_report" / "report.md").read_text()
    assert "Weak scaling" in markdown
    table = pd.read_csv(root / "weak_report" / "training.csv").set_index("devices")
    step = children_step_times(weak)
    assert table.loc[2, "parallel_efficiency"] == pytest.approx(step["1"] / step["2"], rel=1e-9)
    assert report(uri, root / "mixed", "--filter", "params.workload.name = 'train'") == 2
    assert "mix strong scaling" in capsys.readouterr().err


@pytest.mark.slow
def test_inference_and_microbenchmark_sections(store):
    root, uri = store
    inference = sweep(root, "inference", uri, "workload=inference", "parallel=dp,tp", "workload.input_len=8,16,24",
                      "workload.output_len=4", "workload.batch_size=2", "workload.repeats=2")
    markdown = (inference.root / "sweep" / "report" / "report.md").read_text()
    assert "## Inference" in markdown and "## Training" not in markdown
    fits = pd.read_csv(inference.root / "sweep" / "report" / "inference_fits.csv")
    assert set(fits["metric"]) == {"ttft_s_p50", "e2e_s_p50"} and (fits["points"] == 3).all()
    overhead = pd.read_csv(inference.root / "sweep" / "report" / "inference_overhead.csv")
    assert len(overhead) == 3 and (overhead["scaling_efficiency"] > 0).all()
    assert "Prefill vs decode" in markdown
    shares = pd.read_csv(next((inference.root / "sweep" / "report").glob("inference_ops_*.csv")), index_col="op type")
    assert list(shares.columns) == ["prefill", "decode"] and shares.sum().round(6).eq(100).all()
    assert {"attention", "mlp"} <= set(shares.index)
    heatmaps = sorted(p.name.split("_")[2] for p in (inference.root / "sweep" / "report").glob("inference_layers_*.png"))
    assert heatmaps == ["decode", "decode", "prefill", "prefill"] and "ms per step of each layer" in markdown  # dp, tp
    assert report(uri, root / "against", "--sweep", parent_id(inference), "--baseline", parent_id(inference)) == 0
    against = pd.read_csv(root / "against" / "baseline_inference.csv").set_index(["run", "metric"])["verdict"]
    assert set(against.xs("ttft_s_p50", level="metric")) == {"within noise"}  # intervals over the 2 batches
    layers = pd.read_csv(inference.root / "sweep" / "0" / "inference_layers.csv")
    assert {"layers.0", "layers.1"} <= set(layers["layer"]) and (layers["ms_per_step"] >= 0).all()
    assert set(layers[layers["layer"] == "layers.1"]["op_type"]) >= {"attention", "mlp", "norm"}

    collectives = sweep(root, "collectives", uri, "workload=collectives", "workload.ops=[all_reduce]",
                        "workload.begin=1K", "workload.end=256K", "workload.factor=4")
    metrics = mlflow.MlflowClient(uri).get_run(parent_id(collectives)).data.metrics
    assert metrics["alpha_us/all_reduce/n2"] > 0 and metrics["beta_gbps/all_reduce/n2"] > 0
    markdown = (collectives.root / "sweep" / "report" / "report.md").read_text()
    assert "## Microbenchmarks" in markdown and "### Collectives" in markdown and "### Matmul" not in markdown


def test_alpha_beta_fit_recovers_alpha_and_beta():
    alpha, beta = 25e-6, 1 / 40e9  # 25 µs per call, 40 GB/s
    sizes = 2.0 ** np.arange(10, 31)
    noise = 1 + 0.002 * np.random.default_rng(0).standard_normal(len(sizes))
    fit = fit_alpha_beta(sizes, (alpha + beta * sizes) * noise)
    assert fit.alpha_s == pytest.approx(alpha, rel=0.01)
    assert fit.beta_s_per_byte == pytest.approx(beta, rel=0.01)
    assert fit.bandwidth_gbps == pytest.approx(40, rel=0.01) and fit.r2 > 0.99


def test_line_fit_recovers_the_slope():
    x = np.array([128.0, 512, 1024, 2048, 4096])
    line = fit_line(x, 0.02 + 3e-5 * x)
    assert line.slope == pytest.approx(3e-5, rel=1e-9) and line.intercept == pytest.approx(0.02, rel=1e-9)
    assert line.r2 == pytest.approx(1.0)
    assert fit_line([64, 64], [1.0, 2.0]) is None  # one input length: no line


def test_a_change_is_significant_only_when_the_intervals_part():
    def run(low, high):
        return pd.Series({"metrics.throughput_tokens_per_s_ci_low": low, "metrics.throughput_tokens_per_s_ci_high": high})

    assert significance(run(110, 120), run(90, 100), "throughput_tokens_per_s") == "significant"
    assert significance(run(95, 120), run(90, 100), "throughput_tokens_per_s") == "within noise"
    assert significance(run(95, 120), pd.Series(dtype=float), "throughput_tokens_per_s") == "no interval logged"


def test_the_mlflow_ui_shows_the_sweep_at_the_first_click(strong, store):
    """After a real sweep: the parent run's headline metrics and description (verdict, every point
    best first), the saved view the printed link opens, each child's own description."""
    root, uri = store
    client = mlflow.MlflowClient(uri)
    parent = client.get_run(parent_id(strong))
    finished = {r.info.run_name: r for r in client.search_runs([parent.info.experiment_id],
                                                               f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
                if r.info.status == "FINISHED"}
    best = max(r.data.metrics["throughput_tokens_per_s"] for r in finished.values())
    assert parent.data.metrics["best_throughput_tokens_per_s"] == pytest.approx(best, rel=1e-3)  # 4 digits
    assert parent.data.metrics["points_finished"] == 2 and parent.data.metrics["points_failed"] == 1
    note = parent.data.tags["mlflow.note.content"]
    assert note.startswith("**Verdict.** On 1 device: only **") and "Strong scaling against one baseline" in note
    table = note.split("```")[1].strip().splitlines()
    assert table[0].split()[:2] == ["run", "status"] and "FAILED" in table[-1]  # best first, the failed point last
    assert format_metric("throughput_tokens_per_s", best) in table[1] and "FINISHED" in table[2]
    view = client.get_experiment(parent.info.experiment_id).tags[f"mlflow.sharedViewState.sweep-{parent.info.run_id[:12]}"]
    state = json.loads(view)
    assert state["orderByKey"] == "metrics.`throughput_tokens_per_s`" and state["orderByAsc"] is False
    assert parent.info.run_id in state["searchFilter"] and "metrics.`mfu`" in state["selectedColumns"]
    assert f"#/experiments/{parent.info.experiment_id}/runs?viewStateShareKey=sweep-" in strong.stdout  # the printed link
    experiment_note = client.get_experiment(parent.info.experiment_id).tags["mlflow.note.content"]
    latest = latest_sweep(uri, [parent.info.experiment_id])  # the module's other sweeps share the store: maybe not `strong`
    assert experiment_note.startswith("**Latest sweep**") and f"viewStateShareKey=sweep-{latest[:12]}" in experiment_note
    child = next(iter(finished.values())).data.tags["mlflow.note.content"]
    assert child.startswith("**FINISHED**") and "tokens/s **" in child and "ui.perfetto.dev" in child
    names = [r.info.run_name for r in client.search_runs([parent.info.experiment_id],
                                                        f"tags.mlflow.parentRunId = '{parent.info.run_id}'")]
    assert len(set(names)) == len(names)
