"""Why a torchrun job failed, in one line: the rank, the signal or the @record error file's message
from torchrun's failure summary, classified as out of memory where the evidence says so."""

from __future__ import annotations

import re
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from parbench.config.host import host_memory
from parbench.config.schema import Config

EXCEPTION_LINE = re.compile(r"\b([A-Za-z_.]*(?:Error|Exception|Interrupt)): (.+)$")
ENTRY = re.compile(r"^\[\d+\]:\s*$", re.M)
FIELD = re.compile(r"^\s*(time|host|rank|exitcode|error_file|traceback)\s*:\s?(.*)$")
CUDA_OOM = ("CUDA out of memory", "OutOfMemoryError")
HOST_ALLOC = ("can't allocate memory", "std::bad_alloc", "MemoryError")
# What the surviving ranks of gloo/NCCL say when a peer dies: a consequence, never the cause.
PEER_NOISE = ("Connection reset by peer", "Connection closed by peer", "Broken pipe", "NCCL communicator was aborted")
OOM_KILL_LOG = re.compile(r"Killed process (\d+)")


@dataclass(frozen=True)
class RankFailure:
    """One entry of torchrun's failure summary."""

    rank: int
    exitcode: int
    pid: int | None
    message: str  # last line of the error file's traceback, or torchrun's "Signal 9 (SIGKILL) ..."

    @property
    def signal(self) -> str | None:
        if self.exitcode >= 0:
            return None
        try:
            return signal.Signals(-self.exitcode).name
        except ValueError:
            return f"signal {-self.exitcode}"


@dataclass(frozen=True)
class MemoryFacts:
    """The plan's memory estimate beside what the device (or host, on CPU) has, for OOM reasons."""

    estimate_gb: float | None
    capacity_gb: float | None
    where: str  # "device" | "host"

    def note(self) -> str:
        est = f"{self.estimate_gb:,.2f} GB" if self.estimate_gb is not None else "unknown"
        cap = f"{self.capacity_gb:,.1f} GB" if self.capacity_gb is not None else "unknown"
        return f"plan estimate {est} per device, {self.where} capacity {cap}"


def memory_facts(cfg: Config, plan: dict) -> MemoryFacts:
    estimate = (plan.get("memory_estimate_per_device_gb") or {}).get("total_gb")
    if cfg.hardware.device_type == "cuda":
        return MemoryFacts(estimate, cfg.hardware.memory_gb, "device")
    host = host_memory()
    return MemoryFacts(estimate, host.available_gb if host else None, "host")


def parse_failures(text: str) -> list[RankFailure]:
    """torchrun's summary (`Failures:` then `Root Cause`), root cause first; [] if there is none."""
    root_at = text.rfind("Root Cause")
    start = text.rfind("Failures:", 0, root_at if root_at >= 0 else None)
    if root_at < 0:
        return []
    blocks = ENTRY.split(text[root_at:])[1:2] + (ENTRY.split(text[start:root_at])[1:] if start >= 0 else [])
    return [f for f in map(_parse_entry, blocks) if f is not None]


def _parse_entry(block: str) -> RankFailure | None:
    fields: dict[str, str] = {}
    key = None
    for line in block.splitlines():
        if line.startswith(("----", "====")):
            break
        match = FIELD.match(line)
        if match:
            key = match.group(1)
            fields[key] = match.group(2).strip()
        elif key == "traceback" and line.strip():
            fields["traceback"] = line.strip()  # keep the last line: the exception itself
    exit_match = re.match(r"(-?\d+)(?: \(pid: (\d+)\))?", fields.get("exitcode", ""))
    rank_match = re.match(r"(\d+)", fields.get("rank", ""))
    if not (exit_match and rank_match):
        return None
    return RankFailure(int(rank_match.group(1)), int(exit_match.group(1)),
                       int(exit_match.group(2)) if exit_match.group(2) else None, fields.get("traceback", ""))


def pick_cause(failures: list[RankFailure]) -> RankFailure:
    """A rank killed from outside (not torchrun's own SIGTERM) or out of memory outranks its peers'
    'connection reset' errors, whose time stamps can come first."""
    def weight(f: RankFailure) -> int:
        if f.signal and f.signal != "SIGTERM" or any(s in f.message for s in CUDA_OOM):
            return 0
        return 2 if any(s in f.message for s in PEER_NOISE) or f.signal == "SIGTERM" else 1
    return min(failures, key=weight)  # min is stable: the root cause wins ties


def oom_killed_pids() -> set[int]:
    """Pids the kernel's OOM killer ended, from the kernel log (empty where it cannot be read)."""
    try:
        out = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        return set()
    return {int(pid) for pid in OOM_KILL_LOG.findall(out)}


def oom_kill_count() -> int | None:
    """The kernel's OOM-kill count for this cgroup (v2 memory.events, v1 memory.oom_control)."""
    for path in (Path("/sys/fs/cgroup/memory.events"), Path("/sys/fs/cgroup/memory/memory.oom_control")):
        try:
            for line in path.read_text().splitlines():
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
        except OSError:
            continue
    return None


def describe(f: RankFailure, memory: MemoryFacts | None, oom_pids: set[int], oom_kills_rose: bool) -> str:
    mem = f"; {memory.note()}" if memory else ""
    if any(s in f.message for s in CUDA_OOM):
        return f"CUDA out of memory on rank {f.rank}: {f.message}{mem}"
    if f.signal == "SIGKILL" and (f.pid in oom_pids or oom_kills_rose):
        evidence = "kernel log" if f.pid in oom_pids else "the cgroup's oom_kill count rose"
        return f"host out of memory: rank {f.rank} (pid {f.pid}) was OOM-killed (SIGKILL; {evidence}){mem}"
    if any(s in f.message for s in HOST_ALLOC):
        return f"host out of memory on rank {f.rank}: {f.message}{mem}"
    if f.signal:
        return (f"rank {f.rank} was killed by {f.signal} (exit code {f.exitcode}, pid {f.pid}): {f.message or 'no error file'}")
    return f"rank {f.rank} failed (exit code {f.exitcode}): {f.message or 'no error file'}"


def failure_reason(log_text: str, returncode: int, memory: MemoryFacts | None = None,
                   oom_kills_rose: bool = False) -> str:
    """The failing rank torchrun names (killed by a signal outranks its peers' noise), with its error
    file's message or the signal, else the last exception in the log, else the exit code."""
    failures = parse_failures(log_text)
    if failures:
        cause = pick_cause(failures)
        killed = cause.signal == "SIGKILL"
        reason = describe(cause, memory, oom_killed_pids() if killed else set(), killed and oom_kills_rose)
        others = [f"rank {f.rank}: {f.message or f.signal}" for f in failures if f.rank != cause.rank]
        if others:
            reason += f" (then {'; '.join(dict.fromkeys(others))})"
        return reason[:1000]
    for line in reversed(log_text.splitlines()):
        match = EXCEPTION_LINE.search(line)
        if match and "ChildFailedError" not in match.group(1):
            text = f"{match.group(1)}: {match.group(2)}"
            return (f"CUDA out of memory: {text}; {memory.note()}" if memory and any(s in text for s in CUDA_OOM)
                    else text)[:1000]
    if returncode < 0:
        return f"torchrun killed by signal {signal.Signals(-returncode).name}"
    return f"torchrun exited with code {returncode} (a rank failed; killed ranks may mean out of memory)"
