"""One torchrun per job: build the command, stream its output to the terminal and a log file,
and turn a crash, a kill, a hang (timeout or stall) or an interrupt into an outcome with its reason."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from parbench.config.schema import Config
from parbench.launch.cluster import NodeInfo
from parbench.launch.console import Console
from parbench.launch.diagnose import MemoryFacts, failure_reason, oom_kill_count
from parbench.launch.hang import Progress, describe_hang
from parbench.launch.interrupt import INTERRUPTS
from parbench.launch.prestart import PRESTARTED
from parbench.launch.processes import end_tree, start_supervised


@dataclass(frozen=True)
class LaunchOutcome:
    ok: bool
    reason: str
    returncode: int | None
    duration_s: float
    log_tail: str
    interrupted: bool = False  # the orchestrator got SIGINT/SIGTERM: the run is KILLED, the sweep stops

    @property
    def status(self) -> str:
        return "FINISHED" if self.ok else "KILLED" if self.interrupted else "FAILED"


def torchrun_command(cfg: Config, node: NodeInfo, job_dir: Path, nproc_per_node: int) -> list[str]:
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc_per_node}",
           "--max-restarts=0"]
    if node.standalone:
        cmd.append("--standalone")  # a free port on localhost: concurrent jobs do not collide
    else:  # static rendezvous: node 0 of the allocation is the master
        cmd += [f"--nnodes={node.count}", f"--node-rank={node.rank}", f"--master-addr={node.master_addr}",
                f"--master-port={node.master_port}"]
    return cmd + ["-m", "parbench.worker", str(job_dir)]


def worker_env(cfg: Config) -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if cfg.hardware.device_type == "cpu":
        # A CPU "device" is one core: one intra-op thread per rank, whatever the world size. Sharing
        # the cores out gave a 1-rank run both cores, so its speedup baseline was 2 cores, and under
        # other load its 2-thread ops stalled at every barrier (150x slower decode, docs/measurement.md).
        # launch.env.OMP_NUM_THREADS overrides it.
        env["OMP_NUM_THREADS"] = "1"
    env.update({k: str(v) for k, v in cfg.launch.env.items()})
    return env


def run_torchrun(cmd: list[str], env: dict[str, str], log_path: Path, timeout_s: float, tail_lines: int,
                 stall_timeout_s: float = 0.0, memory: MemoryFacts | None = None,
                 after_steps: Callable[[], None] | None = None) -> LaunchOutcome:
    """Run and supervise torchrun: a timeout, a stall (no new step line) or SIGINT/SIGTERM to the
    orchestrator ends its whole process tree; a failure gets the reason torchrun's summary gives.
    after_steps runs once the last step line is out (the ranks only gather and save from there)."""
    start = time.monotonic()
    tail: deque[str] = deque(maxlen=tail_lines)
    if INTERRUPTS.signal:  # interrupted before this job began: launch nothing
        return LaunchOutcome(False, INTERRUPTS.reason(), None, 0.0, "", interrupted=True)
    oom_kills = oom_kill_count()
    progress = Progress(stall_timeout_s)
    with log_path.open("w") as log:
        log.write("$ " + " ".join(cmd) + "\n")
        log.flush()
        proc = PRESTARTED.take(cmd, env) or start_supervised(cmd, env)
        console = Console()
        pump = threading.Thread(target=_pump, args=(proc, log, tail, progress, console), daemon=True)
        pump.start()
        try:
            ended = _supervise(proc, timeout_s, progress, after_steps)
            if ended:  # what torchrun prints while it is ended is teardown: worker.log only
                console.silence()
            hang = describe_hang(proc.pid, log_path.parent) if ended in ("timeout", "stall") else ""
        finally:  # also when a second signal exits at once: leave no process behind
            if proc.poll() is None:
                end_tree(proc)
        pump.join(timeout=10)
    rc = proc.returncode
    if ended == "timeout":
        reason = (f"hung: timed out after {timeout_s:.0f}s (launch.timeout_s): {hang}; look at the log tail, "
                  "or raise launch.timeout_s if the job is only slow")
    elif ended == "stall":
        reason = f"hung: {progress.describe()} (launch.stall_timeout_s): {hang}"
    elif ended == "interrupt":
        reason = INTERRUPTS.reason()
    else:
        rose = oom_kills is not None and (oom_kill_count() or 0) > oom_kills
        reason = "" if rc == 0 else failure_reason(_log_end(log_path), rc, memory, rose)
    return LaunchOutcome(rc == 0 and not ended, reason, rc, time.monotonic() - start, "".join(tail),
                         interrupted=ended == "interrupt")


def _supervise(proc: subprocess.Popen, timeout_s: float, progress: Progress,
               after_steps: Callable[[], None] | None) -> str:
    """Wait for torchrun; '' when it exited by itself, else why it must be ended. after_steps runs on
    this thread: a process it starts gets the parent-death signal when its creating thread ends."""
    deadline = time.monotonic() + timeout_s if timeout_s > 0 else float("inf")  # 0: no overall limit
    while True:
        try:
            proc.wait(timeout=0.5)
            return ""
        except subprocess.TimeoutExpired:
            pass
        if after_steps is not None and progress.done:
            after_steps()
            after_steps = None
        if INTERRUPTS.signal:
            return "interrupt"
        if time.monotonic() > deadline:
            return "timeout"
        if progress.stalled():
            return "stall"


def _log_end(path: Path, size: int = 256_000) -> str:
    """The end of the log: torchrun's failure summary, which the short tail may cut."""
    with path.open("rb") as f:
        f.seek(max(0, path.stat().st_size - size))
        return f.read().decode(errors="replace")


def _pump(proc: subprocess.Popen, log, tail: deque, progress: Progress, console: Console) -> None:
    for line in proc.stdout:
        log.write(line)
        log.flush()
        tail.append(line)
        progress.see(line)
        shown = None if INTERRUPTS.signal else console.shown(line)
        if shown is not None:
            sys.stdout.write(shown)
            sys.stdout.flush()
