"""Locations parbench needs: the conf/ tree, the repository (for the git sha), and the files a job
directory holds (what the worker writes and the orchestrator reads)."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import datetime
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
CONF_DIR = Path(os.environ.get("PARBENCH_CONF_DIR", REPO_ROOT / "conf")).resolve()
STEPS_FILE = "steps.jsonl"  # rank 0: one JSON line per step, so a crash loses nothing measured
RESULTS_FILE = "results.json"  # rank 0: metrics, tags, artifacts at the end
PROFILE_DIR = "profile"  # traces, tables, plots of a profiled run; each file becomes an artifact
INFERENCE_LAYERS_FILE = "inference_layers.csv"  # native engine: ms per step of each phase, layer and op type
PLAN_FILE = "plan.json"  # the orchestrator: what the job runs (workload, layout, prediction)
SKIPPED_FILE = "skipped.json"  # the job was skipped: its config already has a FINISHED run (resume)
SWEEP_PENDING_FILE = "sweep_unclosed.json"  # a finished sweep whose parent run could not be closed: `parbench sync` does it


def unique_dir(base: str) -> str:
    """<base>/<date>/<H-M-S>, made here, so two runs or sweeps started in the same second (a script,
    a SLURM array, two terminals) never share a folder: the second gets <H-M-S>-2, and so on (mkdir
    is atomic, also on a shared file system)."""
    now = datetime.now()
    day = Path(base) / now.strftime("%Y-%m-%d")
    day.mkdir(parents=True, exist_ok=True)
    stem, n = now.strftime("%H-%M-%S"), 1
    while True:
        candidate = day / (stem if n == 1 else f"{stem}-{n}")
        try:
            candidate.mkdir()
            return str(candidate)
        except FileExistsError:
            n += 1


def git_sha() -> str:
    """The commit parbench runs from, with '-dirty' when the tree has changes; 'unknown' outside git."""
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True,
                             text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO_ROOT,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return sha + ("-dirty" if dirty else "")


def write_json_atomic(path: Path, data: dict) -> None:
    """Write through a temporary file and rename it, so a reader never sees half a file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2))
    tmp.replace(path)
