"""The tracking side of sweeps that survive: resume by config hash, four concurrent jobs on one
SQLite store, a tracking server killed mid-sweep (then `parbench sync`), an unreachable tracking
URI that fails fast, and secrets from the environment kept out of the store."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import mlflow
import pytest
from faults import assert_nothing_left, wait_for

from parbench.tracking.reach import TrackingUnreachable, check_reachable

SHORT = "workload.steps=2"


def children(runs):
    return runs[runs["tags.mlflow.parentRunId"].notna()].reset_index(drop=True)


@pytest.mark.slow
def test_rerun_sweep_skips_finished_points_and_resume_false_reruns(cli):
    assert cli.run(SHORT, "debug.crash_at_step=1,-1", multirun=True, check=False).returncode == 1
    again = cli.run(SHORT, "debug.crash_at_step=1,-1", "launch.timeout_s=600", multirun=True,  # not in the hash
                    check=False)
    assert again.returncode == 1 and "skipped, run" in again.stdout and "Reused 1 point " in again.stdout
    runs = children(cli.runs())
    assert list(runs.status) == ["FAILED", "FINISHED", "FAILED"]  # only the failed point ran again
    assert runs["tags.config_hash"].nunique() == 2
    cli.run(SHORT, "debug.crash_at_step=-1", "resume=false", multirun=True)
    assert list(children(cli.runs()).status) == ["FAILED", "FINISHED", "FAILED", "FINISHED"]


@pytest.mark.slow
def test_four_concurrent_jobs_on_one_sqlite_store_lose_nothing(cli):
    # cli.command's last item is its sweep dir: each sweep gets its own
    commands = [[*cli.command(multirun=True)[:-1], f"hydra.sweep.dir={cli.root / f'sweep{i}'}", SHORT, f"seed={i}"]
                for i in range(4)]
    sweeps = [subprocess.Popen(cmd, cwd=cli.root, env=cli.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True) for cmd in commands]
    outputs = [p.communicate(timeout=900)[0] for p in sweeps]
    assert [p.returncode for p in sweeps] == [0] * 4, outputs
    assert not any("database is locked" in out for out in outputs)
    runs = cli.runs()
    assert len(runs) == 8 and set(runs.status) == {"FINISHED"}  # 4 parents, 4 jobs
    client = mlflow.MlflowClient(cli.uri)
    for _, run in children(runs).iterrows():  # every step each job wrote reached its run
        written = (Path(run["tags.job_dir"]) / "steps.jsonl").read_text().splitlines()
        assert len(client.get_metric_history(run.run_id, "steps/loss")) == len(written) >= 4


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(root: Path, port: int) -> subprocess.Popen:
    """A real `mlflow server` on 127.0.0.1 only, its store and artifacts in root."""
    proc = subprocess.Popen([sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
                             "--backend-store-uri", f"sqlite:///{root / 'server.db'}", "--artifacts-destination",
                             str(root / "server-artifacts"), "--workers", "1"], cwd=root, start_new_session=True,
                            stdout=(root / "server.log").open("a"), stderr=subprocess.STDOUT)

    def healthy() -> bool:
        try:
            return urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).status == 200
        except OSError:
            return False
    wait_for(healthy, 180, "mlflow server")
    return proc


def stop_server(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


@pytest.mark.slow
def test_tracking_server_killed_mid_sweep_loses_nothing(cli):
    port = free_port()
    uri = f"http://127.0.0.1:{port}"
    server = start_server(cli.root, port)
    sweep = subprocess.Popen(cli.command("workload.steps=2,3", multirun=True) + [f"tracking.uri={uri}"],
                             cwd=cli.root, env=cli.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    record = cli.job_dir(0) / "tracking.json"
    wait_for(lambda: record.exists() and json.loads(record.read_text())["synced"], 600, "job 0 to reach the server")
    stop_server(server)
    out = sweep.communicate(timeout=600)[0]
    assert sweep.returncode == 0, out  # logging failed, the sweep did not
    assert "tracking failed" in out and f"parbench sync {cli.job_dir(1)}" in out
    assert (cli.job_dir(1) / "results.json").exists()
    server = start_server(cli.root, port)
    try:
        sync = subprocess.run(["parbench", "sync", str(cli.root / "sweep")], cwd=cli.root, capture_output=True,
                              text=True, timeout=300)
        assert sync.returncode == 0, sync.stdout + sync.stderr
        mlflow.set_tracking_uri(uri)
        runs = mlflow.search_runs(search_all_experiments=True)
        assert set(runs.status) == {"FINISHED"} and len(runs) == 3, runs[["tags.mlflow.runName", "status"]]  # the parent, closed by sync, and both jobs
        assert sorted(children(runs)["params.workload.steps"]) == ["2", "3"]
        assert all(children(runs)["metrics.throughput_tokens_per_s"] > 0)
    finally:
        stop_server(server)
    assert_nothing_left(cli.root)


@pytest.mark.parametrize("uri, words", [
    ("ftp://example/x", "MLflow has no store for ftp:// URIs"),
    ("sqlite:////proc/parbench/x.db", "cannot make its folder /proc/parbench"),
])
def test_tracking_uri_parbench_cannot_write_to_is_refused_before_anything_runs(cli, uri, words):
    for multirun in (False, True):
        proc = cli.run(f"tracking.uri={uri}", multirun=multirun, check=False, timeout=60)
        assert proc.returncode == 2 and words in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
        assert "sqlite:///path/to/mlflow.db" in proc.stderr or "a path you can write to" in proc.stderr
        assert not (cli.job_dir(0 if multirun else None) / "worker.log").exists()


def port_open(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def test_http_port_that_is_not_mlflow_is_refused(cli):
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
                              cwd=cli.root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: port_open(port), 30, "http.server")
        with pytest.raises(TrackingUnreachable, match="not as an MLflow tracking server .*HTTP 404"):
            check_reachable(f"http://127.0.0.1:{port}")
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_unreachable_tracking_uri_fails_fast_and_says_what_to_do(cli):
    start = time.monotonic()
    with pytest.raises(TrackingUnreachable):
        check_reachable("http://127.0.0.1:1")
    assert time.monotonic() - start < 5  # MLflow's own client retries for minutes
    proc = cli.run("tracking.uri=http://127.0.0.1:1", multirun=True, check=False, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "tracking.uri=http://127.0.0.1:1 is not reachable" in proc.stderr
    assert "mlflow server --host 127.0.0.1" in proc.stderr and "default SQLite store" in proc.stderr
    assert not (cli.job_dir(0) / "worker.log").exists()


def test_secrets_in_the_environment_never_reach_the_store(cli, monkeypatch):
    secrets = {"HF_TOKEN": "hf_fakeTOKEN4parbenchTest", "AWS_SECRET_ACCESS_KEY": "fakeAWSsecret/parbench+Test"}
    monkeypatch.setenv("HF_TOKEN", secrets["HF_TOKEN"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secrets["AWS_SECRET_ACCESS_KEY"])
    # launch.env is logged with the config: an interpolated secret is the easy way to leak one.
    cli.run("workload.steps=1", "workload.warmup_steps=0", "+launch.env.HF_TOKEN=${oc.env:HF_TOKEN}",
            "+launch.env.NOTE=${oc.env:AWS_SECRET_ACCESS_KEY}")
    run = cli.runs().iloc[0]
    assert run.status == "FINISHED" and run["params.launch.env.HF_TOKEN"] == "***"
    stored = [cli.root / "mlflow.db", *(p for p in (cli.root / "mlartifacts").rglob("*") if p.is_file())]
    assert len(stored) > 5  # the database and the artifacts (log, results, resolved config, ...)
    for path in stored:
        data = path.read_bytes()
        for name, value in secrets.items():
            assert value.encode() not in data, f"{name} found in {path}"
