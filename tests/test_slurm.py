"""Sweeps on a real one-node SLURM (launch/slurm-local.sh: Debian's slurm-wlm and munge on this
machine): submitted with hydra/launcher=slurm, run, recorded in MLflow, failed, timed out, cancelled.
Run with `python -m pytest -q -m slurm`; where SLURM cannot be installed or started they fail."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, Cli

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(900)]

POINTS_CONF = Path(__file__).parent / "slurm_conf"  # +point=<one of POINTS>: tests/slurm_conf/point/*.yaml
POINTS = ("invalid", "crash", "job_error", "cancel", "timeout")


@pytest.fixture(scope="module")
def slurm_cluster() -> str:
    """The local cluster, started (or found running) by launch/slurm-local.sh; its node name."""
    proc = subprocess.run(["bash", str(REPO / "launch" / "slurm-local.sh"), "start"], capture_output=True,
                          text=True, timeout=900)
    if proc.returncode != 0:
        pytest.fail(f"could not start the local SLURM (launch/slurm-local.sh start, rc {proc.returncode}):\n"
                    f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    node = subprocess.run(["sinfo", "-h", "-N", "-o", "%N"], capture_output=True, text=True).stdout.split()
    assert node, f"sinfo lists no node:\n{proc.stdout}"
    return node[0]


def sweep_command(cli: Cli, uri: str, *overrides: str) -> list[str]:
    """hardware=cpu unless the overrides name a hardware profile."""
    hardware = [] if any(o.startswith("hardware=") for o in overrides) else ["hardware=cpu"]
    return [sys.executable, "-m", "parbench", "-m", "hydra/launcher=slurm", *hardware, f"tracking.uri={uri}",
            f"hydra.sweep.dir={cli.root / 'sweep'}", "hydra.launcher.partition=debug", *overrides]


def start_sweep(cli: Cli, uri: str, *overrides: str, path: str | None = None) -> subprocess.Popen:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", **({"PATH": path} if path else {})}
    return subprocess.Popen(sweep_command(cli, uri, *overrides), cwd=cli.root, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def finish(proc: subprocess.Popen, timeout: float, rc: int = 0) -> str:
    out, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == rc, f"the sweep exited {proc.returncode}, not {rc}:\n{out[-6000:]}"
    return out


def squeue(*args: str) -> list[list[str]]:
    out = subprocess.run(["squeue", "-h", "-r", "--states=all", *args], capture_output=True, text=True).stdout
    return [line.split("|") for line in out.splitlines()]


@pytest.fixture
def tracking_server(tmp_path: Path):
    """`mlflow server` bound to loopback, as on a login node (docs/slurm.md); its URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = (tmp_path / "mlflow-server.log").open("w")
    server = subprocess.Popen([sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
                               "--backend-store-uri", f"sqlite:///{tmp_path / 'server.db'}",
                               "--artifacts-destination", str(tmp_path / "server-artifacts"), "--workers", "1"],
                              cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2):
                break
        except OSError:
            assert server.poll() is None, (tmp_path / "mlflow-server.log").read_text()[-3000:]
            time.sleep(1)
    else:
        pytest.fail(f"mlflow server did not listen on {url} in 180 s")
    yield url
    server.terminate()
    server.wait(timeout=30)
    log.close()


def test_sweep_runs_as_slurm_jobs_into_a_tracking_server(slurm_cluster, tracking_server, cli):
    """parallel=dp,fsdp with the default hardware=auto (no GPU here: the CPU profile, 2 ranks): two SLURM
    jobs asking for a core per rank, torchrun's rendezvous from the allocation, two FINISHED children
    of one parent with metrics, in an MLflow server on loopback; re-submitted, it skips both."""
    proc = start_sweep(cli, tracking_server, "hardware=auto", "parallel=dp,fsdp", "hydra.launcher.timeout_min=10")
    cpus: dict[str, str] = {}  # job id -> the CPUs SLURM gave it, as squeue shows them while it runs
    while proc.poll() is None and len(cpus) < 2:
        cpus.update({row[0]: row[3] for row in squeue("-n", "parbench", "-o", "%i|%j|%T|%C") if row[2] == "RUNNING"})
        time.sleep(1)
    out = finish(proc, timeout=600)
    jobs = [line.split("submitted SLURM job ")[1].split()[0] for line in out.splitlines() if "submitted SLURM job" in line]
    assert len(jobs) == 2 and set(cpus) <= set(jobs), (jobs, cpus, out[-3000:])
    # Each point has its two cores to itself: two points never share them and halve each other's figures.
    assert "each job asks for --cpus-per-task=2, no GPU" in out, out[-3000:]
    assert cpus and set(cpus.values()) == {"2"}, cpus
    script = next((cli.root / "sweep" / ".submitit").glob("*/*_submission.sh")).read_text().splitlines()
    assert "#SBATCH --cpus-per-task=2" in script and not any("gpu" in line for line in script), script
    assert {row[0]: row[1] for row in squeue("-j", jobs[0].split("_")[0], "-o", "%i|%T")} == dict.fromkeys(jobs, "COMPLETED")

    import mlflow

    mlflow.set_tracking_uri(tracking_server)
    runs = mlflow.search_runs(search_all_experiments=True)
    parents, children = runs[runs["tags.mlflow.parentRunId"].isna()], runs[runs["tags.mlflow.parentRunId"].notna()]
    assert len(parents) == 1 and (children["tags.mlflow.parentRunId"] == parents.run_id.iloc[0]).all()
    assert parents.status.iloc[0] == "FINISHED"
    assert sorted(children["params.parallel.name"]) == ["dp", "fsdp"]
    assert (children.status == "FINISHED").all() and (children["metrics.throughput_tokens_per_s"] > 0).all()
    assert sorted(children["tags.slurm_job"]) == sorted(jobs)
    # The rendezvous came from the allocation (node 0's name and a port from the job id), not localhost.
    assert all(r.startswith(f"{slurm_cluster}:") for r in children["tags.rendezvous"]), children["tags.rendezvous"]
    first_line = (cli.root / "sweep" / "0" / "worker.log").read_text().splitlines()[0]
    assert f"--master-addr={slurm_cluster}" in first_line and "--standalone" not in first_line
    assert "Sweep" in out and "FINISHED" in out and "Bypassing sacct error" not in out

    # Re-submitted, the same sweep runs nothing again: each point finds its FINISHED run (config hash).
    again = finish(start_sweep(cli, tracking_server, "hardware=auto", "parallel=dp,fsdp", "hydra.launcher.timeout_min=10"),
                   timeout=600)
    assert "Reused 2 points that already had a FINISHED run" in again, again[-3000:]
    runs = mlflow.search_runs(search_all_experiments=True)
    assert len(runs[runs["tags.mlflow.parentRunId"].notna()]) == 2


def test_failures_become_runs_with_their_reason_and_the_sweep_finishes(slurm_cluster, tmp_path):
    """An invalid point, a rank's crash, the orchestrator's crash and a scancel in one sweep, a SLURM
    time limit in another (the limit is the whole sweep's): each a FAILED/KILLED run saying why,
    parents closed, summaries printed."""
    points, limit = Cli(tmp_path / "points"), Cli(tmp_path / "limit")
    for cli in (points, limit):
        cli.root.mkdir()
    common = (f"hydra.searchpath=[file://{POINTS_CONF}]", "hydra.launcher.cpus_per_task=1", "workload.steps=20")
    # invalid_points=record: the invalid point becomes a FAILED run instead of refusing the whole sweep.
    procs = [start_sweep(points, points.uri, *common, "+point=invalid,crash,job_error,cancel", "invalid_points=record",
                         "hydra.launcher.timeout_min=10"),
             start_sweep(limit, limit.uri, *common, "+point=timeout", "hydra.launcher.timeout_min=1")]
    cancelled = cancel_when_running(procs[0], points.root / "sweep" / "3")
    outs = [finish(proc, timeout=720, rc=1) for proc in procs]  # no point finished
    assert cancelled, outs[0][-4000:]
    runs = {cli: cli.runs() for cli in (points, limit)}
    children = {row["tags.choice.point"]: row for cli in (points, limit) for _, row in runs[cli].iterrows()
                if isinstance(row.get("tags.choice.point"), str)}
    assert sorted(children) == sorted(POINTS), [list(r["tags.mlflow.runName"]) for r in runs.values()]
    status = {name: (row.status, row["tags.failure_reason"]) for name, row in children.items()}
    assert status["invalid"][0] == "FAILED" and status["invalid"][1].startswith("invalid config"), status
    assert status["crash"][0] == "FAILED" and "injected crash at step 2" in status["crash"][1], status
    assert status["job_error"][0] == "FAILED", status
    assert status["job_error"][1].startswith("the job raised ValueError: maxlen must be non-negative"), status
    assert status["cancel"][0] == "KILLED" and status["cancel"][1].startswith("cancelled in SLURM"), status
    assert status["timeout"][0] == "FAILED", status
    assert status["timeout"][1].startswith("SLURM time limit reached (hydra.launcher.timeout_min=1)"), status
    for cli, out in zip((points, limit), outs):
        parent = runs[cli][runs[cli]["tags.mlflow.parentRunId"].isna()]
        assert len(parent) == 1 and parent.status.iloc[0] != "RUNNING"  # closed
        assert "Sweep" in out and "Summary CSV" in out and "Traceback" not in out, out[-4000:]
    # The parents say what SLURM did to the sweep: no point finished, the jobs it stopped named; the
    # SIGTERM a stopped job got is that job's, not the sweep's.
    parents = {cli: runs[cli][runs[cli]["tags.mlflow.parentRunId"].isna()].iloc[0] for cli in (points, limit)}
    assert parents[points].status == "FAILED" and parents[limit].status == "FAILED", parents
    assert parents[points]["tags.slurm.cancelled"] == children["cancel"]["tags.slurm_job"], parents[points]
    assert parents[limit]["tags.slurm.timeout"] == children["timeout"]["tags.slurm_job"], parents[limit]
    assert not any(str(p.get("tags.failure_reason")).startswith("interrupted") for p in parents.values()), parents


def test_ctrl_c_cancels_the_sweeps_jobs_and_closes_its_parent_killed(slurm_cluster, cli):
    """SIGINT to the sweep while one point hangs and the other waits for the cores: both jobs are
    cancelled at once (not waited for), both runs KILLED saying so, the parent KILLED, exit 130."""
    proc = start_sweep(cli, cli.uri, f"hydra.searchpath=[file://{POINTS_CONF}]", "+point=cancel,timeout",
                       "hydra.launcher.timeout_min=10")
    assert wait_for_hang(proc, cli.root / "sweep" / "0"), proc.communicate()[0][-4000:]
    proc.send_signal(signal.SIGINT)
    out = finish(proc, timeout=180, rc=130)
    assert "SIGINT: cancelling the sweep's SLURM jobs (scancel" in out and "Traceback" not in out, out[-4000:]
    runs = cli.runs()
    parent, children = runs[runs["tags.mlflow.parentRunId"].isna()], runs[runs["tags.mlflow.parentRunId"].notna()]
    assert parent.status.iloc[0] == "KILLED", parent.T
    assert parent["tags.failure_reason"].iloc[0].startswith("interrupted: parbench got SIGINT"), parent.T
    assert len(children) == 2 and (children.status == "KILLED").all(), children.T
    assert children["tags.failure_reason"].str.startswith("the sweep got SIGINT: parbench cancelled").all(), children.T
    assert sorted(parent["tags.slurm.cancelled"].iloc[0].split(",")) == sorted(children["tags.slurm_job"])


def wait_for_hang(proc: subprocess.Popen, job_dir: Path) -> bool:
    """True once the point's rank hangs (its worker.log says so) while the sweep still runs."""
    deadline = time.monotonic() + 400
    while proc.poll() is None and time.monotonic() < deadline:
        log = job_dir / "worker.log"
        if log.exists() and "hangs at step" in log.read_text():
            return True
        time.sleep(1)
    return False


def test_refused_submission_is_one_line_a_failed_parent_and_a_nonzero_exit(slurm_cluster, cli):
    """A GPU request the local cluster has no gres for: sbatch refuses it; parbench says so in one line
    (no Hydra/submitit traceback), closes the sweep's parent FAILED with that reason, exits 2, and
    `parbench report` does not take the empty sweep for the latest one."""
    out = finish(start_sweep(cli, cli.uri, "parallel=dp,fsdp", "hydra.launcher.gpus_per_node=1"), timeout=120, rc=2)
    said = [line for line in out.splitlines() if line.startswith("parbench:")]
    assert len(said) == 1 and "Traceback" not in out and "submitted SLURM job" not in out, out[-3000:]
    assert said[0].startswith("parbench: SLURM refused the sweep's jobs: sbatch: error: Invalid generic resource "
                              "(gres) specification: the jobs ask for GPUs"), said
    parent = only_parent(cli)
    assert parent.status == "FAILED" and parent["tags.failure_reason"] == said[0][len("parbench: "):], parent

    from parbench.report.runs import ReportError, latest_sweep

    with pytest.raises(ReportError, match="no sweep"):
        latest_sweep(cli.uri, [parent.experiment_id])


def test_missing_sbatch_is_one_line_and_a_failed_parent(cli):
    """No SLURM commands on PATH: refused before anything is submitted, in one line naming them."""
    out = finish(start_sweep(cli, cli.uri, "parallel=dp", path=str(Path(sys.executable).parent)), timeout=120, rc=2)
    said = [line for line in out.splitlines() if line.startswith("parbench:")]
    assert len(said) == 1 and "Traceback" not in out, out[-3000:]
    assert said[0].startswith("parbench: hydra/launcher=slurm needs SLURM's commands, and sbatch, srun"), said
    parent = only_parent(cli)
    assert parent.status == "FAILED" and parent["tags.failure_reason"].startswith("hydra/launcher=slurm needs"), parent


def only_parent(cli: Cli):
    """The sweep's parent run, the only run in the store."""
    runs = cli.runs()
    assert len(runs) == 1, runs
    return runs.iloc[0]


def cancel_when_running(proc: subprocess.Popen, job_dir: Path) -> bool:
    """scancel the point's job once its workers are running; True when it was cancelled."""
    if not wait_for_hang(proc, job_dir):
        return False
    # submitit keeps each job's files in .submitit/<array>_<task>; the task is the job number
    job = next(job_dir.parent.glob(f".submitit/*_{job_dir.name}")).name
    subprocess.run(["scancel", job], check=True)
    return True
