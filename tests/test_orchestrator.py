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

    artifacts = {a.path for a in mlflow.MlflowClient(cli.uri).list_artifacts(run.run_id)}
    assert {"resolved.yaml", "worker.log", "results.json", "steps.jsonl"} <= artifacts
    history = mlflow.MlflowClient(cli.uri).get_metric_history(run.run_id, "steps/loss")
    assert len(history) == 10  # 2 warm-up + 8 measured steps, one point each


def test_sweep_has_parent_and_one_child_per_job(cli):
    cli.run("parallel=dp,fsdp", "model=tiny", multirun=True)
    runs = cli.runs()
    parents = runs[runs["tags.parbench.sweep"] == "true"]
    children = runs[runs["tags.mlflow.parentRunId"].notna()]
    assert len(parents) == 1 and len(children) == 2
    assert set(children["tags.mlflow.parentRunId"]) == {parents.iloc[0].run_id}
    assert set(children["params.parallel.name"]) == {"dp", "fsdp"}
    assert (children.status == "FINISHED").all()
    assert (cli.root / "sweep" / "summary.csv").exists()
    # Same seed, same global batch: DDP and FSDP train identically.
    assert cli.losses(0) == pytest.approx(cli.losses(1), rel=1e-5)
