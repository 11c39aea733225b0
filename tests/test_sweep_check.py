"""A sweep's points as Hydra will expand them, checked before the first launches; the folders
runs and sweeps get."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from parbench.paths import unique_dir
from parbench.sweep_check import point_name, swept_keys, sweep_points


def test_sweep_points_expand_like_hydra():
    jobs = sweep_points(["parallel=tp,pp", "model=llama2_7b", "workload.dtype=bf16,fp16"])
    assert len(jobs) == 4 and ["parallel=tp", "model=llama2_7b", "workload.dtype=fp16"] in jobs
    assert swept_keys(jobs) == {"parallel", "workload.dtype"}
    assert point_name(jobs[0], swept_keys(jobs)) == "parallel=tp workload.dtype=bf16"


def test_every_run_gets_its_own_folder(tmp_path):
    made = [unique_dir(str(tmp_path)) for _ in range(3)]
    assert len(set(made)) == 3 and all(Path(m).parent.parent == tmp_path and Path(m).is_dir() for m in made)


def test_help_lists_the_subcommands():
    out = subprocess.run([sys.executable, "-m", "parbench", "--help"], capture_output=True, text=True, timeout=60).stdout
    for word in ("parbench plan", "parbench report", "parbench calibrate", "parbench sync", "launch.check_fit"):
        assert word in out
