"""A hung job: no output for a while (start-up, summary) or no new step line once steps began (a
watchdog on the workers' progress), and which rank
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


class Progress:
    """Output and step lines seen so far; the stall limit grows with the slowest step (10x), never
    below the floor."""

    def __init__(self, stall_floor_s: float):
        self.floor = stall_floor_s
        self.step, self.total = 0, 0
        self.last = self.last_output = time.monotonic()
        self.last_line = ""
        self.slowest = 0.0

    def see(self, line: str) -> None:
        if line.strip():
            self.last_output, self.last_line = time.monotonic(), line.strip()
        match = STEP_LINE.search(line)
        if match:
            now = time.monotonic()
            if self.step:
                self.slowest = max(self.slowest, now - self.last)
            self.step, self.total, self.last = int(match.group(1)), int(match.group(2)), now

    @property
    def limit_s(self) -> float:
        return max(self.floor, 10 * self.slowest)

    @property
    def stepping(self) -> bool:
        return 0 < self.step < self.total

    @property
    def done(self) -> bool:
        """The last step line is out."""
        return 0 < self.total == self.step

    def stalled(self) -> bool:
        """While steps run: no new step for limit_s; before the first (model build, process group,
        compile) and after the last: no output line at all for limit_s."""
        if self.floor <= 0:
            return False
        since = self.last if self.stepping else self.last_output
        return time.monotonic() - since > self.limit_s

    def describe(self) -> str:
        """Where the stall happened, for the failure reason."""
        if self.stepping:
            return f"no new step for {self.limit_s:.0f}s after step {self.step}/{self.total}"
        phase = "after the last step" if self.step else "during start-up"
        last = f" (last line: {self.last_line[:120]!r})" if self.last_line else " (no output at all)"
        return f"no output for {self.limit_s:.0f}s {phase}{last}"


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
