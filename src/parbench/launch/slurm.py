"""SLURM specifics of a sweep: what each job asks for, where its results go, and how it ended
(squeue/scontrol, which work without an accounting database, unlike sacct)."""

from __future__ import annotations

import functools
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from omegaconf import DictConfig, OmegaConf

from parbench.config import ConfigError
from parbench.config.hardware import GpuInfo, detect_gpus, resolve_hardware
from parbench.config.schema import HardwareConfig
from parbench.launch.interrupt import INTERRUPTS

# squeue states after which a job runs no more (REQUEUED and COMPLETING are on the way elsewhere).
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "DEADLINE", "OUT_OF_MEMORY", "NODE_FAIL",
         "BOOT_FAIL", "PREEMPTED", "SPECIAL_EXIT", "REVOKED"}
CPUS_PER_GPU = 4  # CPU cores asked for per GPU (data loading, the orchestrator): 32 for 8 GPUs
SQLITE = "sqlite:///"
MISSING_POLLS = 3  # polls a job may be absent from squeue before it counts as ended (purged)
SLURM_COMMANDS = ("sbatch", "srun", "squeue", "scontrol")
# What sbatch's refusal says -> what to change.
REFUSAL_HINTS = (
    ("generic resource", "the jobs ask for GPUs (--gpus-per-node) the partition does not have: choose a partition "
                         "with GPUs (hydra.launcher.partition), a CPU profile (hardware=cpu), or set "
                         "hydra.launcher.gpus_per_node=null"),
    ("partition", "set hydra.launcher.partition to one that `sinfo` lists"),
    ("node configuration", "no node of the partition has what a job asks for: lower hydra.launcher.cpus_per_task, "
                           "gpus_per_node or mem_gb, or hardware.nodes"),
    ("memory", "lower hydra.launcher.mem_gb"),
    ("time limit", "lower hydra.launcher.timeout_min to the partition's limit"),
    ("account", "set hydra.launcher.account to one of yours (`sacctmgr show assoc user=$USER`)"),
    ("qos", "set hydra.launcher.qos to one your account may use"),
)


def job_hardware(node: DictConfig) -> tuple[str, int]:
    """(device type, devices per node) a job of this hardware config runs with, as the submitting host
    resolves it: hardware=auto looks at this host's GPUs (none on most login nodes: the CPU profile),
    as the job would on a node like it. -1: not known here (a GPU profile with gpus_per_node=-1)."""
    hw = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(HardwareConfig), node))
    if hw.name == "auto":
        try:
            hw = resolve_hardware(hw, _local_gpus())
        except ConfigError:  # an unknown GPU: the job itself refuses the point, with what to set
            return "cuda", -1
    return hw.device_type, hw.gpus_per_node


@functools.lru_cache(maxsize=1)
def _local_gpus() -> list[GpuInfo]:
    return detect_gpus()  # once per process: the resolvers run each time the launcher config is read


def gpus_to_request(hardware: DictConfig) -> int | None:
    """--gpus-per-node: none for a CPU profile (a CPU partition rejects any GPU request)."""
    device_type, devices = job_hardware(hardware)
    return None if device_type == "cpu" or devices <= 0 else devices


def cpus_to_request(hardware: DictConfig) -> int | None:
    """--cpus-per-task of the one task per node: a core per rank on CPU (so two CPU points never
    share cores), CPUS_PER_GPU per GPU."""
    device_type, devices = job_hardware(hardware)
    if devices <= 0:
        return None
    return devices if device_type == "cpu" else CPUS_PER_GPU * devices


def register_resolvers() -> None:
    """${parbench.slurm_gpus:${hardware}} and ${parbench.slurm_cpus:${hardware}}, used by
    conf/hydra/launcher/slurm.yaml."""
    for name, fn in (("parbench.slurm_gpus", gpus_to_request), ("parbench.slurm_cpus", cpus_to_request)):
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, fn)


def with_absolute_tracking(overrides: Iterable[str], sweep_uri: str) -> list[str]:
    """The point's overrides with its SQLite tracking path made absolute, so a job that starts in
    another directory still writes to the store the sweep's parent run lives in."""
    overrides = list(overrides)
    given = [o for o in overrides if o.split("=", 1)[0].lstrip("+~") == "tracking.uri"]
    uri = given[-1].split("=", 1)[1] if given else sweep_uri
    if not uri.startswith(SQLITE) or Path(uri[len(SQLITE):]).is_absolute():
        return overrides
    db = Path(uri[len(SQLITE):])
    return [o for o in overrides if o not in given] + [f"tracking.uri=sqlite:///{db.resolve()}"]


class SubmissionRefused(Exception):
    """SLURM did not take the sweep's jobs (or cannot be reached); the message is the user's one line."""


def check_slurm_commands() -> None:
    """Before submitting: the commands the sweep (sbatch, squeue, scontrol) and its jobs (srun) use."""
    missing = [cmd for cmd in SLURM_COMMANDS if shutil.which(cmd) is None]
    if missing:
        raise SubmissionRefused(
            f"hydra/launcher=slurm needs SLURM's commands, and {', '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not on PATH: run the sweep on the cluster's login node, "
            "start a local cluster (sudo bash launch/slurm-local.sh start), or leave out hydra/launcher=slurm "
            "to run the sweep on this machine")


def refusal_reason(error: BaseException) -> str:
    """One line from a failed sbatch (submitit's FailedJobError carries its stderr; its cause, the
    command with the batch script), with what to change."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    said = "; ".join(line for line in lines if "error" in line.lower()) or (lines[-1] if lines else repr(error))
    cmd = getattr(error.__cause__, "cmd", None)
    script = f" (batch script: {cmd[-1]})" if isinstance(cmd, list) and cmd else ""
    hint = next((hint for key, hint in REFUSAL_HINTS if key in said.lower()),
                "check the #SBATCH lines against the cluster (hydra.launcher.*)")
    return f"SLURM refused the sweep's jobs: {said}: {hint}{script}"


def ignore_time_limit_signal() -> None:
    """In the job: SLURM sends USR2 to every process of the job signal_delay_s before its time limit
    (earlier for short limits). submitit's handler would raise inside the orchestrator and the default
    action kills torchrun and the ranks; ignored here (children inherit that), the job runs on until
    SLURM stops it at the limit, and the sweep records the point as timed out."""
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)


@dataclass(frozen=True)
class JobEnd:
    """How SLURM says a job ended."""

    state: str  # COMPLETED, FAILED, CANCELLED, TIMEOUT, ... or UNKNOWN
    exit_code: int = 0
    signal: int = 0

    def failure(self, timeout_min: int) -> tuple[str, str] | None:
        """(MLflow status, reason) when SLURM ended the job badly, else None."""
        if self.state in ("TIMEOUT", "DEADLINE"):
            return "FAILED", (f"SLURM time limit reached (hydra.launcher.timeout_min={timeout_min}): raise it, "
                              "or make the point shorter")
        if self.state == "CANCELLED":
            return "KILLED", "cancelled in SLURM (scancel, or an administrator)"
        if self.state == "OUT_OF_MEMORY":
            return "FAILED", "out of memory: SLURM killed the job at its memory limit (raise hydra.launcher.mem_gb)"
        if self.state == "PREEMPTED":
            return "KILLED", "preempted by SLURM"
        if self.state in ("NODE_FAIL", "BOOT_FAIL"):
            return "FAILED", f"SLURM {self.state}: the node failed; resubmit the point"
        if self.state == "FAILED":
            return "FAILED", f"SLURM job failed with exit code {self.exit_code}{self._signal_name()}"
        return None


    def _signal_name(self) -> str:
        """The signal that ended the job (SLURM's ExitCode=<code>:<signal>, or a shell's 128+N)."""
        number = self.signal or (self.exit_code - 128 if 128 < self.exit_code < 128 + 65 else 0)
        try:
            return f" (signal {signal.Signals(number).name})" if number else ""
        except ValueError:
            return f" (signal {number})"


def sweep_tags(ends: dict[str, JobEnd]) -> dict[str, str]:
    """Tags for the sweep's parent run naming the jobs SLURM ended badly, by state
    ({"slurm.timeout": "61_0,61_2", "slurm.cancelled": "61_3"})."""
    by_state: dict[str, list[str]] = {}
    for job_id, end in sorted(ends.items()):
        if end.failure(timeout_min=0) is not None:  # the limit only goes into the point's own reason
            by_state.setdefault(f"slurm.{end.state.lower()}", []).append(job_id)
    return {tag: ",".join(ids) for tag, ids in by_state.items()}


def job_end(job_id: str) -> JobEnd:
    """The final state of a job: scontrol (slurmctld keeps ended jobs for MinJobAge seconds), else sacct."""
    out = _run(["scontrol", "show", "job", "-o", job_id])
    fields = dict(re.findall(r"(\w+)=(\S*)", out))
    state = fields.get("JobState", "")
    code = fields.get("ExitCode", "")
    if not state:
        out = _run(["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "State,ExitCode"]).strip()
        state, _, code = out.splitlines()[0].partition("|") if out else ("UNKNOWN", "", "")
    exit_code, _, sig = code.partition(":")
    return JobEnd(state.split()[0] if state else "UNKNOWN", _int(exit_code), _int(sig))


def accounting_note() -> str | None:
    """One line for the user when the cluster keeps no accounting (sacct fails), else None."""
    try:
        proc = subprocess.run(["sacct", "-n", "-X", "-j", "1"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"sacct is not usable ({e})"
    if proc.returncode == 0:
        return None
    return (f"SLURM accounting is off on this cluster ({proc.stderr.strip() or 'sacct failed'}): "
            "job states come from squeue and scontrol; sacct will not list these jobs")


class JobWatcher:
    """Polls squeue for a sweep's jobs, prints their state changes, and says when each has ended."""

    def __init__(self, labels: dict[str, str], has_result: Callable[[str], bool]):
        self.labels = labels  # job id -> what the user calls the point
        self.has_result = has_result
        self.states: dict[str, str] = {}
        self.missing = {job_id: 0 for job_id in labels}
        self.arrays = sorted({job_id.split("_")[0] for job_id in labels})
        self.cancelled = False

    def wait(self, max_interval_s: float = 30.0) -> dict[str, JobEnd]:
        """Block until every job has ended; their ends, by job id. SIGINT/SIGTERM to the sweep cancels
        its jobs, which then end (and are recorded) as any cancelled job."""
        ends: dict[str, JobEnd] = {}
        start = time.monotonic()
        while len(ends) < len(self.labels):
            if INTERRUPTS.signal and not self.cancelled:
                self.cancel()
            seen = self.poll()
            for job_id in self.labels.keys() - ends.keys():
                state = seen.get(job_id)
                self.missing[job_id] = 0 if state else self.missing[job_id] + 1
                if state in ENDED or self._vanished(job_id, seen):
                    ends[job_id] = job_end(job_id) if state != "COMPLETED" else JobEnd("COMPLETED")
            if len(ends) < len(self.labels):
                _sleep_unless_interrupted(min(max_interval_s, 2 + (time.monotonic() - start) / 20))
        return ends

    def cancel(self) -> None:
        print(f"[parbench] {INTERRUPTS.signal.name}: cancelling the sweep's SLURM jobs (scancel "
              f"{' '.join(self.arrays)})", flush=True)
        _run(["scancel", *self.arrays])
        self.cancelled = True

    def poll(self) -> dict[str, str]:
        """States by job id (one squeue call for the whole array), printing each change."""
        out = _run(["squeue", "-h", "-r", "--states=all", "-j", ",".join(self.arrays), "-o", "%i|%T|%N|%M"])
        seen = {}
        for line in out.splitlines():
            job_id, state, nodes, elapsed = (line.split("|") + ["", "", ""])[:4]
            if job_id not in self.labels:
                continue
            seen[job_id] = state
            if self.states.get(job_id) != state:
                self.states[job_id] = state
                where = f" on {nodes}" if nodes and state != "PENDING" else ""
                print(f"[parbench] SLURM job {job_id} ({self.labels[job_id]}): {state}{where}, {elapsed}", flush=True)
        return seen

    def _vanished(self, job_id: str, seen: dict[str, str]) -> bool:
        """squeue no longer knows it (purged, or squeue failing): ended once its result is there,
        or after MISSING_POLLS polls without it."""
        if job_id in seen:
            return False
        return self.has_result(job_id) or self.missing[job_id] >= MISSING_POLLS


def _sleep_unless_interrupted(seconds: float) -> None:
    """time.sleep that ends early on SIGINT/SIGTERM (their handler only sets a flag)."""
    deadline = time.monotonic() + seconds
    while not INTERRUPTS.signal and (left := deadline - time.monotonic()) > 0:
        time.sleep(min(0.5, left))


def wait_for_file(path: Path, timeout_s: float) -> bool:
    """A shared file system may show a job's result file a little after the job ended."""
    deadline = time.monotonic() + timeout_s
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(1)
    return path.exists()


def _run(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def _int(text: str) -> int:
    return int(text) if text.strip().lstrip("-").isdigit() else 0
