"""The default experiment and a dp,fsdp sweep, end to end through torchrun and MLflow."""

from __future__ import annotations

import pytest


def test_default_run_logs_metrics_params_tags_artifacts(cli):
    proc = cli.run()
    assert "FINISHED" in proc.stdout and "mlflow ui --backend-store-uri" in proc.stdout
    runs = cli.runs()
    assert len(runs) == 1
    run = runs.iloc[0]
    assert run.status == "FINISHED"
    assert run["metrics.throughput_tokens_per_s"] > 0
    assert 0 < run["metrics.mfu"] < 1 and run["metrics.mfu_nocausal"] > run["metrics.mfu"]
    assert run["metrics.mem_peak_allocated_gb"] > 0
    assert run["params.parallel.name"] == "dp" and run["params.hardware.gpus_per_node"] == "2"
    assert run["tags.choice.model"] == "tiny" and run["tags.device_count"] == "2"
    assert run["tags.git_sha"] and run["tags.torch_version"]
    import mlflow

    client = mlflow.MlflowClient(cli.uri)
    artifacts = {a.path for a in client.list_artifacts(run.run_id)}
    assert {"resolved.yaml", "worker.log", "results.json", "steps.jsonl"} <= artifacts
    history = client.get_metric_history(run.run_id, "steps/loss")
    assert len(history) == 13  # 2 warm-up + 8 measured steps + the profiler's 3, one point each
    assert run["metrics.step_time_s_count"] == 8  # the profiled steps come after, and stay out
    # No profile override: the communication share is there by default; rank 0 keeps its trace.
    assert_comm_metrics(run, ("all_reduce",))
    assert {a.path for a in client.list_artifacts(run.run_id, "profile")} >= {"profile/trace_rank0.json.gz"}
    assert run["tags.profile_trace_ranks"].startswith("0 (")
    # CPU: its own use and peak RSS, never an energy; the machine's series as MLflow system metrics.
    assert 0 < run["metrics.cpu_util_pct"] and run["metrics.mem_peak_host_gb"] > 0
    assert "metrics.energy_j" not in runs and run["tags.energy"].startswith("n/a")
    assert len(client.get_metric_history(run.run_id, "system/cpu_utilization_percentage")) >= 1


def assert_comm_metrics(run, collectives: tuple[str, ...]) -> None:
    """A profiled run's communication share: a fraction of the step, exposed no more than all of
    it, and each collective the layout runs."""
    assert 0 < run["metrics.comm_pct"] < 100
    assert 0 <= run["metrics.exposed_comm_pct"] <= run["metrics.comm_pct"] + 1e-9
    assert 0 <= run["metrics.overlap_pct"] <= 100
    for collective in collectives:
        assert run[f"metrics.comm_pct_{collective}"] > 0, collective


def test_sweep_has_parent_and_one_child_per_job(dp_fsdp_sweep):
    cli = dp_fsdp_sweep  # parallel=dp,fsdp on the tiny model, profiled (conftest's DP_FSDP)
    runs = cli.runs()
    parents = runs[runs["tags.parbench.sweep"] == "true"]
    children = runs[runs["tags.mlflow.parentRunId"].notna()]
    assert len(parents) == 1 and len(children) == 2
    assert set(children["tags.mlflow.parentRunId"]) == {parents.iloc[0].run_id}
    assert set(children["params.parallel.name"]) == {"dp", "fsdp"}
    assert (children.status == "FINISHED").all()
    assert (cli.root / "sweep" / "summary.csv").exists()
    by_layout = children.set_index("params.parallel.name")
    assert_comm_metrics(by_layout.loc["dp"], ("all_reduce",))  # DDP's gradient buckets
    # FSDP's parameter all-gathers; gloo runs its reduce-scatter as an all_reduce.
    assert_comm_metrics(by_layout.loc["fsdp"], ("all_gather", "all_reduce"))
    # Same seed, same global batch: DDP and FSDP train identically.
    assert cli.losses(0) == pytest.approx(cli.losses(1), rel=1e-5)


def test_a_mistyped_subcommand_names_the_subcommands_instead_of_a_hydra_traceback():
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "parbench", "predict", "--help"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "no subcommand 'predict'" in proc.stderr and "report, plan, calibrate, sync" in proc.stderr


@pytest.mark.parametrize("word", ["report", "-m", "model=tiny", "+x=1", "~workload.profile"])
def test_subcommands_options_and_overrides_are_not_mistaken_for_a_subcommand(word):
    from parbench.__main__ import unknown_subcommand

    assert unknown_subcommand(word) is None
