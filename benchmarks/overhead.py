"""Fixed cost of one sweep point on this machine: a 4-point CPU sweep of the default experiment
(tiny model, 2 gloo ranks), timed line by line from the console; per point, the wall time
between one point's end and the next minus the measured work (the steps the worker timed).

    python benchmarks/overhead.py [--points dp,fsdp --sizes 32,64] [--out overhead.json] [overrides...]

Phases per point: `before launch` (Hydra job set-up, config checks, plan, MLflow run opened),
`torchrun -> ranks` (torchrun and the workers importing, until the first rank's line), `ranks ->
first step` (process group, mesh, model, strategies), `steps` (what the workers measured, plus the
time between steps), `after the steps` (teardown, results logged to MLflow, the summary)."""

from __future__ import annotations

import argparse
import json
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LAUNCH = re.compile(r"^\[parbench\] (.+): \d+ ranks on ")
RANK = re.compile(r"^\[parbench\] rank \d+ ")
STEP = re.compile(r"^\[parbench\] step ")
DONE = re.compile(r"^== .+: (FINISHED|FAILED)")


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed_lines(cmd: list[str], cwd: Path) -> tuple[list[tuple[float, str]], float]:
    """Every console line with the seconds since the command started, and the total wall time."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    lines = [(time.perf_counter() - start, line.rstrip("\n")) for line in proc.stdout]
    if proc.wait() != 0:
        sys.exit("the sweep failed:\n" + "\n".join(text for _, text in lines[-30:]))
    return lines, time.perf_counter() - start


def measured_work(job_dir: Path) -> float:
    rows = [json.loads(line) for line in (job_dir / "steps.jsonl").read_text().splitlines() if line.strip()]
    return sum(row.get("step_time_s", 0.0) for row in rows)


def phases(lines: list[tuple[float, str]], sweep_dir: Path) -> list[dict]:
    """One dict per point with the end of each phase (seconds since the sweep started)."""
    points, current = [], None
    for t, text in lines:
        if LAUNCH.match(text):
            current = {"name": LAUNCH.match(text).group(1), "launch": t}
        elif current and RANK.match(text) and "first_rank" not in current:
            current["first_rank"] = t
        elif current and STEP.match(text):
            current.setdefault("first_step", t)
            current["last_step"] = t
        elif current and DONE.match(text):
            current["done"] = t
            current["work"] = measured_work(sweep_dir / str(len(points)))
            points.append(current)
            current = None
    return points


def report(points: list[dict], wall: float) -> dict:
    previous, rows = 0.0, []
    for p in points:
        span = p["done"] - previous
        rows.append({"point": p["name"], "wall_s": span, "work_s": p["work"], "fixed_s": span - p["work"],
                     "before_launch_s": p["launch"] - previous, "torchrun_to_ranks_s": p["first_rank"] - p["launch"],
                     "ranks_to_first_step_s": p["first_step"] - p["first_rank"],
                     "steps_s": p["last_step"] - p["first_step"], "after_steps_s": p["done"] - p["last_step"]})
        previous = p["done"]
    first_job = points[0]["launch"] if points else 0.0
    return {"points": rows, "sweep_wall_s": wall, "start_to_first_launch_s": first_job,
            "fixed_per_point_s": (wall - sum(p["work"] for p in points)) / max(1, len(points)),
            "fixed_per_point_median_s": statistics.median(r["fixed_s"] for r in rows)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", default="dp,fsdp", help="parallel layouts (comma list)")
    parser.add_argument("--sizes", default="32,64", help="workload.seq_len values (comma list)")
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    args, overrides = parser.parse_known_args()
    root = Path(tempfile.mkdtemp(prefix="parbench_overhead_"))
    cmd = [sys.executable, "-m", "parbench", "-m", "hardware=cpu", f"parallel={args.points}",
           f"workload.seq_len={args.sizes}", f"tracking.uri=sqlite:///{root}/mlflow.db",
           f"hydra.sweep.dir={root}/sweep", *overrides]
    # The store exists before the sweep, as a user's does after the first run: MLflow's first-use
    # schema migration (seconds) is not a per-point cost.
    subprocess.run([sys.executable, "-c", f"import mlflow; mlflow.MlflowClient('sqlite:///{root}/mlflow.db')"
                    ".search_experiments()"], check=True, capture_output=True)
    print("$", " ".join(cmd), flush=True)
    cpu_before = children_cpu_s()
    lines, wall = timed_lines(cmd, Path.cwd())
    figures = report(phases(lines, root / "sweep"), wall)
    # CPU seconds of every process of the sweep: on a busy machine a steadier figure than wall time.
    figures["sweep_cpu_s"] = children_cpu_s() - cpu_before
    figures["cpu_per_point_s"] = figures["sweep_cpu_s"] / max(1, len(figures["points"]))
    print(f"\n{'point':34s} {'wall':>7s} {'work':>6s} {'fixed':>6s} | {'before':>6s} {'->ranks':>7s} "
          f"{'->step':>6s} {'steps':>6s} {'after':>6s}   (seconds)")
    for r in figures["points"]:
        print(f"{r['point'][:34]:34s} {r['wall_s']:7.2f} {r['work_s']:6.2f} {r['fixed_s']:6.2f} | "
              f"{r['before_launch_s']:6.2f} {r['torchrun_to_ranks_s']:7.2f} {r['ranks_to_first_step_s']:6.2f} "
              f"{r['steps_s']:6.2f} {r['after_steps_s']:6.2f}")
    print(f"\nsweep wall {wall:.1f} s, start to first launch {figures['start_to_first_launch_s']:.1f} s; "
          f"fixed cost per point {figures['fixed_per_point_s']:.2f} s (all of the sweep's wall time but "
          f"the measured work, over {len(figures['points'])} points); CPU time {figures['sweep_cpu_s']:.1f} s "
          f"({figures['cpu_per_point_s']:.1f} s per point, all processes)")
    if args.out:
        args.out.write_text(json.dumps(figures, indent=2))
        print(f"figures: {args.out}")


if __name__ == "__main__":
    main()
