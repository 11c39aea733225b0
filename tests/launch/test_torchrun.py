"""A crashed or hung job becomes a FAILED run with its reason and log; the sweep goes on;
an invalid config is refused before anything is launched."""

from __future__ import annotations

import json
import subprocess
import sys

import mlflow
import pandas as pd
import pytest


def test_crashed_job_is_failed_and_next_job_runs(cli):
    # Unprofiled: the profiler's window, after the crash's step, would only lengthen the finished point.
    proc = cli.run("debug.crash_at_step=4,-1", "profile.enabled=false", multirun=True, check=False)
    # Non-zero after the summary; torchrun's teardown stays in worker.log.
    assert proc.returncode == 1 and "Sweep " in proc.stdout and "1 point of the sweep did not finish" in proc.stderr
    assert "ChildFailedError" not in proc.stdout + proc.stderr and "[rank0]:" not in proc.stdout
    assert "ChildFailedError" in (cli.job_dir(0) / "worker.log").read_text()
    runs = cli.runs()
    children = runs[runs["tags.mlflow.parentRunId"].notna()].reset_index(drop=True)
    assert list(children.status) == ["FAILED", "FINISHED"]
    crashed = children.iloc[0]
    assert "injected crash at step 4" in crashed["tags.failure_reason"]
    assert "Traceback" in crashed["tags.log_tail"] or "RuntimeError" in crashed["tags.log_tail"]
    # The steps measured before the crash are kept.
    history = mlflow.MlflowClient(cli.uri).get_metric_history(crashed.run_id, "steps/loss")
    assert [m.step for m in history] == [0, 1, 2, 3]
    artifacts = {a.path for a in mlflow.MlflowClient(cli.uri).list_artifacts(crashed.run_id)}
    assert "worker.log" in artifacts


def test_hung_rank_times_out_as_failed(cli):
    # launch.timeout_s counts from torchrun's start: 14 s leaves the steps before the hang (~5 s in on
    # 2 cores) room under load; every second more is one the test waits out.
    proc = cli.run("debug.hang_at_step=3", "debug.fault_rank=1", "launch.timeout_s=14", check=False)
    assert proc.returncode == 1
    run = cli.runs().iloc[0]
    assert run.status == "FAILED" and "timed out after 14s" in run["tags.failure_reason"]
    assert run["metrics.steps/loss"] > 0  # steps before the hang were logged


def test_invalid_config_exits_2_and_launches_nothing(cli):
    proc = cli.run("parallel=dp", "parallel.dp=3", check=False)
    assert proc.returncode == 2
    assert "invalid config" in proc.stderr and "multiply to 3 but the world size is 2" in proc.stderr
    assert not (cli.job_dir() / "worker.log").exists()


def test_invalid_point_refuses_the_whole_sweep_before_anything_runs(cli):
    proc = cli.run("parallel=3d,dp", multirun=True, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "invalid config (parallel=3d): world size 2" in proc.stderr and "invalid_points=record" in proc.stderr
    assert not list(cli.root.glob("sweep/*/worker.log")) and not (cli.root / "mlflow.db").exists()


@pytest.mark.slow  # in the fast set: test_report.py's strong sweep, whose first point is invalid and recorded
def test_invalid_point_in_sweep_is_recorded_and_sweep_goes_on(cli):
    assert cli.run("parallel=3d,dp", "invalid_points=record", multirun=True, check=False).returncode == 1
    children = cli.runs().dropna(subset=["tags.mlflow.parentRunId"]).reset_index(drop=True)
    assert list(children.status) == ["FAILED", "FINISHED"]
    assert children.iloc[0]["tags.failure_reason"].startswith("invalid config: world size 2")


def test_model_too_big_for_the_host_is_refused_before_launch(cli):
    """The command parbench exists for, on a CPU machine: the 7B model cannot fit 2 ranks on this host."""
    proc = cli.run("parallel=tp,pp", "model=llama2_7b", multirun=True, check=False, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    for layout in ("tp", "pp"):
        assert f"invalid config (parallel={layout}): does not fit: needs" in proc.stderr
    assert "CPU ranks share this host's" in proc.stderr and "dry_run=true hardware=h100_sxm" in proc.stderr
    assert not list(cli.root.glob("sweep/*/worker.log")) and not (cli.root / "mlflow.db").exists()


def test_hang_during_start_up_is_caught_by_the_stall_watchdog(cli):
    # Rank 1 hangs before its first step; the ranks' first lines come 2-5 s after torchrun starts here,
    # so 6 s without output is the hang (10 s was 4 s more waited out).
    proc = cli.run("debug.hang_at_step=0", "debug.fault_rank=1", "launch.stall_timeout_s=6", check=False)
    assert proc.returncode == 1
    run = cli.runs().iloc[0]
    assert run.status == "FAILED" and run["tags.failure_reason"].startswith("hung: no output for 6s during start-up")


def test_resumed_sweep_lists_the_points_it_reused(cli):
    # One point, one launch (~10 s on 2 cores): a reused point is listed as each one is.
    overrides = ("seed=1", "workload.steps=2", "profile.enabled=false")
    first = cli.run(*overrides, multirun=True)
    again = cli.run(*overrides, multirun=True)
    assert "1 point, 1 reused from earlier runs" in again.stdout and "(no runs)" not in again.stdout
    table = pd.read_csv(cli.root / "sweep" / "summary.csv", dtype={"reused": str})  # an id prefix may be all digits
    runs = cli.runs()
    first_ids = list(runs[runs["tags.mlflow.parentRunId"].notna()].run_id)
    assert list(table.status) == ["FINISHED"] and [r[:8] for r in first_ids] == list(table.reused)
    parents = runs[runs["tags.parbench.sweep"] == "true"]
    latest = parents.iloc[-1]
    assert latest.status == "FINISHED" and latest["tags.parbench.reused_runs"] == ",".join(first_ids)
    from parbench.report.runs import select_runs

    assert sorted(select_runs(cli.uri).runs.run_id) == sorted(first_ids)  # the report covers them
    assert first.returncode == again.returncode == 0


def test_two_sweeps_started_together_keep_their_own_folders(cli):
    command = [sys.executable, "-m", "parbench", "-m", "hardware=cpu", f"tracking.uri={cli.uri}", "seed=1",
               "workload.steps=2", "profile.enabled=false"]
    procs = [subprocess.Popen(command, cwd=cli.root, env=cli.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True) for _ in range(2)]
    outputs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    sweeps = sorted(p.parent for p in cli.root.glob("outputs/multirun/*/*/summary.csv"))
    assert len(sweeps) == 2, sweeps
    runs = cli.runs()
    parents = runs[runs["tags.parbench.sweep"] == "true"]
    assert list(parents.status) == ["FINISHED", "FINISHED"]
    for parent in parents.run_id:
        steps = runs[runs["tags.mlflow.parentRunId"] == parent]["metrics.steps/loss"]
        assert len(steps) == 1
    for sweep in sweeps:
        assert len((sweep / "0" / "steps.jsonl").read_text().splitlines()) == 2 + 2  # warm-up + measured, no mixing


def test_dry_run_prints_plan_and_launches_nothing(cli):
    proc = cli.run("dry_run=true", "model=llama2_7b", "hardware=h100_sxm", "hardware.gpus_per_node=8",
                   "parallel=fsdp")
    plan = json.loads(proc.stdout[proc.stdout.index("{"):])
    assert plan["world_size"] == 8 and plan["mesh"]["fsdp"] == 8
    assert abs(plan["params_total"] / 1e9 - 6.74) < 0.01
    assert plan["flops_per_token_nocausal"] > plan["flops_per_token"]
    assert plan["memory_estimate_per_device_gb"]["total_gb"] > 0
    assert not (cli.root / "mlflow.db").exists()
    assert not (cli.job_dir() / "worker.log").exists()
