"""A crashed or hung job becomes a FAILED run with its reason and log; the sweep goes on;
an invalid config is refused before anything is launched."""

from __future__ import annotations

import json

import mlflow


def test_crashed_job_is_failed_and_next_job_runs(cli):
    cli.run("debug.crash_at_step=4,-1", multirun=True)
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
    proc = cli.run("debug.hang_at_step=3", "debug.fault_rank=1", "launch.timeout_s=30", check=False)
    assert proc.returncode == 1
    run = cli.runs().iloc[0]
    assert run.status == "FAILED" and "timed out after 30s" in run["tags.failure_reason"]
    assert run["metrics.steps/loss"] > 0  # steps before the hang were logged


def test_invalid_config_exits_2_and_launches_nothing(cli):
    proc = cli.run("parallel=dp", "parallel.dp=3", check=False)
    assert proc.returncode == 2
    assert "invalid config" in proc.stderr and "multiply to 3 but the world size is 2" in proc.stderr
    assert not (cli.job_dir() / "worker.log").exists()


def test_invalid_point_in_sweep_is_recorded_and_sweep_goes_on(cli):
    cli.run("parallel=3d,dp", multirun=True)
    children = cli.runs().dropna(subset=["tags.mlflow.parentRunId"]).reset_index(drop=True)
    assert list(children.status) == ["FAILED", "FINISHED"]
    assert children.iloc[0]["tags.failure_reason"].startswith("invalid config: world size 2")


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
