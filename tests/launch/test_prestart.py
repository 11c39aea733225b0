"""A prestarted torchrun (launch/prestart.py) runs the point's own command, environment and folder;
one that died is replaced by a fresh launch; one never used leaves no process behind."""

from __future__ import annotations

import os

from parbench.launch.prestart import TORCHRUN, Prestarted
from parbench.launch.processes import is_alive
from parbench.launch.torchrun import run_torchrun

ECHO = TORCHRUN + ["--standalone", "--nproc-per-node=1", "--no-python", "sh", "-c", 'echo "$MARK in $(pwd)"']


def test_a_prestarted_torchrun_runs_the_points_command_env_and_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    prestarted = Prestarted()
    prestarted.start()
    proc = prestarted.take(ECHO, {**os.environ, "MARK": "point 7"})
    out = proc.stdout.read()
    assert proc.wait(timeout=60) == 0 and f"point 7 in {tmp_path}" in out
    assert prestarted.proc is None  # taken: the next point needs another


def test_run_torchrun_takes_the_prestarted_one_and_replaces_a_dead_one(tmp_path, monkeypatch):
    import parbench.launch.torchrun as torchrun

    prestarted = Prestarted()
    monkeypatch.setattr(torchrun, "PRESTARTED", prestarted)
    env = {**os.environ, "MARK": "job"}
    prestarted.start()
    waiting = prestarted.proc
    outcome = run_torchrun(ECHO, env, tmp_path / "a.log", timeout_s=120, tail_lines=20)
    assert outcome.ok and "job in" in (tmp_path / "a.log").read_text()
    assert waiting.returncode == 0 and prestarted.proc is None  # it ran the job
    prestarted.start()
    prestarted.proc.kill()
    prestarted.proc.wait()
    outcome = run_torchrun(ECHO, env, tmp_path / "b.log", timeout_s=120, tail_lines=20)
    assert outcome.ok and "job in" in (tmp_path / "b.log").read_text()


def test_an_unused_prestarted_torchrun_is_ended():
    prestarted = Prestarted()
    prestarted.start()
    pid = prestarted.proc.pid
    prestarted.stop()
    assert not is_alive(pid) and prestarted.proc is None


def test_the_next_prestart_begins_once_the_last_step_line_is_out(tmp_path):
    """The ranks only gather and save after their last step: the next point's torchrun imports then."""
    import time

    called = []
    cmd = ["sh", "-c", 'echo "[parbench] step 1/2"; echo "[parbench] step 2/2"; sleep 3']
    outcome = run_torchrun(cmd, dict(os.environ), tmp_path / "c.log", timeout_s=60, tail_lines=20,
                           after_steps=lambda: called.append(time.monotonic()))
    ended = time.monotonic()
    assert outcome.ok and len(called) == 1 and ended - called[0] > 1.5
