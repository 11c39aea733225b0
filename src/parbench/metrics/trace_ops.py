"""Where each op's time goes in one rank's trace: every operator or kernel attributed to the
training phase (forward, backward, optimizer) and the model layer (`parbench.layer:` ranges) it ran
under, as the per-op, per-layer table of the trace analysis (parbench.metrics.trace)."""

from __future__ import annotations

import bisect
from collections import defaultdict

from parbench.metrics import intervals as iv
from parbench.metrics.timing import STEP_RANGE
from parbench.metrics.trace_events import (BACKWARD_PREFIX, COLLECTIVE_CALL_PREFIXES, LAYER_RANGE_PREFIX, NO_LAYER,
                                           OPTIMIZER_PREFIX, Event, comm_kind)


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
        if inside(self.optimizer, t):
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


def inside(spans: list[iv.Interval], t: float) -> bool:
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
