"""What reaches the terminal from a job, and the watchdog's view of its progress."""

from __future__ import annotations

import time

from parbench.launch.console import Console
from parbench.launch.hang import Progress

KINETO = "USDT:2026-11-24 21:53:40 12081:12081 SyncActivityProfilerHandler.cpp:52] profiler_start"


def test_kineto_marker_is_cut_out_of_a_joined_step_line():
    console = Console()
    assert console.shown(KINETO + "[parbench] step 11/13 (profile) loss 6.2\n") == "[parbench] step 11/13 (profile) loss 6.2\n"
    assert console.shown(KINETO + "\n") is None
    assert console.shown("\n") == "\n"


def test_two_ranks_interleaved_kineto_markers_are_cut_out_whole():
    """Two ranks' markers written at once: "USDTUSDT:<first>:<second>", the second without its "USDT"."""
    other = KINETO.replace("USDT", "").replace("12081", "12082")
    assert Console().shown("USDT" + KINETO + other + "\n") is None
    assert Console().shown(other + "[parbench] step 11/13 (profile)\n") == "[parbench] step 11/13 (profile)\n"


def test_torchrun_teardown_stays_off_the_terminal():
    console = Console()
    assert console.shown("[rank0]: Traceback (most recent call last):\n") is None
    assert console.shown("[parbench] step 2/13 (warmup)\n") is not None
    failed = "E1124 21:54:50.281000 13495 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1)\n"
    assert console.shown(failed) is None
    assert console.shown("Traceback (most recent call last):\n") is None  # torchrun's ChildFailedError follows
    assert console.shown("torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n") is None


def test_watchdog_sees_a_silent_start_up(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    progress = Progress(30)
    progress.see("[parbench] rank 0 +0.1s building the model\n")
    now[0] += 29
    assert not progress.stalled()
    now[0] += 2
    assert progress.stalled() and progress.describe().startswith("no output for 30s during start-up (last line: ")
    progress.see("[parbench] step 1/4 (warmup)\n")
    assert not progress.stalled() and progress.stepping
    progress.see("noise that is not a step\n")
    now[0] += 31
    assert progress.stalled() and progress.describe() == "no new step for 30s after step 1/4"
    assert not Progress(0).stalled()
