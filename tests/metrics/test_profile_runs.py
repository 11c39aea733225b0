"""Profiling real 2-rank CPU runs (gloo) through the CLI with every option on: traces of all
ranks, comm metrics, tables, plots and MLflow artifacts; and the config checks of the profile
window. (The default window is checked in test_end_to_end.)"""

from __future__ import annotations

import mlflow
import pandas as pd
import pytest

from parbench.report import __main__ as report

PROFILED = ("profile.active_steps=3", "profile.keep_traces=all", "profile.plots=true", "profile.memory_timeline=true",
            "workload.warmup_steps=1", "workload.steps=7", "workload.seq_len=32")


@pytest.mark.slow
def test_profiled_dp_and_fsdp_report_the_collectives_they_run(cli):
    cli.run("parallel=dp,fsdp", *PROFILED, multirun=True)
    runs = cli.runs()
    children = runs[runs["tags.mlflow.parentRunId"].notna()].set_index("params.parallel.name")
    assert (children.status == "FINISHED").all()
    for name in ("dp", "fsdp"):
        run = children.loc[name]
        assert 0 < run["metrics.comm_pct"] < 100 and 0 <= run["metrics.exposed_comm_pct"] <= run["metrics.comm_pct"]
        assert run["metrics.comm_pct_max"] >= run["metrics.comm_pct"]
        assert 0 <= run["metrics.overlap_pct"] <= 100 and run["metrics.profile_overhead_ratio"] > 0
        # 7 measured steps, then 1 profiler warm-up + 3 traced: the 7 make step_time_s.
        assert run["metrics.step_time_s_count"] == 7 and run["metrics.profile_added_s"] > 0
        total = sum(run[f"metrics.{k}_pct"] for k in ("compute", "exposed_comm", "memcpy", "idle"))
        assert total == pytest.approx(100, abs=1e-6)
        artifacts = {a.path for a in mlflow.MlflowClient(cli.uri).list_artifacts(run.run_id, "profile")}
        expected = {"trace_rank0.json.gz", "trace_rank1.json.gz", "steps.csv", "ops.csv", "layers.csv",
                    "collectives.csv", "ranks.csv", "step_breakdown.png", "op_share.png", "layer_heatmap.png"}
        assert {f"profile/{f}" for f in expected} <= artifacts
        assert run["tags.memory_timeline"].startswith("skipped")  # CUDA allocator only
    dp, fsdp = children.loc["dp"], children.loc["fsdp"]
    assert dp["metrics.comm_pct_all_reduce"] > 0  # DDP's gradient buckets
    assert pd.isna(dp.get("metrics.comm_pct_all_gather"))
    assert fsdp["metrics.comm_pct_all_gather"] > 0  # parameter all-gathers
    # gloo runs FSDP's reduce_scatter as an all_reduce, and that is what the trace shows.
    assert fsdp["metrics.comm_pct_all_reduce"] > 0 or fsdp["metrics.comm_pct_reduce_scatter"] > 0
    num = list(children.index).index("fsdp")
    ops = pd.read_csv(cli.job_dir(num) / "profile" / "ops.csv")
    assert {"forward", "backward", "optimizer"} <= set(ops["phase"])
    assert {"layers.0", "layers.1", "output"} <= set(ops["layer"])
    collectives = pd.read_csv(cli.job_dir(num) / "profile" / "collectives.csv")
    assert (collectives[collectives["collective"] == "all_gather"]["bytes"] > 0).all()

    assert report.main(["--uri", cli.uri, "--out", str(cli.root / "report")]) == 0
    table = pd.read_csv(cli.root / "report" / "training.csv")
    assert len(table) == 2 and table["vs_fastest"].iloc[0] in {"fastest", "tied for fastest"}  # both on 2 ranks
    assert (table["step_time_s_ci_low"] <= table["step_time_s"]).all()
    assert (cli.root / "report" / "training_breakdown.png").stat().st_size > 0
    assert (cli.root / "report" / "training_layers.png").stat().st_size > 0  # from the runs' profile/layers.csv


def test_profile_window_needs_a_traced_step(cli):
    proc = cli.run("profile.active_steps=0", check=False)
    assert proc.returncode == 2
    assert "profile.active_steps=0 >= 1 (or set profile.enabled=false)" in proc.stderr


def test_unknown_ci_method_is_rejected(cli):
    proc = cli.run("stats.ci_method=jackknife", check=False)
    assert proc.returncode == 2 and "stats.ci_method" in proc.stderr
