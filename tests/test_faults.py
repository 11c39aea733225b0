"""Faults injected into real torchrun jobs: a rank SIGKILLed, stopped, hung or OOM-killed, and the
sweep itself interrupted or SIGKILLed. Each ends as a closed run with its reason, the sweep goes
on (or stops cleanly), and no process is left behind."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import mlflow
import pytest
from faults import assert_nothing_left, step_count, wait_for, wait_steps, worker_pid

LONG = "workload.steps=100000"  # long enough to inject a fault into; the fault ends it


def children(cli):
    runs = cli.runs()
    return runs[runs["tags.mlflow.parentRunId"].notna()].reset_index(drop=True)


@pytest.mark.slow
def test_sigkilled_rank_fails_its_run_keeps_its_steps_and_the_sweep_goes_on(cli):
    sweep = cli.start(f"{LONG},3", multirun=True)
    wait_steps(cli.job_dir(0), 4)
    os.kill(wait_for(lambda: worker_pid(cli.job_dir(0), 1), 30, "rank 1"), signal.SIGKILL)
    assert sweep.wait(timeout=600) == 0
    killed, finished = children(cli).iloc[0], children(cli).iloc[1]
    assert killed.status == "FAILED" and finished.status == "FINISHED"
    assert killed["tags.failure_reason"].startswith("rank 1 was killed by SIGKILL (exit code -9")
    logged = mlflow.MlflowClient(cli.uri).get_metric_history(killed.run_id, "steps/loss")
    assert len(logged) == step_count(cli.job_dir(0)) >= 4
    assert_nothing_left(cli.root)


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["sigstop", "hang_at_step"])
def test_hung_rank_ends_as_failed_hung_naming_the_rank(cli, fault):
    inject = ["debug.hang_at_step=6", "debug.fault_rank=1"] if fault == "hang_at_step" else []
    job = cli.start(LONG, "launch.stall_timeout_s=15", *inject)
    wait_steps(cli.job_dir(), 4)
    if fault == "sigstop":
        os.kill(wait_for(lambda: worker_pid(cli.job_dir(), 1), 30, "rank 1"), signal.SIGSTOP)
    assert job.wait(timeout=300) == 1
    run = cli.runs().iloc[0]
    reason = run["tags.failure_reason"]
    assert run.status == "FAILED" and reason.startswith("hung: no new step for 15s after step")
    if fault == "sigstop":
        assert "rank 1 (pid" in reason and "is stopped" in reason
    else:
        assert "rank 1 stopped progressing" in reason and "inject_fault" in reason
    assert run["metrics.steps/loss"] > 0
    assert_nothing_left(cli.root)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_sweep_kills_the_job_closes_its_runs_and_exits_cleanly(cli, sig):
    sweep = cli.start(f"{LONG},3", multirun=True)
    wait_steps(cli.job_dir(0), 3)
    sweep.send_signal(sig)
    assert sweep.wait(timeout=120) == 128 + sig
    assert "Traceback" not in (cli.root / "cli.err").read_text()
    runs = cli.runs()
    assert "RUNNING" not in set(runs.status) and len(runs) == 2  # the parent and the interrupted job
    child = children(cli).iloc[0]
    assert child.status == "KILLED" and child["tags.failure_reason"].startswith(f"interrupted: parbench got {sig.name}")
    assert runs[runs["tags.mlflow.parentRunId"].isna()].iloc[0].status == "KILLED"
    assert_nothing_left(cli.root)


@pytest.mark.slow
def test_sigkilled_sweep_leaves_no_process_and_the_next_sweep_fails_its_orphans(cli):
    first = cli.start(LONG, multirun=True)
    wait_steps(cli.job_dir(0), 3)
    first.kill()
    first.wait()
    assert_nothing_left(cli.root)  # torchrun dies with its parent (PR_SET_PDEATHSIG) and ends its ranks
    assert set(cli.runs().status) == {"RUNNING"}
    cli.root.joinpath("sweep").rename(cli.root / "killed_sweep")
    cli.run("workload.steps=2", multirun=True)
    runs = cli.runs()
    orphans = runs[runs["tags.failure_reason"].fillna("").str.startswith("orphaned: the sweep was killed")]
    assert len(orphans) == 2 and set(orphans.status) == {"FAILED"}
    assert "RUNNING" not in set(runs.status)


def oom_cgroup(tmp_name: str) -> Path | None:
    """A memory cgroup (v1) with a 256 MiB limit, or None where this machine has none to give."""
    root = Path("/sys/fs/cgroup/memory")
    try:
        group = root / tmp_name
        group.mkdir()
        (group / "memory.limit_in_bytes").write_text(str(256 * 2**20))
        return group
    except OSError:
        return None


@pytest.mark.slow
def test_host_oom_kill_is_classified_with_the_plan_estimate(cli):
    """A real kernel OOM-kill, confined to one rank: rank 1 joins a 256 MiB cgroup, then allocates 2 GB."""
    group = oom_cgroup(f"parbench-test-{os.getpid()}")
    if group is None:
        pytest.fail("needs a writable cgroup v1 memory controller (/sys/fs/cgroup/memory) to OOM-kill one rank")
    try:
        job = cli.start(LONG, "debug.alloc_at_step=40", "debug.alloc_gb=2", "debug.fault_rank=1")
        wait_steps(cli.job_dir(), 3)
        (group / "cgroup.procs").write_text(str(wait_for(lambda: worker_pid(cli.job_dir(), 1), 30, "rank 1")))
        assert job.wait(timeout=300) == 1
    finally:
        wait_for(lambda: not (group / "cgroup.procs").read_text().strip(), 60, "the cgroup to empty")
        group.rmdir()
    reason = cli.runs().iloc[0]["tags.failure_reason"]
    assert reason.startswith("host out of memory: rank 1 (pid") and "was OOM-killed (SIGKILL" in reason
    assert "plan estimate" in reason and "host capacity" in reason
    assert_nothing_left(cli.root)
