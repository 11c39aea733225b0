"""Analysis of one rank's Kineto trace (read by parbench.metrics.trace_events): how each measured
step splits into compute, communication, memory copies and idle time; per-collective time,
bytes and bandwidth; and a per-op, per-layer table.

A step is a `parbench.step` range (StepClock records one around each measured step).
Overlap follows HTA: |compute & comm| / |comm|; exposed communication is comm time with no
compute running. `python -m parbench.metrics.trace TRACE.json[.gz]` prints the analysis.
"""

from __future__ import annotations

import bisect
import sys
from collections import defaultdict
from dataclasses import dataclass, field

from parbench.metrics import KERNEL_TIME
from parbench.metrics import intervals as iv
from parbench.metrics.timing import STEP_RANGE
from parbench.metrics.trace_events import (BUSBW_FACTOR, Collective, Event, complete_events, describe_collective,
                                           group_size_from_trace, is_comm, is_cpu_compute, is_gpu_trace, load_trace)
from parbench.metrics.trace_ops import Context, inside, op_rows



@dataclass
class StepBreakdown:
    """Seconds of one step: a partition of wall time into compute, exposed comm, memcpy and idle."""

    wall_s: float
    compute_s: float
    comm_s: float  # all communication, overlapped or not
    overlap_s: float  # communication while compute runs
    exposed_comm_s: float
    memcpy_s: float  # memory copies with neither compute nor communication running
    idle_s: float
    comm_by_collective_s: dict[str, float] = field(default_factory=dict)

    def row(self) -> dict[str, float]:
        return {k: v for k, v in vars(self).items() if k != "comm_by_collective_s"} | {
            f"comm_{k}_s": v for k, v in self.comm_by_collective_s.items()}


def step_breakdown(window: iv.Interval, compute: list[iv.Interval], comm: dict[str, list[iv.Interval]],
                   memcpy: list[iv.Interval]) -> StepBreakdown:
    """Split one step window; every input is a list of intervals (any overlap, any order)."""
    compute_w = iv.clip(compute, window)
    comm_w = iv.clip([i for spans in comm.values() for i in spans], window)
    memcpy_w = iv.clip(memcpy, window)
    wall = window[1] - window[0]
    overlap = iv.length(iv.intersect(compute_w, comm_w))
    busy = iv.length(compute_w + comm_w + memcpy_w)
    return StepBreakdown(
        wall_s=wall / 1e6, compute_s=iv.length(compute_w) / 1e6, comm_s=iv.length(comm_w) / 1e6,
        overlap_s=overlap / 1e6, exposed_comm_s=(iv.length(comm_w) - overlap) / 1e6,
        memcpy_s=iv.length(iv.subtract(memcpy_w, compute_w + comm_w)) / 1e6, idle_s=(wall - busy) / 1e6,
        comm_by_collective_s={k: iv.length(iv.clip(spans, window)) / 1e6 for k, spans in comm.items()})


def breakdown_metrics(steps: list[StepBreakdown]) -> dict[str, float]:
    """Percentages over all analysed steps together (time-weighted)."""
    wall = sum(s.wall_s for s in steps)
    if not wall:
        return {}
    comm = _total(steps, "comm_s")
    metrics = {
        "comm_pct": 100 * comm / wall,
        "exposed_comm_pct": 100 * _total(steps, "exposed_comm_s") / wall,
        "overlap_pct": 100 * _total(steps, "overlap_s") / comm if comm else 0.0,
        "compute_pct": 100 * _total(steps, "compute_s") / wall,
        "memcpy_pct": 100 * _total(steps, "memcpy_s") / wall,
        "idle_pct": 100 * _total(steps, "idle_s") / wall,
        "profiled_step_time_s": wall / len(steps),
    }
    kinds = {k for s in steps for k in s.comm_by_collective_s}
    for kind in sorted(kinds):
        metrics[f"comm_pct_{kind}"] = 100 * sum(s.comm_by_collective_s.get(kind, 0.0) for s in steps) / wall
    return metrics


def _total(steps: list[StepBreakdown], attr: str) -> float:
    return sum(getattr(s, attr) for s in steps)


def collective_rows(collectives: list[Collective]) -> list[dict]:
    """Per collective type: calls, time, bytes and nccl-tests algbw/busbw where sizes are known."""
    rows = []
    for kind in sorted({c.kind for c in collectives}):
        group = [c for c in collectives if c.kind == kind]
        time_s = sum(c.interval[1] - c.interval[0] for c in group) / 1e6
        sized = [c for c in group if c.nbytes is not None]
        row = {"collective": kind, "calls": len(group), "time_s": time_s, "bytes": None,
               "algbw_gbps": None, "busbw_gbps": None}
        if sized and len(sized) == len(group) and time_s > 0:
            nbytes = sum(c.nbytes for c in sized)
            algbw = nbytes / time_s / 1e9
            ranks = group[0].ranks
            factor = BUSBW_FACTOR[kind](ranks) if kind in BUSBW_FACTOR and ranks else None
            row.update(bytes=nbytes, algbw_gbps=algbw, busbw_gbps=algbw * factor if factor is not None else None)
        rows.append(row)
    return rows


# The ops that launch GEMM kernels (aten::linear and aten::matmul only call them: on a CPU their self
# time is dispatch), and the marks of attention's ops (SDPA and the kernels it picks)
GEMM_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::_scaled_mm", "aten::_grouped_mm")
ATTENTION_MARKS = ("scaled_dot_product", "flash_attention", "efficient_attention", "cudnn_attention")
KERNEL_KINDS = ("gemm", "attention", "optimizer", "other")


def compute_kind(row: dict) -> str:
    """gemm, attention, optimizer (everything the optimizer's step launches) or other, by the op that
    launched the kernel (on a CPU: the op itself)."""
    if row["phase"] == "optimizer":
        return "optimizer"
    if row["op"] in GEMM_OPS:
        return "gemm"
    return "attention" if any(mark in row["op"] for mark in ATTENTION_MARKS) else "other"


def kernel_time_metrics(ops: list[dict], steps: int) -> dict[str, float]:
    """Compute time a step by kind (`kernel_time_s/<kind>`: kernels on a GPU, op self time on a CPU)
    and in all (`kernel_time_s`): the performance model's parts, measured (parbench calibrate)."""
    totals = dict.fromkeys(KERNEL_KINDS, 0.0)
    for row in ops:
        if row["kind"] == "compute":
            totals[compute_kind(row)] += row["total_s"] / steps
    return {KERNEL_TIME: sum(totals.values()), **{f"{KERNEL_TIME}/{k}": v for k, v in totals.items()}}


@dataclass
class TraceAnalysis:
    device: str  # gpu | cpu
    steps: list[StepBreakdown]
    collectives: list[dict]
    ops: list[dict]  # phase, layer, op, kind, calls, total_s, mean_s, share_pct

    def metrics(self) -> dict[str, float]:
        return {**breakdown_metrics(self.steps), **(kernel_time_metrics(self.ops, len(self.steps)) if self.steps else {})}


def analyze(trace: dict) -> TraceAnalysis:
    """Everything parbench reports from one rank's trace, restricted to its parbench.step ranges
    (on GPU: to the device work those ranges launched, see device_step_windows)."""
    events = complete_events(trace)
    host_windows = sorted((e.start, e.end) for e in events if e.name == STEP_RANGE and e.on_host)
    if not host_windows:
        raise ValueError(f"the trace has no '{STEP_RANGE}' ranges: was it recorded around parbench's "
                         "measured steps (StepClock)?")
    gpu = is_gpu_trace(events)
    ctx = Context(events)
    in_steps = [e for e in events if e.on_host and inside(host_windows, e.start)]
    windows = host_windows
    if gpu:
        launched = steps_of_device_events(events, host_windows, ctx)
        in_steps += [e for e in launched if e.cat != "gpu_user_annotation"]
        windows = device_step_windows(host_windows, launched)
    comm_events = [e for e in in_steps if is_comm(e, gpu)]
    # gloo runs send/recv on the calling (model) thread: only other threads are communication-only.
    comm_threads = {e.thread for e in comm_events} - ctx.model_threads
    if gpu:
        compute = [e for e in in_steps if e.cat == "kernel" and not is_comm(e, gpu)]
        memcpy = [e for e in in_steps if e.cat in ("gpu_memcpy", "gpu_memset")]
    else:
        compute = [e for e in in_steps if e.thread not in comm_threads and is_cpu_compute(e)]
        memcpy = []
    ranks = group_size_from_trace(trace)
    collectives = [describe_collective(e, gpu, ranks) for e in comm_events]
    comm_by_kind: dict[str, list[iv.Interval]] = defaultdict(list)
    for c in collectives:
        comm_by_kind[c.kind].append(c.interval)
    steps = [step_breakdown(w, _spans(compute), comm_by_kind, _spans(memcpy)) for w in windows]
    ops = op_rows(ctx, compute, comm_events, memcpy, gpu, len(windows))
    return TraceAnalysis("gpu" if gpu else "cpu", steps, collective_rows(collectives), ops)


def steps_of_device_events(events: list[Event], host_windows: list[iv.Interval],
                           ctx: Context) -> dict[Event, int]:
    """Device events by the step whose host range launched them: the host runs ahead of the
    device, so where a kernel ran says nothing about which step it belongs to."""
    out: dict[Event, int] = {}
    starts = [w[0] for w in host_windows]
    for e in events:
        if e.on_host:
            continue
        t = ctx.anchor(e).start
        i = bisect.bisect_right(starts, t) - 1
        if i >= 0 and t < host_windows[i][1]:
            out[e] = i
    return out


def device_step_windows(host_windows: list[iv.Interval], launched: dict[Event, int]) -> list[iv.Interval]:
    """Each step on the device timeline, as StepClock's CUDA events time it: from when the device
    finished the previous step (its first event, for the first step of the trace) to the end of
    its last event. A step that launched nothing keeps its host range."""
    ends: dict[int, float] = defaultdict(lambda: float("-inf"))
    firsts: dict[int, float] = defaultdict(lambda: float("inf"))
    for e, i in launched.items():
        ends[i] = max(ends[i], e.end)
        firsts[i] = min(firsts[i], e.start)
    windows = []
    for i, host in enumerate(host_windows):
        if i not in ends:
            windows.append(host)
            continue
        start = max(host[0], ends[i - 1]) if i - 1 in ends else firsts[i]
        windows.append((start, ends[i]))
    return windows


def _spans(events: list[Event]) -> list[iv.Interval]:
    return [(e.start, e.end) for e in events]


def main(argv: list[str]) -> None:
    if len(argv) != 1:
        sys.exit("usage: python -m parbench.metrics.trace TRACE.json[.gz]")
    result = analyze(load_trace(argv[0]))
    print(f"{result.device} trace, {len(result.steps)} step(s)")
    for key, value in result.metrics().items():
        print(f"  {key:<28} {value:.4g}")
    for row in result.collectives:
        print("  " + " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()))
    print("top ops:")
    for row in result.ops[:15]:
        print(f"  {row['share_pct']:5.1f}%  {row['phase']:<9} {row['layer']:<12} {row['kind']:<7} {row['op'][:60]}")


if __name__ == "__main__":
    main(sys.argv[1:])
