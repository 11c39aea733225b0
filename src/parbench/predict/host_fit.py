"""Host dispatch costs fitted from the host-bound runs `parbench calibrate` makes (the tiny model's, and on a GPU the
1B Llama's, GPT-2 XL's, Qwen3 1.7B's and the 2.5B MoE's checkpointed blocks at 128 tokens: their kernels finish long
before the next is dispatched):

    host seconds = per step + per dispatch x (forward calls + backward ops)
                   + the mode's (full, selective) per replayed layer x the layers a checkpointed step replays
                   + the mode's per replayed call x their forwards' calls
                   + an MoE's per layer x its layer passes (and, checkpointed, its forward's share again)

with each run's calls and ops from its family's counts (models/dispatch_table.py). The runs without
checkpointing (the tiny Llama at two depths, GPT-2- and Qwen3-shaped blocks) fix the first two by
least squares; each mode's checkpointed runs then fix what a replayed layer costs beyond them, per
layer and per call of the forward it replays, by a line through the blocks of four families (the
Llama's, GPT-2's, Qwen3's and an MoE's, 25 to 117 calls; a profile's runs of one family: per call
alone). Much of a replay is fixed cost: on an H200 a fully checkpointed GPT-2 XL layer (25 calls)
costs the host 2.6 ms, a 1B Llama's (55) 3.6 ms, so that per call alone, fitted on the Llama,
GPT-2's steps came out 19-34 % short. Calls, not aten ops: the CPU's op counts are not
CUDA's (an RMSNorm is 7 ops on a CPU, one fused kernel on CUDA), and per CPU-counted op Qwen3's
replay (193 ops to the Llama's 153) came out 20 % above the Llama's, where measured it is 7-13 % below
(docs/results/2026-11-29_replay31.md); counted as CUDA runs them, per op fitted no better than per call across
hosts (docs/results/2026-11-29_selective31.md). A forward call and a backward op cost alike: a split fitted
from these runs put a Qwen3 block's dispatch 35 % too high and a GPT-2 block's 23 % too low, since
their step times spread 10-25 % from p10 to p90. The compiled run gives a compiled layer's dispatch; on two or
more ranks the deeper tiny run under tp and under fsdp what each strategy's wrappers add per dispatch. A tiny MoE's run
(host_moe) gives what its layer takes beyond its counted calls and ops at these figures: its routing's index and scatter
calls and its grouped GEMMs weigh more on the host than a dense block's (H200, 2026-11-29: 5.8 ms a layer of the 2.5B
MoE's without checkpointing against 2.0 of the 1B Llama's, for 1.4 times the calls and ops;
docs/results/2026-11-29_selective31.md)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from parbench.predict.calibration import Calibration
from parbench.predict.host import host_seconds, layer_passes, moe_layer_seconds
from parbench.predict.layout import Layout
from parbench.predict.learn import per_step_and_layer
from parbench.predict.step import predict_step


MEASURABLE_S = 1e-9  # a replayed layer's cost below this is no cost at all (a fit's rounding)


@dataclass(frozen=True)
class HostRun:
    layout: Layout
    step_time_s: float
    host_dispatch_s: float | None = None  # the host's own time to queue the step, where the run logged it


def measured_host(run: HostRun, cal: Calibration) -> float:
    """The run's host time: on a GPU its dispatch (else the whole step); on a CPU what it takes
    beyond the device model."""
    if run.layout.cfg.hardware.device_type != "cpu":
        return run.host_dispatch_s or run.step_time_s
    bare = replace(cal, host_s_per_step=0.0, host_s_per_dispatch=0.0, host_s_per_replayed_call={},
                   host_s_per_replayed_layer={}, host_s_per_layer=0.0, host_s_per_layer_compiled=0.0,
                   host_s_several_ranks={}, host_s_per_moe_layer=0.0)
    return run.step_time_s - predict_step(run.layout, bare).step_time_s


def dispatches(layout: Layout) -> float:
    """Python calls and backward ops one step of this layout dispatches."""
    return host_seconds(layout, Calibration(host_s_per_dispatch=1.0)).total_s


def plain_host(layout: Layout, cal: Calibration, per_step: float, per_dispatch: float) -> float:
    """What a step of this layout dispatches without its checkpoint's replay: per step, per dispatch, and an MoE's
    layers' figure (its forward's share replayed where checkpointed included)."""
    return per_step + per_dispatch * dispatches(layout) + sum(moe_layer_seconds(layout, cal))


def replay_figures(checkpointed: list[HostRun], cal: Calibration, per_step: float,
                   per_dispatch: float) -> tuple[dict, list[str]]:
    """host_s_per_replayed_layer and host_s_per_replayed_call by mode: what each run's host takes beyond its plain
    dispatch, per layer it replays, as a line in the calls a layer replays (per_step_and_layer: neither negative);
    a mode whose runs share one count of calls, per call alone; the modes without runs, or whose fit prices a replayed
    layer at nothing (runs no slower than their plain dispatch), as `cal` has them (the latter with a note)."""
    per_layer, per_call, notes = dict(cal.host_s_per_replayed_layer), dict(cal.host_s_per_replayed_call), []
    for mode in sorted({r.layout.activation_checkpointing for r in checkpointed}):
        points = [(r.layout.dispatch.per_layer.forward_calls,
                   (measured_host(r, cal) - plain_host(r.layout, cal, per_step, per_dispatch)) / layer_passes(r.layout))
                  for r in checkpointed if r.layout.activation_checkpointing == mode]
        line = per_step_and_layer(points) or {"per_step": 0.0, "per_layer": max(0.0, sum(y for _, y in points)
                                                                                 / sum(x for x, _ in points))}
        if line["per_step"] + line["per_layer"] * min(x for x, _ in points) <= MEASURABLE_S:
            notes.append(f"host dispatch: the {mode}-checkpointed runs took no longer than their plain dispatch; "
                         "kept the replay figures there were")
            continue
        per_layer[mode], per_call[mode] = line["per_step"], line["per_layer"]
    return {"host_s_per_replayed_layer": per_layer, "host_s_per_replayed_call": per_call}, notes


def per_step_and_dispatch(runs: list[HostRun], cal: Calibration) -> tuple[float, float] | None:
    """(per step, per dispatch) by least squares over runs of two or more sizes, neither negative
    (learn.per_step_and_layer); None where the runs do not fix them."""
    line = per_step_and_layer([(dispatches(r.layout), measured_host(r, cal)) for r in runs])
    return (line["per_step"], line["per_layer"]) if line.get("per_layer") else None


def strategy_figures(strategies: dict[str, HostRun], cal: Calibration) -> dict:
    """host_s_per_dispatch_by_strategy: what each strategy's run dispatches beyond a plain step of its layout at
    `cal`'s figures, per dispatch (never negative), over the figures `cal` holds; nothing without such runs."""
    if not strategies:
        return {}
    plain = replace(cal, host_s_per_dispatch_by_strategy={})
    costs = {strategy: max(0.0, (measured_host(r, plain) - host_seconds(r.layout, plain).total_s) / dispatches(r.layout))
             for strategy, r in strategies.items()}
    return {"host_s_per_dispatch_by_strategy": {**cal.host_s_per_dispatch_by_strategy, **costs}}


def moe_layer_figure(runs: list[HostRun], cal: Calibration) -> tuple[dict, list[str]]:
    """host_s_per_moe_layer: what the MoE runs' hosts take beyond their counted dispatch at `cal`'s figures, per layer
    pass, on average; without such runs, or where they take no longer, the figure `cal` has, with a note."""
    if not runs:
        kept = f"kept {cal.host_s_per_moe_layer * 1e3:.3g} ms" if cal.host_s_per_moe_layer else "an MoE's layers priced by counts alone"
        return {}, [f"host dispatch: no host_moe run; {kept}"]
    counted = replace(cal, host_s_per_moe_layer=0.0)
    beyond = [(measured_host(r, counted) - host_seconds(r.layout, counted).total_s) / layer_passes(r.layout) for r in runs]
    if sum(beyond) <= MEASURABLE_S:
        return {}, ["host dispatch: the host_moe run took no longer than its counted dispatch; kept the MoE's figure there was"]
    return {"host_s_per_moe_layer": sum(beyond) / len(beyond)}, []


def fit_host(runs: list[HostRun], compiled: HostRun | None, cal: Calibration,
             strategies: dict[str, HostRun] | None = None) -> tuple[dict, list[str]]:
    """The host figures of the calibration, and a note on what the runs left as it was: the dense plain runs' figures,
    what an MoE's layer adds beyond them, then what a checkpointed layer replays (every family's checkpointed runs)."""
    plain = [r for r in runs if not r.layout.cfg.model.experts and r.layout.activation_checkpointing == "none"]
    costs = per_step_and_dispatch(plain, cal)
    if costs is None:  # the strategies' costs beyond the figures kept
        return strategy_figures(strategies or {}, cal), ["host dispatch: the tiny runs without checkpointing do not fix "
                                                         "a cost per step and per dispatch; kept the figures there were"] if runs else []
    per_step, per_dispatch = costs
    fitted: dict = {"host_s_per_step": per_step, "host_s_per_dispatch": per_dispatch}
    moe, notes = moe_layer_figure([r for r in runs if r.layout.cfg.model.experts and r.layout.activation_checkpointing == "none"],
                                  replace(cal, **fitted))
    fitted.update(moe)
    replay, replay_notes = replay_figures([r for r in runs if r.layout.activation_checkpointing != "none"],
                                          replace(cal, **fitted), per_step, per_dispatch)
    fitted.update(replay)
    deepest = max(plain, key=lambda r: r.layout.cfg.model.layers)  # one figure per layer, for a family without counts
    layer = deepest.layout.dispatch.per_layer if deepest.layout.dispatch else None
    fitted["host_s_per_layer"] = per_dispatch * (layer.forward_calls + layer.backward_ops) if layer else 0.0
    if compiled is not None:
        layers = compiled.layout.cfg.model.layers
        fitted["host_s_per_layer_compiled"] = max(0.0, (measured_host(compiled, cal) - per_step) / layers)
    fitted.update(strategy_figures(strategies or {}, replace(cal, **fitted)))
    return fitted, notes + replay_notes
