"""Locations parbench needs: the conf/ tree and the repository (for the git sha)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
CONF_DIR = Path(os.environ.get("PARBENCH_CONF_DIR", REPO_ROOT / "conf")).resolve()


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
