"""Prefill/decode analysis of an inference engine's Kineto trace: op-type shares per phase and
the per-op and per-layer tables, from what the trace itself records.

An engine marks each of its steps with a range (vLLM: `execute_context_4(256)_generation_0(0)`)
and a profiler run `with_stack=True` records every module call as a `nn.Module: <Class>_<i>`
range. A step's window runs from its range's start to the next step's start, so the sampling
that follows a forward pass belongs to its step. Each op's self time (kernel time on GPU) goes
to the category of the innermost categorised module around it (around its launching op on GPU;
a kernel outside any, as in a compiled model's graph, to the category its name tells) and to the
decoder layer around it; communication ops count as their collective, as in
metrics/op_types.py. The engine that wrote the trace supplies its names (TraceLabels; vLLM's:
workloads/inference/vllm_engine/profile.py).
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass
from typing import Callable

from parbench.metrics.op_types import comm_category, shares_pct
from parbench.metrics.trace_events import NO_LAYER, Event, complete_events, is_cpu_compute, is_gpu_trace
from parbench.metrics.trace_ops import Context, RangeIndex, self_times

MODULE_PREFIX = "nn.Module: "
OTHER = "other"


@dataclass(frozen=True)
class TraceLabels:
    """How an engine's trace names its steps and modules."""

    phase_of_step: Callable[[str], str | None]  # a step range's name -> its phase; None: not a step range
    category_of: Callable[[str], str | None]  # a module class -> its op category (attention, mlp, ...), or None
    layer_class_ending: str  # how the decoder block's class name ends: its index is the layer (`layers.<i>`)
    # A GPU kernel's name -> its category, for kernels outside any categorised module: a compiled model
    # (torch.compile, CUDA graphs) records no module ranges inside its graph, only its kernels.
    kernel_category: Callable[[str], str | None] = lambda name: None


@dataclass
class PhaseAnalysis:
    shares: dict[str, dict[str, float]]  # phase -> category -> % of the phase's op time
    ops: list[dict]  # phase, layer, category, op, calls, total_s, mean_s, share_pct (of the phase)
    layers: list[dict]  # phase, layer, total_s, share_pct (of the phase)
    steps: dict[str, int]  # phase -> steps in the trace


def module_class(event: Event) -> tuple[str, str]:
    """`nn.Module: LlamaDecoderLayer_3` -> ("LlamaDecoderLayer", "3")."""
    name, _, index = event.name.removeprefix(MODULE_PREFIX).rpartition("_")
    return name, index


def step_windows(events: list[Event], labels: TraceLabels) -> list[tuple[float, float, str]]:
    """(start, end, phase) of each step; the last one ends with the trace."""
    marks = sorted((e.start, phase) for e in events if e.on_host and (phase := labels.phase_of_step(e.name)))
    if not marks:
        raise ValueError("the trace has no step ranges of the engine: was it recorded while the engine "
                         "ran batches (e.g. between vLLM's start_profile and stop_profile)?")
    trace_end = max(e.end for e in events)
    ends = [start for start, _ in marks[1:]] + [trace_end]
    return [(start, end, phase) for (start, phase), end in zip(marks, ends)]


class ModuleIndex:
    """The innermost categorised module and the decoder layer around a time point."""

    def __init__(self, events: list[Event], labels: TraceLabels):
        modules = [e for e in events if e.name.startswith(MODULE_PREFIX)]
        self._labels = labels
        self._categorised = RangeIndex([e for e in modules if labels.category_of(module_class(e)[0])])
        self._layers = RangeIndex([e for e in modules if module_class(e)[0].endswith(labels.layer_class_ending)])
        self.found = bool(modules)

    def category(self, t: float) -> str:
        found = self._categorised.innermost(t)
        return self._labels.category_of(module_class(found)[0]) if found is not None else OTHER

    def layer(self, t: float) -> str:
        found = self._layers.innermost(t)
        return f"layers.{module_class(found)[1]}" if found is not None else NO_LAYER


def timed_ops(events: list[Event], gpu: bool) -> list[tuple[Event, float]]:
    """(op, microseconds) to attribute: kernels on GPU; on CPU the self time of operator calls
    and the time of communication calls."""
    if gpu:
        return [(e, e.dur) for e in events if e.cat == "kernel"]
    compute = [e for e in events if is_cpu_compute(e)]
    comm = [e for e in events if e.cat == "cpu_op" and comm_category(e.name) and not is_cpu_compute(e)]
    return list(self_times(compute).items()) + [(e, e.dur) for e in comm]


def analyze_phases(raw: dict, labels: TraceLabels) -> PhaseAnalysis:
    """Shares, per-op and per-layer tables of every phase of the trace's steps."""
    events = complete_events(raw)
    windows = step_windows(events, labels)
    starts = [w[0] for w in windows]
    modules = ModuleIndex(events, labels)
    gpu = is_gpu_trace(events)
    if not modules.found and not gpu:
        raise ValueError("the trace has no module ranges (`nn.Module: ...`): record it with with_stack=True")
    ctx = Context(events) if gpu else None
    groups: dict[tuple[str, str, str, str], list[float]] = defaultdict(list)
    for event, dur in timed_ops(events, gpu):
        t = ctx.anchor(event).start if ctx else event.start
        i = bisect.bisect_right(starts, t) - 1
        if i < 0 or t >= windows[i][1]:
            continue  # outside the engine's steps (start-up, the profiler's own calls)
        category = comm_category(event.name) or modules.category(t)
        if category == OTHER and gpu:
            category = labels.kernel_category(event.name) or OTHER
        groups[(windows[i][2], modules.layer(t), category, event.name)].append(dur)
    return summarise(groups, windows)


def summarise(groups: dict[tuple[str, str, str, str], list[float]],
              windows: list[tuple[float, float, str]]) -> PhaseAnalysis:
    phase_total: dict[str, float] = defaultdict(float)
    by_category: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    by_layer: dict[tuple[str, str], float] = defaultdict(float)
    for (phase, layer, category, _), durations in groups.items():
        phase_total[phase] += sum(durations)
        by_category[phase][category] += sum(durations)
        by_layer[(phase, layer)] += sum(durations)
    ops = [{"phase": phase, "layer": layer, "category": category, "op": op, "calls": len(d),
            "total_s": sum(d) / 1e6, "mean_s": sum(d) / len(d) / 1e6, "share_pct": 100 * sum(d) / phase_total[phase]}
           for (phase, layer, category, op), d in groups.items()]
    layers = [{"phase": phase, "layer": layer, "total_s": us / 1e6, "share_pct": 100 * us / phase_total[phase]}
              for (phase, layer), us in by_layer.items()]
    steps: dict[str, int] = defaultdict(int)
    for *_, phase in windows:
        steps[phase] += 1
    return PhaseAnalysis(shares={phase: shares_pct(dict(table)) for phase, table in by_category.items()},
                         ops=sorted(ops, key=lambda r: (r["phase"], -r["total_s"])),
                         layers=sorted(layers, key=lambda r: (r["phase"], r["layer"])), steps=dict(steps))
