"""Where a profiled training step's host time goes (issue 31, 2026-11-29 call 4): from the rank-0 trace, the CUDA
runtime calls (launches, allocations, synchronisations) and the aten ops (each op's whole time, its nested ops
counted again in theirs), in ms a profiled step, the longest first.

    python host_time.py JOB_DIR STEPS"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

from parbench.metrics.trace_events import complete_events, load_trace


def main() -> None:
    job, steps = Path(sys.argv[1]), float(sys.argv[2])
    trace = load_trace(next(job.rglob("*rank0*.json*")))
    events = [e for e in complete_events(trace) if e.on_host]
    step_us = 0.0
    names = defaultdict(lambda: [0.0, 0])
    for e in events:
        if e.cat in ("cuda_runtime", "cuda_driver"):
            names[e.name][0] += e.dur
            names[e.name][1] += 1
        if e.cat == "user_annotation" and e.name.startswith("ProfilerStep"):
            step_us += e.dur
    print(f"{job.name}: profiler steps {step_us / steps / 1e3:.1f} ms a step")
    for name, (us, n) in sorted(names.items(), key=lambda kv: -kv[1][0])[:12]:
        print(f"  {us / steps / 1e3:8.2f} ms a step  {n / steps:8.0f} calls  {name}")
    ops = defaultdict(lambda: [0.0, 0])
    for e in events:
        if e.cat == "cpu_op":
            ops[e.name][0] += e.dur
            ops[e.name][1] += 1
    print("  aten ops by total time (nested ops counted in their parents too):")
    for name, (us, n) in sorted(ops.items(), key=lambda kv: -kv[1][0])[:25]:
        print(f"  {us / steps / 1e3:8.2f} ms a step  {n / steps:8.0f} calls  {name}")


if __name__ == "__main__":
    main()
