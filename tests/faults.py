"""Helpers of the fault-injection tests: find a job's worker processes, wait for its steps, and
check that nothing it started is left running."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable

PROC = Path("/proc")


def wait_for(predicate: Callable[[], object], timeout: float, what: str) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def processes_mentioning(text: str) -> list[int]:
    """Live processes (not zombies) whose command line contains text, other than this one."""
    found = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def worker_pid(job_dir: Path, rank: int) -> int | None:
    """The pid of the worker of that rank in that job dir."""
    for pid in processes_mentioning(f"parbench.worker {job_dir}"):
        try:
            env = (PROC / str(pid) / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"RANK={rank}".encode() in env:
            return pid
    return None


def step_count(job_dir: Path) -> int:
    path = job_dir / "steps.jsonl"
    return len(path.read_text().splitlines()) if path.exists() else 0


def wait_steps(job_dir: Path, n: int, timeout: float = 300) -> None:
    wait_for(lambda: step_count(job_dir) >= n, timeout, f"{n} steps in {job_dir}")


def assert_nothing_left(root: Path, timeout: float = 60) -> None:
    """No process started for this test (its temp dir is in every command line) is still running."""
    try:
        wait_for(lambda: not processes_mentioning(str(root)), timeout, "the job's processes to end")
    except AssertionError:
        raise AssertionError(f"processes left behind: {processes_mentioning(str(root))}") from None
