"""benchmarks/overhead.py reads a point's phases from a console log recorded on an H100 (before the
start-up fixes of issue 27): launch, first rank line, first step, end."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LOG = ROOT / "tests" / "data" / "overhead_h100_2026-11-24.log"


def overhead_module():
    spec = importlib.util.spec_from_file_location("overhead", ROOT / "benchmarks" / "overhead.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_phases_of_a_recorded_gpu_log():
    overhead = overhead_module()
    lines, work, wall = overhead.read_log(LOG)
    figures = overhead.report(overhead.phases(lines, work), wall)
    rows = figures["points"]
    assert [r["point"] for r in rows] == ["tiny 1 rank seq32 mbs4", "tiny 1 rank seq64 mbs4"] * 2
    assert figures["start_to_first_launch_s"] == pytest.approx(20.413)
    third = rows[2]  # launched at 67.046, first rank line 77.053, first step 84.457, done 86.326
    assert third["before_launch_s"] == pytest.approx(67.046 - 66.682)
    assert third["torchrun_to_ranks_s"] == pytest.approx(77.053 - 67.046)
    assert third["ranks_to_first_step_s"] == pytest.approx(84.457 - 77.053)
    assert third["after_steps_s"] == pytest.approx(86.326 - third["steps_s"] - 84.457)
    assert third["fixed_s"] == pytest.approx(86.326 - 66.682 - work[2])
    assert third["rank0_progress"][0][1].startswith("joining the process group (nccl)")
    assert figures["fixed_per_point_s"] == pytest.approx((wall - sum(work)) / 4)


def test_the_parse_command_prints_the_table():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "overhead.py"), "--parse", str(LOG)],
                         capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")}).stdout
    assert "start to first launch 20.4 s" in out and out.count("tiny 1 rank") >= 4


def test_compile_reuse_reads_each_points_first_rank_line_and_first_measured_batch():
    """benchmarks/compile_reuse.py on its recorded CPU log (a compile-cache miss, then a hit)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from compile_reuse import points_from_lines
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    lines, _, _ = overhead_module().read_log(ROOT / "tests" / "data" / "compile_reuse_cpu_2026-11-25.log")
    first, second = points_from_lines(lines)
    assert first["name"].startswith("tiny 1 rank inference in20") and second["name"].startswith("tiny 1 rank inference in28")
    assert (first["first_rank"], first["measuring"]) == (6.344, 25.553)
    assert (second["first_rank"], second["measuring"]) == (28.105, 31.703)
