"""The host's side of an eager or compiled training step: what it dispatches (the family's calls and ops,
models/dispatch_table.py), at the calibrated cost of each, with what checkpointing replays and what an MoE's layers add;
the device's idle gaps between kernels; and how much of the dispatch the device waits for."""

from __future__ import annotations

from dataclasses import dataclass

from parbench.predict.calibration import IDLE_UNIT, Calibration, step_mode
from parbench.predict.costs import Compute
from parbench.predict.layout import Layout


@dataclass(frozen=True)
class Host:
    """Seconds the host spends dispatching one step, by the phase the device runs them in."""

    forward_s: float  # the Python forward's torch calls (and an MoE layer's share beyond them)
    backward_s: float  # the autograd engine's ops, the checkpointed blocks' replay (and an MoE layer's share)
    step_s: float  # the rest: the loop, the optimizer's launch; or the whole step where not split
    forward_dispatches: float = 0.0  # what the phases queue (a counted call or op standing for a kernel); 0: not split
    backward_dispatches: float = 0.0

    @property
    def total_s(self) -> float:
        return self.forward_s + self.backward_s + self.step_s


@dataclass(frozen=True)
class Dispatches:
    """What the host dispatches in one eager step: the Python forward's torch calls, the backward's
    aten ops, and what a checkpointed backward replays: the blocks' layer passes and their forward calls."""

    calls: float
    ops: float
    replayed_calls: float
    replayed_layers: float


def layer_passes(layout: Layout) -> float:
    """Layers of the stage times micro-batches: how many times a step runs a block."""
    return layout.cfg.model.layers / layout.dims.pp * layout.microbatches


def eager_dispatches(layout: Layout) -> Dispatches | None:
    """The family's counts per layer and per step (layout.dispatch) over the step; None: not counted."""
    counts = layout.dispatch
    if counts is None:
        return None
    passes, layer, step = layer_passes(layout), counts.per_layer, counts.per_step
    replayed = passes if layout.activation_checkpointing != "none" else 0.0
    return Dispatches(layer.forward_calls * passes + step.forward_calls * layout.microbatches,
                      layer.backward_ops * passes + step.backward_ops * layout.microbatches,
                      layer.forward_calls * replayed, replayed)


def idle_units(layout: Layout) -> tuple[float, float]:
    """(forward, backward) units of a step's idle gaps: an eager step's dispatches (the forward's
    calls; the backward's ops and replayed calls), a compiled step's layer passes (a third forward)."""
    if layout.compiled:
        return layer_passes(layout) / 3, layer_passes(layout) * 2 / 3
    dispatches = eager_dispatches(layout)
    return (dispatches.calls, dispatches.ops + dispatches.replayed_calls) if dispatches else (0.0, 0.0)


@dataclass(frozen=True)
class DeviceIdle:
    """A GPU's idle gaps between a step's kernels (Calibration.device_idle_s): at the step's start,
    and among the forward's and the backward's kernels; 0 where not measured."""

    step_s: float = 0.0
    forward_s: float = 0.0
    backward_s: float = 0.0

    @property
    def total_s(self) -> float:
        return self.step_s + self.forward_s + self.backward_s


def device_idle(layout: Layout, cal: Calibration) -> DeviceIdle:
    mode = step_mode(layout.compiled)
    fit = cal.device_idle_s.get(mode, {})
    per_unit = fit.get(IDLE_UNIT[mode], 0.0)
    forward, backward = idle_units(layout)
    return DeviceIdle(fit.get("per_step", 0.0), per_unit * forward, per_unit * backward)


def host_seconds(layout: Layout, cal: Calibration) -> Host:
    """Dispatch of one step: the family's calls and ops (layout.dispatch) at the calibrated cost of
    each under the layout's strategies and on its ranks (Calibration.host_figures), per layer of the stage and
    micro-batch and per micro-batch, and what a checkpointed layer adds to the backward: per layer replayed and per
    call of the forward it replays (the checkpoint's bookkeeping and, selective, its policy's on each op), and what an
    MoE's layers add (moe_layer_seconds); a compiled step, a profile without those costs or a family without counts: per
    step plus per layer, unsplit."""
    dispatches, ranks = eager_dispatches(layout), layout.dims.world_size
    per_step = cal.host_figures(ranks)["per_step"]
    if layout.compiled or not cal.host_s_per_dispatch or dispatches is None:
        per_layer = (layout.compiled and cal.host_s_per_layer_compiled) or cal.host_s_per_layer
        return Host(0.0, 0.0, per_step + per_layer * layer_passes(layout))
    mode = layout.activation_checkpointing
    checkpointed = (cal.host_s_per_replayed_call.get(mode, 0.0) * dispatches.replayed_calls
                    + cal.host_s_per_replayed_layer.get(mode, 0.0) * dispatches.replayed_layers)
    per_dispatch = cal.dispatch_seconds(layout.host_strategies, ranks)
    moe_forward, moe_backward = moe_layer_seconds(layout, cal)
    return Host(per_dispatch * dispatches.calls + moe_forward, per_dispatch * dispatches.ops + checkpointed + moe_backward,
                per_step, dispatches.calls, dispatches.ops + dispatches.replayed_calls)


def moe_layer_seconds(layout: Layout, cal: Calibration) -> tuple[float, float]:
    """(forward, backward) host seconds an MoE's layers add beyond their counted dispatch (Calibration.host_s_per_moe_layer),
    split between the phases as a layer's calls and ops are (an assumption: the calibration's one run does not split
    it; call 1 of docs/results/2026-11-29_selective31.md put about half of the 2.5B MoE's eager dispatch in its
    forward, this split 40 % of the extra); a checkpointed backward replays the forward's share."""
    if not layout.cfg.model.experts or not cal.host_s_per_moe_layer or layout.dispatch is None:
        return 0.0, 0.0
    layer = layout.dispatch.per_layer
    total = cal.host_s_per_moe_layer * layer_passes(layout)
    forward = total * layer.forward_calls / (layer.forward_calls + layer.backward_ops)
    return forward, total - forward + (forward if layout.activation_checkpointing != "none" else 0.0)


LAUNCH_QUEUE = 1024  # kernels CUDA queues for a device before a launch blocks the host


def queued_seconds(device_s: float, dispatches: float) -> float:
    """Device seconds of a phase the launch queue holds: LAUNCH_QUEUE of its dispatches, at most all of them."""
    return device_s * min(1.0, LAUNCH_QUEUE / dispatches) if dispatches else 0.0


def exposed_host_seconds(compute: Compute, rest_s: float, host: Host, on_cpu: bool,
                         idle: DeviceIdle = DeviceIdle()) -> float:
    """What dispatch adds to the device's step (compute and its idle gaps, then `rest_s` of bubble and
    exposed communication, after the backward's kernels). A CPU runs each op as the host dispatches it: all
    of it. A GPU runs what the host queued, and the loop reads each step a step late without synchronising
    the stream, so the host runs ahead across phases and steps as far as the launch queue lets it: a step
    lasts the longer of its device work (gaps included) and its whole dispatch, and, where the dispatch is
    split by phase, at least a phase's kernels plus what the host dispatches before the next phase's kernels
    can run, less what the queue held of the first when the host began it (a host slow in the backward, fast
    in the forward, makes the device wait for the backward's dispatch once the forward's queued kernels have
    run). The optimizer's kernels run while the host dispatches the next forward, so they count with the
    forward's; the loop's own part and the optimizer's launch (step_s) come between the backward's dispatch
    and the next forward's. docs/results/2026-12-07_loop31.md measured it against the rule it replaced
    (each phase the longer of its kernels and its dispatch)."""
    if on_cpu:
        return host.total_s
    forward = compute.forward_s + compute.optimizer_s + idle.forward_s + idle.step_s
    backward = compute.total_s - compute.forward_s - compute.optimizer_s + idle.backward_s
    host_side = host.total_s
    if host.forward_dispatches or host.backward_dispatches:
        host_side = max(host_side,
                        forward + host.backward_s - queued_seconds(forward, host.forward_dispatches) + rest_s,
                        backward + rest_s + host.step_s + host.forward_s
                        - queued_seconds(backward, host.backward_dispatches))
    return max(0.0, host_side - (forward + backward + rest_s))
