"""Fixed cost of one sweep point on this machine: a 4-point sweep of the default experiment (tiny
model; on CPU 2 gloo ranks, on a GPU machine its GPUs), timed line by line from the console; per
point, the wall time between one point's end and the next minus the measured work (the steps the
worker timed).

    python benchmarks/overhead.py [--hardware auto|cpu|...] [--points dp,fsdp --sizes 32,64]
                                  [--out overhead.json] [--log overhead.log] [overrides...]
    python benchmarks/overhead.py --parse overhead.log     # the figures of a recorded log

Phases per point: `before launch` (Hydra job set-up, config checks, plan, MLflow run opened),
`torchrun -> ranks` (torchrun and the workers importing, until the first rank's line), `ranks ->
first step` (process group, mesh, model, strategies, the first step), `steps` (what the workers
measured, plus the time between steps), `after the steps` (teardown, results logged to MLflow, the
summary). --log keeps every console line with its time (and each point's measured work), so the
figures can be read again from the log alone (--parse)."""

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

LAUNCH = re.compile(r"^\[parbench\] (.+): [\d,]+ ranks? on ")
RANK = re.compile(r"^\[parbench\] rank (\d+) \+[\d.]+s (.*)")
STEP = re.compile(r"^\[parbench\] step ")
DONE = re.compile(r"^== .+: (FINISHED|FAILED)")
WORK = re.compile(r"^# work (\d+) ([\d.eE+-]+)$")  # a recorded log's measured work of point i

Lines = list[tuple[float, str]]


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed_lines(cmd: list[str], cwd: Path, check: bool = True) -> tuple[Lines, float]:
    """Every console line with the seconds since the command started, and the total wall time
    (check: exit if the command failed)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    lines = []
    for line in proc.stdout:
        lines.append((time.perf_counter() - start, line.rstrip("\n")))
        print(f"{lines[-1][0]:8.2f} | {lines[-1][1]}", flush=True)  # a cut-short call still shows where it was
    if proc.wait() != 0 and check:
        sys.exit("the sweep failed:\n" + "\n".join(text for _, text in lines[-30:]))
    return lines, time.perf_counter() - start


def measured_work(job_dir: Path) -> float:
    rows = [json.loads(line) for line in (job_dir / "steps.jsonl").read_text().splitlines() if line.strip()]
    return sum(row.get("step_time_s", 0.0) for row in rows)


def phases(lines: Lines, work: list[float]) -> list[dict]:
    """One dict per point with the end of each phase (seconds since the sweep started) and rank 0's
    progress lines (seconds since the launch, message); work[i]: point i's measured work."""
    points, current = [], None
    for t, text in lines:
        if LAUNCH.match(text):
            current = {"name": LAUNCH.match(text).group(1), "launch": t, "rank0": []}
        elif current and RANK.match(text):
            current.setdefault("first_rank", t)
            if RANK.match(text).group(1) == "0":
                current["rank0"].append((round(t - current["launch"], 2), RANK.match(text).group(2)[:80]))
        elif current and STEP.match(text):
            current.setdefault("first_step", t)
            current["last_step"] = t
        elif current and DONE.match(text):
            current["done"] = t
            current["work"] = work[len(points)]
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
                     "steps_s": p["last_step"] - p["first_step"], "after_steps_s": p["done"] - p["last_step"],
                     "rank0_progress": p["rank0"]})
        previous = p["done"]
    first_job = points[0]["launch"] if points else 0.0
    return {"points": rows, "sweep_wall_s": wall, "start_to_first_launch_s": first_job,
            "fixed_per_point_s": (wall - sum(p["work"] for p in points)) / max(1, len(points)),
            "fixed_per_point_median_s": statistics.median(r["fixed_s"] for r in rows)}


def write_log(path: Path, lines: Lines, work: list[float], wall: float) -> None:
    """Every line as `seconds<TAB>text`, then `# work i seconds` per point and `# wall seconds`."""
    rows = [f"{t:.3f}\t{text}" for t, text in lines] + [f"# work {i} {w!r}" for i, w in enumerate(work)]
    path.write_text("\n".join(rows + [f"# wall {wall!r}"]) + "\n")


def read_log(path: Path) -> tuple[Lines, list[float], float]:
    """What write_log wrote: the timed lines, each point's measured work, the sweep's wall time."""
    lines, work, wall = [], [], 0.0
    for row in path.read_text().splitlines():
        if WORK.match(row):
            work.append(float(WORK.match(row).group(2)))
        elif row.startswith("# wall "):
            wall = float(row.split()[2])
        elif "\t" in row:
            t, text = row.split("\t", 1)
            lines.append((float(t), text))
    return lines, work, wall


def print_table(figures: dict) -> None:
    print(f"\n{'point':34s} {'wall':>7s} {'work':>6s} {'fixed':>6s} | {'before':>6s} {'->ranks':>7s} "
          f"{'->step':>6s} {'steps':>6s} {'after':>6s}   (seconds)")
    for r in figures["points"]:
        print(f"{r['point'][:34]:34s} {r['wall_s']:7.2f} {r['work_s']:6.2f} {r['fixed_s']:6.2f} | "
              f"{r['before_launch_s']:6.2f} {r['torchrun_to_ranks_s']:7.2f} {r['ranks_to_first_step_s']:6.2f} "
              f"{r['steps_s']:6.2f} {r['after_steps_s']:6.2f}")
    for r in figures["points"][:1] + figures["points"][-1:]:
        print(f"rank 0 of {r['point'][:40]} (seconds since the launch): "
              + "; ".join(f"+{t:.1f} {m[:40]}" for t, m in r["rank0_progress"]))
    print(f"\nsweep wall {figures['sweep_wall_s']:.1f} s, start to first launch {figures['start_to_first_launch_s']:.1f} s; "
          f"fixed cost per point {figures['fixed_per_point_s']:.2f} s (all of the sweep's wall time but the measured "
          f"work, over {len(figures['points'])} points), median {figures['fixed_per_point_median_s']:.2f} s")


def run_sweep(args: argparse.Namespace, overrides: list[str]) -> dict:
    root = Path(tempfile.mkdtemp(prefix="parbench_overhead_"))
    cmd = [sys.executable, "-m", "parbench", "-m", f"hardware={args.hardware}", f"parallel={args.points}",
           f"workload.seq_len={args.sizes}", f"tracking.uri=sqlite:///{root}/mlflow.db",
           f"hydra.sweep.dir={root}/sweep", *overrides]
    # The store exists before the sweep, as a user's does after the first run: MLflow's first-use
    # schema migration (seconds) is not a per-point cost.
    subprocess.run([sys.executable, "-c", f"import mlflow; mlflow.MlflowClient('sqlite:///{root}/mlflow.db')"
                    ".search_experiments()"], check=True, capture_output=True)
    print("$", " ".join(cmd), flush=True)
    cpu_before = children_cpu_s()
    lines, wall = timed_lines(cmd, Path.cwd())
    jobs = sorted((p for p in (root / "sweep").iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    work = [measured_work(job) for job in jobs]
    if args.log:
        write_log(args.log, lines, work, wall)
    figures = report(phases(lines, work), wall)
    # CPU seconds of every process of the sweep: on a busy machine a steadier figure than wall time.
    figures["sweep_cpu_s"] = children_cpu_s() - cpu_before
    figures["cpu_per_point_s"] = figures["sweep_cpu_s"] / max(1, len(figures["points"]))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hardware", default="auto", help="hardware profile (auto: this machine's GPUs, else cpu)")
    parser.add_argument("--points", default="dp,fsdp", help="parallel layouts (comma list)")
    parser.add_argument("--sizes", default="32,64", help="workload.seq_len values (comma list)")
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    parser.add_argument("--log", type=Path, help="write the timed console lines here (for --parse)")
    parser.add_argument("--parse", type=Path, help="read the figures from a log --log wrote; run nothing")
    args, overrides = parser.parse_known_args()
    if args.parse:
        lines, work, wall = read_log(args.parse)
        figures = report(phases(lines, work), wall)
    else:
        figures = run_sweep(args, overrides)
    print_table(figures)
    if "sweep_cpu_s" in figures:
        print(f"CPU time {figures['sweep_cpu_s']:.1f} s ({figures['cpu_per_point_s']:.1f} s per point, all processes)")
    if args.out:
        args.out.write_text(json.dumps(figures, indent=2))
        print(f"figures: {args.out}")


if __name__ == "__main__":
    main()
