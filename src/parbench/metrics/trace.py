"""Analysis of one rank's Kineto trace (torch.profiler's Chrome-trace JSON): how each measured
step splits into compute, communication, memory copies and idle time; per-collective time,
bytes and bandwidth; and a per-op, per-layer table.

What counts as what:
  GPU trace (it has `kernel` events): communication = NCCL kernels (`ncclDevKernel_*`,
    `ncclKernel_*`); memcpy = `gpu_memcpy` and `gpu_memset`; compute = every other kernel.
  CPU trace (gloo): communication = `gloo:<collective>` ranges, which gloo's worker threads
    record while a collective runs (gloo runs FSDP's reduce_scatter as an all_reduce, and the
    trace says so); compute = operator calls (`aten::*`, `fsdp::*`, ...) on the other threads,
    except collective calls (`c10d::*`, which only enqueue) and waits (blocked, not computing).
A step is a `parbench.step` range (StepClock records one around each measured step).
Overlap follows HTA: |compute & comm| / |comm|; exposed communication is comm time with no
compute running. `python -m parbench.metrics.trace TRACE.json[.gz]` prints the analysis.
"""

from __future__ import annotations

import bisect
import gzip
import json
import re
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from parbench.metrics import intervals as iv
from parbench.metrics.timing import STEP_RANGE

LAYER_RANGE_PREFIX = "parbench.layer:"  # record_function ranges the profiler puts around model layers
BACKWARD_PREFIX = "autograd::engine::evaluate_function:"
OPTIMIZER_PREFIX = "Optimizer."  # torch.optim records Optimizer.step#AdamW.step, Optimizer.zero_grad#...
PHASES = ("forward", "backward", "optimizer")
NO_LAYER = "-"

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv", "broadcast")
# nccl-tests bus bandwidth factors for n ranks (algbw x factor = busbw).
BUSBW_FACTOR: dict[str, Callable[[int], float]] = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "send_recv": lambda n: 1.0,
}
# Element sizes by the dtype spellings traces use: c10 names on NCCL kernels (BFloat16),
# C++ names in gloo's recorded input types (c10::BFloat16, float, long int).
DTYPE_BYTES = {"float": 4, "float32": 4, "bfloat16": 2, "half": 2, "float16": 2, "double": 8, "float64": 8,
               "long int": 8, "long": 8, "int64": 8, "int": 4, "int32": 4, "short int": 2, "short": 2,
               "int16": 2, "bool": 1, "unsigned char": 1, "byte": 1, "uint8": 1, "signed char": 1,
               "char": 1, "int8": 1, "float8_e4m3fn": 1, "float8_e5m2": 1}
COMM_CALL_PREFIXES = ("c10d::", "_c10d_functional::", "c10d_functional::", "record_param_comms", "nccl:")
COLLECTIVE_CALL_PREFIXES = ("c10d::", "_c10d_functional::", "c10d_functional::")
NON_OPERATOR_PREFIXES = ("autograd::", "profiler::")
# Events on the device timeline. Kineto also mirrors record_function ranges there
# (gpu_user_annotation), shifted to when the GPU ran them: ranges are read from the host only,
# device events are placed in a step by the host range that launched them.
DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation")


@dataclass(frozen=True, eq=False)  # identity hash: events key per-event tables
class Event:
    name: str
    cat: str
    start: float  # microseconds, as in the trace
    end: float
    thread: tuple  # (pid, tid)
    args: dict

    @property
    def dur(self) -> float:
        return self.end - self.start

    @property
    def on_host(self) -> bool:
        return self.cat not in DEVICE_CATS


def load_trace(path: Path | str) -> dict:
    """A Kineto trace as written by torch.profiler (plain or gzipped JSON)."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return json.load(f)


def complete_events(trace: dict) -> list[Event]:
    return [Event(e["name"], e.get("cat", ""), float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)),
                  (e.get("pid"), e.get("tid")), e.get("args", {}))
            for e in trace.get("traceEvents", []) if e.get("ph") == "X" and "ts" in e]


def collective_type(raw: str) -> str:
    """all_reduce, all_gather, ... from a kernel name, a gloo range or a c10d collective name."""
    s = re.sub("[^a-z]", "", raw.lower())
    for prefix in ("nccldevkernel", "ncclkernel", "nccl", "gloo"):
        s = s.removeprefix(prefix)
    for key, name in (("allreduce", "all_reduce"), ("allgather", "all_gather"),
                      ("reducescatter", "reduce_scatter"), ("alltoall", "all_to_all"),
                      ("sendrecv", "send_recv"), ("send", "send_recv"), ("recv", "send_recv"),
                      ("broadcast", "broadcast")):
        if s.startswith(key):
            return name
    return "other"


def comm_kind(e: Event) -> str:
    """The collective a communication event ran: NCCL kernels carry the c10d name as an argument."""
    return collective_type(str(e.args.get("Collective name") or e.name))


def is_gpu_trace(events: list[Event]) -> bool:
    return any(e.cat == "kernel" for e in events)


def is_comm(e: Event, gpu: bool) -> bool:
    if gpu:
        return e.cat == "kernel" and e.name.lower().startswith("nccl")
    return e.name.startswith("gloo:")


def is_comm_call(e: Event) -> bool:
    """CPU-side collective calls and waits: neither compute nor the communication itself."""
    return e.name.startswith(COMM_CALL_PREFIXES) or "wait" in e.name.lower()


def is_cpu_compute(e: Event) -> bool:
    """An operator call (aten::mm, fsdp::chunk_cat, ...) that is not a collective call or wait.
    Autograd nodes and Python-level ranges are left out: they wrap operators, and also the time
    their thread blocks on a collective (FSDP's post-backward waits for its reduce-scatter)."""
    return (e.cat == "cpu_op" and "::" in e.name and not e.name.startswith(NON_OPERATOR_PREFIXES)
            and not is_comm_call(e))


def group_size_from_trace(trace: dict) -> int | None:
    """The process-group size when every multi-rank group of the trace has the same one."""
    sizes = {g.get("pg_size") for g in trace.get("distributedInfo", {}).get("pg_config", [])}
    sizes = {s for s in sizes if isinstance(s, int) and s > 1}
    return sizes.pop() if len(sizes) == 1 else None


def itemsize(dtype: Any) -> int | None:
    return DTYPE_BYTES.get(str(dtype).lower().removeprefix("c10::")) if dtype is not None else None


@dataclass(frozen=True)
class Collective:
    kind: str
    interval: iv.Interval
    nbytes: float | None  # nccl-tests "size": total bytes (all_gather: output, reduce_scatter: input)
    ranks: int | None


def describe_collective(e: Event, gpu: bool, default_ranks: int | None) -> Collective:
    """Type, size and group size of a communication event, from what the trace records."""
    if gpu:
        kind = comm_kind(e)
        ranks = e.args.get("Group size") or default_ranks
        size = itemsize(e.args.get("dtype"))
        n_in, n_out = e.args.get("In msg nelems"), e.args.get("Out msg nelems")
        nbytes = max(n_in or 0, n_out or 0) * size if size and (n_in or n_out) else None
        return Collective(kind, (e.start, e.end), nbytes, ranks)
    kind = comm_kind(e)
    dims, types = e.args.get("Input Dims"), e.args.get("Input type")
    nbytes = None
    if dims and types and itemsize(types[0]):
        elements = 1
        for d in dims[0]:
            elements *= d
        # gloo records the local input: an all_gather moves ranks x that.
        scale = default_ranks if kind == "all_gather" else 1
        nbytes = elements * itemsize(types[0]) * scale if scale else None
    return Collective(kind, (e.start, e.end), nbytes, default_ranks)


class RangeIndex:
    """Innermost enclosing range of a time point, over ranges that nest within each thread."""

    def __init__(self, events: list[Event]):
        self._threads: dict[tuple, tuple[list[float], list[Event], list[int]]] = {}
        by_thread: dict[tuple, list[Event]] = defaultdict(list)
        for e in events:
            by_thread[e.thread].append(e)
        for thread, evs in by_thread.items():
            evs.sort(key=lambda e: (e.start, -e.end))
            parents, stack = [], []
            for i, e in enumerate(evs):
                while stack and evs[stack[-1]].end <= e.start:
                    stack.pop()
                parents.append(stack[-1] if stack else -1)
                stack.append(i)
            self._threads[thread] = ([e.start for e in evs], evs, parents)

    def innermost(self, t: float) -> Event | None:
        best = None
        for starts, evs, parents in self._threads.values():
            i = bisect.bisect_right(starts, t) - 1
            while i >= 0 and evs[i].end <= t:
                i = parents[i]
            if i >= 0 and (best is None or evs[i].start > best.start):
                best = evs[i]
        return best


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


class Context:
    """Where a trace event belongs: its CPU anchor (the op that launched a kernel), phase and layer.

    Phase: inside an Optimizer.* range -> optimizer; inside an autograd evaluate_function ->
    backward; otherwise forward. A collective that gloo runs on a worker thread is anchored to
    the last collective call (c10d::*) the model's threads made before it started: the call that
    queued it, or one queued after it in the same phase."""

    def __init__(self, events: list[Event]):
        host = [e for e in events if e.on_host]
        # Kernels name the op that launched them by External id; the runtime call by correlation.
        self.ops_by_external_id = {e.args["External id"]: e for e in host
                                   if e.cat == "cpu_op" and "External id" in e.args}
        self.launches = {e.args["correlation"]: e for e in host
                         if e.cat.startswith("cuda_") and "correlation" in e.args}
        optimizer = [e for e in host if e.name.startswith(OPTIMIZER_PREFIX)]
        self.optimizer = iv.union((e.start, e.end) for e in optimizer)
        backward = [e for e in host if e.name.startswith(BACKWARD_PREFIX)]
        self.backward = RangeIndex(backward)
        layers = [e for e in host if e.name.startswith(LAYER_RANGE_PREFIX)]
        self.layers = RangeIndex(layers)
        self.model_threads = {e.thread for e in backward + optimizer + layers}
        self.model_threads |= {e.thread for e in host if e.name == STEP_RANGE}
        self.calls = sorted((e for e in host if e.thread in self.model_threads
                             and e.name.startswith(COLLECTIVE_CALL_PREFIXES) and "wait" not in e.name),
                            key=lambda e: e.start)
        self.call_starts = [e.start for e in self.calls]
        self.layer_of_sequence = self._forward_layers(events)

    def _forward_layers(self, events: list[Event]) -> dict[int, str]:
        """Layer of each forward autograd node, by sequence number (backward ops carry the same)."""
        layers: dict[int, str] = {}
        for e in events:
            seq = e.args.get("Sequence number")
            if e.cat == "cpu_op" and seq is not None and seq not in layers and not e.name.startswith(BACKWARD_PREFIX):
                layer = self.layers.innermost(e.start)
                if layer is not None:
                    layers[seq] = layer.name.removeprefix(LAYER_RANGE_PREFIX).strip()
        return layers

    def anchor(self, e: Event) -> Event:
        """The CPU op behind an event: the launching op of a kernel or copy, the collective call
        before a worker thread's collective, else the event itself."""
        if not e.on_host:
            return (self.ops_by_external_id.get(e.args.get("External id"))
                    or self.launches.get(e.args.get("correlation")) or e)
        if e.thread not in self.model_threads:
            i = bisect.bisect_right(self.call_starts, e.start) - 1
            return self.calls[i] if i >= 0 else e
        return e

    def phase(self, anchor: Event) -> str:
        t = anchor.start
        if _inside(self.optimizer, t):
            return "optimizer"
        return "backward" if self.backward.innermost(t) is not None else "forward"

    def layer(self, anchor: Event, phase: str) -> str:
        t = anchor.start
        found = self.layers.innermost(t)
        if found is not None:
            return found.name.removeprefix(LAYER_RANGE_PREFIX).strip()
        if phase == "backward":
            node = self.backward.innermost(t)
            if node is not None:
                return self.layer_of_sequence.get(node.args.get("Sequence number"), NO_LAYER)
        return NO_LAYER


def _inside(spans: list[iv.Interval], t: float) -> bool:
    i = bisect.bisect_right(spans, (t, float("inf"))) - 1
    return i >= 0 and spans[i][0] <= t < spans[i][1]


def self_times(events: list[Event]) -> dict[Event, float]:
    """Duration minus direct children, for nested CPU ops of each thread."""
    out: dict[Event, float] = {}
    by_thread: dict[tuple, list[Event]] = defaultdict(list)
    for e in events:
        by_thread[e.thread].append(e)
    for evs in by_thread.values():
        evs.sort(key=lambda e: (e.start, -e.end))
        stack: list[Event] = []
        for e in evs:
            while stack and stack[-1].end <= e.start:
                stack.pop()
            out[e] = e.dur
            if stack:
                out[stack[-1]] -= min(e.end, stack[-1].end) - e.start
            stack.append(e)
    return out


@dataclass
class TraceAnalysis:
    device: str  # gpu | cpu
    steps: list[StepBreakdown]
    collectives: list[dict]
    ops: list[dict]  # phase, layer, op, kind, calls, total_s, mean_s, share_pct

    def metrics(self) -> dict[str, float]:
        return breakdown_metrics(self.steps)


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
    in_steps = [e for e in events if e.on_host and _inside(host_windows, e.start)]
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


def op_rows(ctx: Context, compute: list[Event], comm: list[Event], memcpy: list[Event], gpu: bool,
            n_steps: int) -> list[dict]:
    """Per (phase, layer, op) time: kernel time on GPU, self time of CPU ops on CPU."""
    times = self_times(compute) if not gpu else {e: e.dur for e in compute}
    kinds = [(times, "compute"), ({e: e.dur for e in comm}, "comm"), ({e: e.dur for e in memcpy}, "memcpy")]
    groups: dict[tuple[str, str, str, str], list[float]] = defaultdict(list)
    for durations, kind in kinds:
        for e, dur in durations.items():
            anchor = ctx.anchor(e)
            phase = ctx.phase(anchor)
            name = comm_kind(e) if kind == "comm" else anchor.name
            groups[(phase, ctx.layer(anchor, phase), name, kind)].append(dur)
    total = sum(sum(d) for d in groups.values()) or 1.0
    rows = [{"phase": phase, "layer": layer, "op": op, "kind": kind, "calls": len(d),
             "calls_per_step": len(d) / n_steps, "total_s": sum(d) / 1e6, "mean_s": sum(d) / len(d) / 1e6,
             "share_pct": 100 * sum(d) / total}
            for (phase, layer, op, kind), d in groups.items()]
    return sorted(rows, key=lambda r: -r["total_s"])


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
