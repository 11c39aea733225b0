"""A hung job: no new step line for a while (a watchdog on rank 0's progress), and which rank
stopped: a stopped process (SIGSTOP) from /proc, else each rank's Python stack, which the worker
dumps on SIGUSR1 (faulthandler), to tell the rank outside a collective from those waiting in one."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

from parbench.launch.processes import Worker, workers

STEP_LINE = re.compile(r"\[parbench\] step (\d+)/(\d+)")
STACK_FILE = "stacks/rank{rank}.txt"  # the worker's faulthandler target
STACK_SIGNAL = signal.SIGUSR1
FRAME = re.compile(r'File "([^"]+)", line (\d+) in (\S+)')
WAIT_FRAMES = ("torch/distributed/", "torch/nn/parallel/", "torch/autograd/", "deepspeed/comm")
ENTRY_FRAME = "parbench/worker.py"


# Before the first step line (start-up: loading, exporting, vLLM compiling and capturing graphs) the
# watchdog waits this many times launch.stall_timeout_s for any output line at all.
STARTUP_FACTOR = 3


class Progress:
    """Output seen so far. Once steps began: a stall is no new step line for limit_s, which grows with
    the slowest step (10x), never below the floor. Before the first step: no output line at all for
    STARTUP_FACTOR x the floor (start-up prints phase lines; a silent one is stuck, e.g. in a rendezvous)."""

    def __init__(self, stall_floor_s: float):
        self.floor = stall_floor_s
        self.step, self.total = 0, 0
        self.last = self.last_output = time.monotonic()
        self.slowest = 0.0

    def see(self, line: str) -> None:
        now = time.monotonic()
        self.last_output = now
        match = STEP_LINE.search(line)
        if match:
            if self.step:
                self.slowest = max(self.slowest, now - self.last)
            self.step, self.total, self.last = int(match.group(1)), int(match.group(2)), now

    @property
    def starting(self) -> bool:
        return self.step == 0

    @property
    def limit_s(self) -> float:
        return STARTUP_FACTOR * self.floor if self.starting else max(self.floor, 10 * self.slowest)

    def stalled(self) -> bool:
        """Start-up went silent for limit_s, or steps began, are not all done, and none came for
        limit_s (the summary after the last step may take long: the overall launch.timeout_s covers it)."""
        if self.floor <= 0:
            return False
        if self.starting:
            return time.monotonic() - self.last_output > self.limit_s
        return self.step < self.total and time.monotonic() - self.last > self.limit_s


def _innermost(stack_text: str) -> tuple[str, str, str] | None:
    """(path, line, function) of the innermost frame of the thread that runs the worker."""
    for block in re.split(r"\n(?=(?:Current thread|Thread) 0x)", stack_text):
        frames = FRAME.findall(block)
        if any(ENTRY_FRAME in path for path, _, _ in frames):
            return frames[0]
    return None


def dump_stacks(running: list[Worker], job_dir: Path, wait_s: float = 2.0) -> dict[int, tuple[str, str, bool]]:
    """Ask each rank for its stack; rank -> (file:line, function, waits in a collective or backward)."""
    for w in running:
        try:
            os.kill(w.pid, STACK_SIGNAL)
        except ProcessLookupError:
            pass
    time.sleep(wait_s)
    found = {}
    for w in running:
        path = job_dir / STACK_FILE.format(rank=w.rank)
        frame = _innermost(path.read_text(errors="replace")) if path.exists() else None
        if frame:
            file, line, func = frame
            found[w.rank] = (f"{Path(file).name}:{line}", func, any(p in file for p in WAIT_FRAMES))
    return found


def describe_hang(torchrun_pid: int, job_dir: Path) -> str:
    """Which rank stopped progressing, if it can be told: a stopped process, or the one rank whose
    stack is outside any collective while the others wait in one; else every rank's innermost frame."""
    ranks = workers(torchrun_pid)
    if not ranks:
        return "no worker process left to inspect"
    stopped = [w for w in ranks if w.state == "T"]
    if stopped:
        return "; ".join(f"rank {w.rank} (pid {w.pid}) is stopped (SIGSTOP or a debugger)" for w in stopped)
    stacks = dump_stacks(ranks, job_dir)
    silent = [w.rank for w in ranks if w.rank not in stacks]
    working = [r for r, (_, _, waits) in stacks.items() if not waits]
    where = "; ".join(f"rank {r} at {loc} in {func}" for r, (loc, func, _) in sorted(stacks.items()))
    if silent:
        return f"rank(s) {', '.join(map(str, silent))} did not answer a stack dump (stuck outside Python); {where}"
    if len(working) == 1 and len(stacks) > 1:
        return f"rank {working[0]} stopped progressing, the others wait in a collective: {where}"
    return where
