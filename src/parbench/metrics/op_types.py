"""Op-type shares of one phase (e.g. prefill, decode) from a torch.profiler run.

Modules are labelled with record_function scopes (`parbench.<category>`) while profiling; each
profiled op's self time (device time on GPU, CPU time otherwise) goes to its nearest enclosing
scope, except communication ops, which count as their collective (all_reduce, all_gather, p2p,
broadcast...) wherever they run. A functional collective's wait counts as the collective it
waits for (the last one issued before it). Only the model's thread counts: a backend's threads
(gloo's) work while it waits."""

from __future__ import annotations

from collections import defaultdict
from contextlib import contextmanager
from typing import Iterator

import torch
from torch import nn
from torch.autograd import DeviceType
from torch.autograd.profiler import record_function

from parbench.metrics.timing import STEP_RANGE
from parbench.metrics.trace_events import LAYER_RANGE_PREFIX

SCOPE_PREFIX = "parbench."
COMM_MARKERS = ("c10d", "gloo", "nccl", "shm_")  # shm_: vLLM's CPU collectives (_C::shm_allreduce, ...)
# Substring of a communication op's name -> its category; the first match wins.
COLLECTIVES = (("all_reduce", "all_reduce"), ("allreduce", "all_reduce"), ("all_gather", "all_gather"),
               ("allgather", "all_gather"), ("reduce_scatter", "reduce_scatter"), ("all_to_all", "all_to_all"),
               ("alltoall", "all_to_all"), ("broadcast", "broadcast"), ("send", "p2p"), ("recv", "p2p"),
               ("barrier", "barrier"), ("gather", "gather"))
AFTER_COLLECTIVE = ""  # a wait or a helper op (tensor wrapping) of the last collective issued
# The step range's own self time: inside the step but outside every op. On a pipeline stage it is
# mostly the wait for the other stages (gloo's blocking send/recv wait between ops); elsewhere the
# host's own time between ops. Filing it under "other" made pp2's pies 77-90 % "other".
OUTSIDE_OPS = "outside_ops"  # a metric name part: prefill_op_pct_outside_ops


def scope_name(category: str) -> str:
    return SCOPE_PREFIX + category


@contextmanager
def module_scopes(categories: dict[nn.Module, str]) -> Iterator[None]:
    """Wrap each module's forward in a record_function scope named after its category."""
    handles, open_scopes = [], {}

    def enter(module: nn.Module, _args) -> None:
        scope = record_function(scope_name(categories[module]))
        scope.__enter__()
        open_scopes.setdefault(id(module), []).append(scope)

    def leave(module: nn.Module, _args, _output) -> None:
        open_scopes[id(module)].pop().__exit__(None, None, None)

    for module in categories:
        handles += [module.register_forward_pre_hook(enter), module.register_forward_hook(leave)]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def comm_category(name: str) -> str | None:
    """The collective a communication op performs; None for a compute op; AFTER_COLLECTIVE for a
    wait or helper that belongs to the collective issued before it."""
    lowered = name.lower()
    if not any(marker in lowered for marker in COMM_MARKERS):
        return None
    return next((category for marker, category in COLLECTIVES if marker in lowered), AFTER_COLLECTIVE)


def is_category_scope(name: str) -> bool:
    """A `parbench.<category>` scope; the step range and the layer ranges are no category."""
    return name.startswith(SCOPE_PREFIX) and name != STEP_RANGE and not name.startswith(LAYER_RANGE_PREFIX)


def enclosing(event, is_scope) -> str | None:
    """Name of the nearest range around an event (the event itself included) that is_scope accepts."""
    while event is not None:
        if is_scope(event.name):
            return event.name
        event = event.cpu_parent
    return None


def enclosing_scope(event) -> str:
    """Category of the nearest `parbench.*` scope around an event (the event itself included)."""
    scope = enclosing(event, is_category_scope)
    return scope[len(SCOPE_PREFIX):] if scope else "other"


def enclosing_layer(event) -> str:
    """The model layer (layers.3, norm, ...) whose range holds the event; "-" outside every layer."""
    layer = enclosing(event, lambda name: name.startswith(LAYER_RANGE_PREFIX))
    return layer[len(LAYER_RANGE_PREFIX):].strip() if layer else "-"


def self_time_us(event, on_device: bool) -> float:
    return event.self_device_time_total if on_device else event.self_cpu_time_total


def model_thread_events(events: list) -> list:
    """Host-side events of the thread that ran the model (its scopes): a backend's own threads
    (gloo's) work while the model thread waits, and a kernel's time is already its launching
    op's self device time (the kernel's own event, outside every scope, would count it twice)."""
    host = [e for e in events if e.device_type == DeviceType.CPU]
    threads = {e.thread for e in host if e.name.startswith(SCOPE_PREFIX)}
    return [e for e in host if e.thread in threads] if threads else host


def op_time_by_layer(prof: torch.profiler.profile, on_device: bool) -> dict[tuple[str, str], float]:
    """Microseconds of self time per (layer, category) over the model thread's events of the
    profiled region (layer "-" when no LayerRanges ran, or outside every layer)."""
    totals: dict[tuple[str, str], float] = defaultdict(float)
    last_collective = "other_comm"
    for event in sorted(model_thread_events(list(prof.events())), key=lambda e: e.time_range.start):
        comm = comm_category(event.name)
        if comm == AFTER_COLLECTIVE:
            category = last_collective
        elif comm is not None:
            category = last_collective = comm
        else:
            category = OUTSIDE_OPS if event.name == STEP_RANGE else enclosing_scope(event)
        totals[enclosing_layer(event), category] += self_time_us(event, on_device)
    return dict(totals)


def category_totals(times: dict[tuple[str, str], float]) -> dict[str, float]:
    """(layer, category) times summed over the layers."""
    totals: dict[str, float] = defaultdict(float)
    for (_, category), us in times.items():
        totals[category] += us
    return dict(totals)


def op_time_by_category(prof: torch.profiler.profile, on_device: bool) -> dict[str, float]:
    """Microseconds of self time per category over the model thread's events of the profiled region."""
    return category_totals(op_time_by_layer(prof, on_device))


def shares_pct(times: dict[str, float]) -> dict[str, float]:
    """Each category's percentage of the total (categories with no time left out)."""
    total = sum(times.values())
    return {k: 100 * v / total for k, v in sorted(times.items(), key=lambda kv: -kv[1]) if v > 0} if total else {}
