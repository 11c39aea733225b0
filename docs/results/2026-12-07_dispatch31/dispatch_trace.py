"""issue 31, 2026-12-07: does a checkpointed step's dispatch wait on the device? Reads the Kineto traces of parbench's
default profile window and prints, per traced step: its wall time, how much of it the GPU ran kernels, and how far
the device ran behind the host (the lag from each kernel's launch call to the kernel's start). A host-bound step has
idle GPU gaps and a lag of a few µs; a step whose launch queue fills has a busy GPU, a lag of milliseconds, and launch
calls that block. Usage: python dispatch_trace.py NAME=TRACE.json.gz ... > summary.json"""
from __future__ import annotations

import json
import statistics
import sys

from parbench.metrics.trace_events import DEVICE_CATS, complete_events, load_trace

LAUNCHES = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx", "cudaGraphLaunch")
SYNCS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpyAsync")


def busy_us(intervals: list[tuple[float, float]], lo: float, hi: float) -> float:
    """Length of the union of the intervals inside [lo, hi]."""
    total, reach = 0.0, lo
    for start, end in sorted(intervals):
        start, end = max(start, reach), min(end, hi)
        if end > start:
            total += end - start
            reach = end
    return total


def quantile(xs: list[float], q: float) -> float:
    return sorted(xs)[min(len(xs) - 1, int(q * len(xs)))] if xs else 0.0


def step_summary(events, lo: float, hi: float) -> dict:
    kernels = [e for e in events if e.cat in DEVICE_CATS[:3] and lo <= e.start < hi]
    launches = {e.args.get("correlation"): e for e in events
                if e.cat == "cuda_runtime" and e.name in LAUNCHES and lo <= e.start < hi}
    lags = [k.start - launches[k.args["correlation"]].end for k in kernels if k.args.get("correlation") in launches]
    calls = [e.dur for e in launches.values()]
    syncs = [e.dur for e in events if e.cat == "cuda_runtime" and e.name in SYNCS and lo <= e.start < hi]
    wall = hi - lo
    busy = busy_us([(k.start, k.end) for k in kernels], lo, hi)
    thirds = [round(busy_us([(k.start, k.end) for k in kernels], lo + i * wall / 3, lo + (i + 1) * wall / 3)
                    / (wall / 3), 3) for i in range(3)]
    return {"wall_ms": round(wall / 1e3, 2), "kernels": len(kernels), "gpu_busy": round(busy / wall, 3),
            "gpu_busy_by_third": thirds, "launch_calls": len(calls),
            "launch_call_us": {"median": round(statistics.median(calls), 2) if calls else 0,
                               "p99": round(quantile(calls, 0.99), 1), "max": round(max(calls, default=0), 1),
                               "sum_ms": round(sum(calls) / 1e3, 2), "over_50us": sum(c > 50 for c in calls)},
            "lag_us": {"p10": round(quantile(lags, 0.1), 1), "median": round(quantile(lags, 0.5), 1),
                       "p90": round(quantile(lags, 0.9), 1), "max": round(max(lags, default=0), 1)},
            "sync_ms": round(sum(syncs) / 1e3, 2)}


def trace_summary(path: str) -> list[dict]:
    events = complete_events(load_trace(path))
    marks = sorted(e.start for e in events if e.on_host and e.name.startswith("ProfilerStep#"))
    end = max(e.end for e in events)
    return [step_summary(events, lo, hi) for lo, hi in zip(marks, [*marks[1:], end])]


if __name__ == "__main__":
    print(json.dumps({name: trace_summary(path) for name, path in (a.split("=", 1) for a in sys.argv[1:])}, indent=1))
