"""What a worker tells the orchestrator: a progress line and a JSON line per step (rank 0),
so a crash loses nothing already measured, and results.json at the end."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path

import torch

from parbench.fmt import format_metric
from parbench.paths import RESULTS_FILE, STEPS_FILE, write_json_atomic

STARTED = time.monotonic()  # the worker imports this module first thing


def progress(rank: int, message: str) -> None:
    """Printed by every rank as a phase starts, with the seconds since the worker started: the log of
    a slow or hung job shows where each rank is (the launcher's timeout kills it, the log stays)."""
    print(f"[parbench] rank {rank} +{time.monotonic() - STARTED:.1f}s {message}", flush=True)


class StepReporter:
    def __init__(self, job_dir: Path, is_main: bool):
        self.job_dir = job_dir  # rank 0's result files and every rank's own files (profiler traces)
        self.path = job_dir / STEPS_FILE
        self.is_main = is_main
        if is_main:
            self.path.write_text("")

    def step(self, step: int, total: int, phase: str, **values: float) -> None:
        if not self.is_main:
            return
        with self.path.open("a") as f:
            f.write(json.dumps({"step": step, "phase": phase, **values}) + "\n")
        shown = "  ".join(f"{k} {format_metric(k, v)}" for k, v in values.items())
        print(f"[parbench] step {step + 1}/{total} ({phase}) {shown}", flush=True)


def write_results(job_dir: Path, results: dict) -> None:
    write_json_atomic(job_dir / RESULTS_FILE, results)


def device_tags(device: torch.device, world_size: int) -> dict[str, str]:
    """Software and device facts every run records as MLflow tags."""
    tags = {"torch_version": torch.__version__, "hostname": socket.gethostname(),
            "device_count": str(world_size), "python_version": sys.version.split()[0]}
    if device.type == "cuda":
        tags.update(device_name=torch.cuda.get_device_name(device), cuda_version=str(torch.version.cuda),
                    nccl_version=".".join(map(str, torch.cuda.nccl.version())))
    else:
        tags.update(device_name=f"cpu ({os.cpu_count()} cores)")
    for key in ("SLURM_JOB_ID", "SLURM_JOB_NODELIST"):
        if key in os.environ:
            tags[key.lower()] = os.environ[key]
    return tags
