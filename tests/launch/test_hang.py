"""The stall watchdog before the first step: a job that prints nothing during start-up for
STARTUP_FACTOR x launch.stall_timeout_s is hung (e.g. a rank waiting in a rendezvous nobody serves);
one that keeps printing phase lines is not."""

from __future__ import annotations

import os
import sys

from parbench.launch.hang import STARTUP_FACTOR
from parbench.launch.torchrun import run_torchrun


def supervise(tmp_path, code: str, stall_s: float):
    cmd = [sys.executable, "-c", code]
    return run_torchrun(cmd, dict(os.environ), tmp_path / "worker.log", timeout_s=60, tail_lines=20,
                        stall_timeout_s=stall_s)


def test_silent_start_up_is_hung_within_its_limit(tmp_path):
    outcome = supervise(tmp_path, "import time; print('loading', flush=True); time.sleep(60)", stall_s=1)
    assert not outcome.ok and outcome.duration_s < 20
    assert outcome.reason.startswith(f"hung: no output for {STARTUP_FACTOR}s during start-up, before the first step")


def test_start_up_that_prints_phase_lines_is_not_hung(tmp_path):
    code = "import time\nfor i in range(12):\n    print(f'phase {i}', flush=True); time.sleep(0.5)"
    outcome = supervise(tmp_path, code, stall_s=1)
    assert outcome.ok, outcome.reason
    assert outcome.duration_s > STARTUP_FACTOR  # longer than the silent limit, yet never silent for it
