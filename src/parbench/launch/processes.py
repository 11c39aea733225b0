"""The process tree of one torchrun (Linux /proc): its workers, their ranks and states, and an
end that leaves nothing behind (torchrun puts each worker in its own process group)."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """preexec_fn for torchrun: SIGTERM it when the orchestrator dies, even by SIGKILL, so its
    own teardown ends the workers instead of leaving them running (Linux prctl)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM))
    except (OSError, AttributeError):
        pass


def start_supervised(cmd: list[str], env: dict[str, str], stdin: int | None = None) -> subprocess.Popen:
    """A process as torchrun is run: output (stderr included) as text lines on a pipe, in a session of
    its own (end_tree signals the group), SIGTERMed when the orchestrator dies."""
    return subprocess.Popen(cmd, env=env, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            bufsize=1, start_new_session=True, preexec_fn=die_with_parent)


@dataclass(frozen=True)
class Worker:
    pid: int
    rank: int | None
    state: str  # /proc state letter: R running, S sleeping, T stopped, Z zombie, ...


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name (field 3 onwards), None if gone."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2:].split()


def start_ticks(pid: int) -> str | None:
    """When the process started (clock ticks since boot): with the pid, it names one process for good."""
    fields = _stat_fields(pid)
    return fields[19] if fields else None


def is_alive(pid: int, started: str | None = None) -> bool:
    """The process exists (and, given its start ticks, is the same one, not a reused pid)."""
    fields = _stat_fields(pid)
    if fields is None or fields[0] in ("Z", "X"):
        return False
    return started is None or fields[19] == started


def descendants(pid: int) -> list[int]:
    """Every process below pid, found through /proc parent links."""
    children: dict[int, list[int]] = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit() and (fields := _stat_fields(int(entry.name))):
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _rank_of(pid: int) -> int | None:
    try:
        env = (PROC / str(pid) / "environ").read_bytes().split(b"\0")
    except OSError:
        return None
    ranks = [int(item[5:]) for item in env if item.startswith(b"RANK=")]
    return ranks[0] if ranks else None


def workers(torchrun_pid: int) -> list[Worker]:
    """torchrun's worker processes (those with a RANK in their environment), by rank."""
    found = []
    for pid in descendants(torchrun_pid):
        rank, fields = _rank_of(pid), _stat_fields(pid)
        if rank is not None and fields:
            found.append(Worker(pid, rank, fields[0]))
    return sorted(found, key=lambda w: w.rank)


def _signal(pid: int, sig: signal.Signals, group: bool = False) -> None:
    try:
        (os.killpg if group else os.kill)(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def end_tree(proc: subprocess.Popen, grace_s: float = 15.0) -> None:
    """SIGTERM to torchrun's group and every worker (torchrun then tears down cleanly), SIGKILL to
    whatever is left after grace_s; stopped (SIGSTOP) processes get SIGKILL too."""
    tree = descendants(proc.pid)
    _signal(proc.pid, signal.SIGTERM, group=True)
    for pid in tree:
        _signal(pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
    deadline = time.monotonic() + grace_s
    while (left := [pid for pid in {*tree, *descendants(proc.pid)} if is_alive(pid)]) and time.monotonic() < deadline:
        for pid in left:
            _signal(pid, signal.SIGKILL)
        time.sleep(0.2)
    if proc.poll() is None:
        _signal(proc.pid, signal.SIGKILL, group=True)
        proc.wait()
