"""A bytecode cache for machines where every Python process would compile its imports from source.

Container images often set PYTHONDONTWRITEBYTECODE=1 and install packages without their bytecode
(or on a read-only mount): then the orchestrator, torchrun and every rank compile torch, Hydra and
MLflow again at each start. Measured on an H100 machine (torch 2.11, 2026-11-24): `import torch` 5.9 s,
of which most was compiling, and a 4-point tiny sweep spent 6.7 s of each worker's 13 s there.
parbench then keeps the bytecode in a cache folder (sys.pycache_prefix) for itself and the processes
it starts. PARBENCH_BYTECODE_CACHE=0 leaves the interpreter as it is; =<folder> always uses that folder."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

SETTING = "PARBENCH_BYTECODE_CACHE"


def default_folder() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "parbench" / "pycache"


def bytecode_kept(package: str = "torch") -> bool:
    """Whether `package`'s bytecode is (or will be) kept beside its sources, as pip installs it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return True  # nothing to speed up
    if Path(importlib.util.cache_from_source(spec.origin)).exists():
        return True
    return not sys.dont_write_bytecode and os.access(Path(spec.origin).parent, os.W_OK)


def enable_bytecode_cache() -> str | None:
    """Keep compiled bytecode under a cache folder where it would otherwise be compiled at every start;
    the folder used (also for child processes, through the environment), or None."""
    setting = os.environ.get(SETTING, "")
    if setting == "0" or (not setting and (sys.pycache_prefix is not None or bytecode_kept())):
        return None
    folder = setting or sys.pycache_prefix or str(default_folder())
    sys.pycache_prefix, sys.dont_write_bytecode = folder, False
    os.environ["PYTHONPYCACHEPREFIX"] = folder
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    return folder
