"""One torchrun per job: build the command, stream its output to the terminal and a log file,
and turn a crash, a kill or a hang (timeout) into a failure with its reason."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from parbench.config.schema import Config
from parbench.launch.cluster import NodeInfo

EXCEPTION_LINE = re.compile(r"\b([A-Za-z_.]*(?:Error|Exception|Interrupt)): (.+)$")


@dataclass(frozen=True)
class LaunchOutcome:
    ok: bool
    reason: str
    returncode: int | None
    duration_s: float
    log_tail: str


def torchrun_command(cfg: Config, node: NodeInfo, job_dir: Path, nproc_per_node: int) -> list[str]:
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc_per_node}",
           "--max-restarts=0"]
    if node.standalone:
        cmd.append("--standalone")  # a free port on localhost: concurrent jobs do not collide
    else:  # static rendezvous: node 0 of the allocation is the master
        cmd += [f"--nnodes={node.count}", f"--node-rank={node.rank}", f"--master-addr={node.master_addr}",
                f"--master-port={node.master_port}"]
    return cmd + ["-m", "parbench.worker", str(job_dir)]


def worker_env(cfg: Config, nproc_per_node: int) -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if cfg.hardware.device_type == "cpu":
        # torchrun would set 1 thread per rank; share the cores out instead.
        cpus = int(os.environ.get("SLURM_CPUS_ON_NODE", os.cpu_count() or 1))  # a SLURM job: its share
        env["OMP_NUM_THREADS"] = str(max(1, cpus // nproc_per_node))
    env.update({k: str(v) for k, v in cfg.launch.env.items()})
    return env


def run_torchrun(cmd: list[str], env: dict[str, str], log_path: Path, timeout_s: float,
                 tail_lines: int) -> LaunchOutcome:
    """Run and supervise torchrun; its whole process group is killed on timeout."""
    start = time.monotonic()
    tail: deque[str] = deque(maxlen=tail_lines)
    with log_path.open("w") as log:
        log.write("$ " + " ".join(cmd) + "\n")
        log.flush()
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                bufsize=1, start_new_session=True)
        pump = threading.Thread(target=_pump, args=(proc, log, tail), daemon=True)
        pump.start()
        try:
            rc = proc.wait(timeout=timeout_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            rc, timed_out = proc.returncode, True
        pump.join(timeout=10)
    duration = time.monotonic() - start
    text = "".join(tail)
    if timed_out:
        reason = (f"timed out after {timeout_s:.0f}s (launch.timeout_s): a rank hung or the job is slower than "
                  "that; look at the log tail, or raise launch.timeout_s")
    elif rc == 0:
        reason = ""
    else:
        reason = failure_reason(text, rc)
    return LaunchOutcome(rc == 0 and not timed_out, reason, rc, duration, text)


def failure_reason(log_tail: str, returncode: int) -> str:
    """The root cause torchrun names (first failing rank), else the last exception, else the exit code."""
    root = log_tail.rfind("Root Cause")
    lines = log_tail[root:].splitlines() if root >= 0 else []
    for line in lines + list(reversed(log_tail.splitlines())):
        match = EXCEPTION_LINE.search(line)
        if match and "ChildFailedError" not in match.group(1):
            return f"{match.group(1)}: {match.group(2)}"[:500]
    if returncode < 0:
        return f"torchrun killed by signal {signal.Signals(-returncode).name}"
    return f"torchrun exited with code {returncode} (a rank failed; killed ranks may mean out of memory)"


def _pump(proc: subprocess.Popen, log, tail: deque) -> None:
    for line in proc.stdout:
        log.write(line)
        log.flush()
        tail.append(line)
        sys.stdout.write(line)
        sys.stdout.flush()


def _kill_group(proc: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 15)):
        try:
            os.killpg(proc.pid, sig)
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue
        except ProcessLookupError:
            return
