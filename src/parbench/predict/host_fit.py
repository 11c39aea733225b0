"""Host dispatch costs fitted from the tiny-model runs `parbench calibrate` makes (a tiny model's
step is the host's: its kernels finish long before the next is dispatched). Every eager run gives
one equation in three unknowns,

    host seconds = per step + per call x (forward calls + replayed calls) + per op x backward ops

with each run's calls and ops from its family's counts (models/dispatch_table.py): the tiny Llama at
two depths, under full checkpointing (which replays the forward's calls: per call apart from per
op) and GPT-2- and Qwen3-shaped (other mixes of the two). Runs that cannot tell the two costs apart
(one family and mode at two depths: the runs of a profile from before the others were added) give
one cost per call or op, and the fit says so. The compiled run gives a compiled layer's dispatch."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from parbench.predict.calibration import Calibration
from parbench.predict.costs import host_seconds
from parbench.predict.layout import Layout
from parbench.predict.learn import per_step_and_layer
from parbench.predict.step import predict_step

TIED = "per call = per op: the host runs cannot tell them apart (add host_full and the family runs)"


@dataclass(frozen=True)
class HostRun:
    layout: Layout
    step_time_s: float


def measured_host(run: HostRun, cal: Calibration) -> float:
    """The run's host time: on a GPU the whole step; on a CPU what it takes beyond the device model."""
    if run.layout.cfg.hardware.device_type != "cpu":
        return run.step_time_s
    bare = replace(cal, host_s_per_step=0.0, host_s_per_call=0.0, host_s_per_backward_op=0.0, host_s_per_layer=0.0,
                   host_s_per_layer_compiled=0.0)
    return run.step_time_s - predict_step(run.layout, bare).step_time_s


def units(layout: Layout) -> tuple[float, float]:
    """(Python calls, backward ops) one step of this layout dispatches."""
    one = Calibration(host_s_per_call=1.0)
    calls = host_seconds(layout, one).total_s
    return calls, host_seconds(layout, replace(one, host_s_per_backward_op=1.0)).total_s - calls


def solve(rows: list[tuple[float, float]], host: list[float]) -> tuple[float, float, float] | None:
    """(per step, per call, per op) by least squares; None where the runs do not fix all three or a
    figure comes out negative."""
    a = np.array([[1.0, calls, ops] for calls, ops in rows])
    if np.linalg.matrix_rank(a) < 3:
        return None
    x = np.linalg.lstsq(a, np.array(host), rcond=None)[0]
    return tuple(float(v) for v in x) if (x >= 0).all() else None


def fit_host(eager: list[HostRun], compiled: HostRun | None, cal: Calibration) -> tuple[dict[str, float], list[str]]:
    """The host figures of the calibration, and a note where the runs fix fewer than three."""
    if not eager:
        return {}, []
    rows, host = [units(r.layout) for r in eager], [measured_host(r, cal) for r in eager]
    notes = []
    costs = solve(rows, host)
    if costs is None:
        line = per_step_and_layer([(calls + ops, h) for (calls, ops), h in zip(rows, host)])
        costs = (line.get("per_step", 0.0), line.get("per_layer", 0.0), line.get("per_layer", 0.0))
        notes.append(TIED)
    per_step, per_call, per_op = costs
    fitted = {"host_s_per_step": per_step, "host_s_per_call": per_call, "host_s_per_backward_op": per_op}
    deepest = max(eager, key=lambda r: r.layout.cfg.model.layers)  # the calibration model's layer, for old readers
    layer = deepest.layout.dispatch.per_layer if deepest.layout.dispatch else None
    fitted["host_s_per_layer"] = per_call * layer.forward_calls + per_op * layer.backward_ops if layer else 0.0
    if compiled is not None:
        layers = compiled.layout.cfg.model.layers
        fitted["host_s_per_layer_compiled"] = max(0.0, (measured_host(compiled, cal) - per_step) / layers)
    return fitted, notes
