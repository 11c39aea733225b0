"""The model's terms fitted from the training runs `parbench calibrate` makes, one term per run, in
an order where each run adds one unknown to what the earlier ones fixed:

    (attention's rate across sequence lengths comes from its microbenchmark: microbench_fits.py)
    <mode>_none, <mode>_deep  (a GPU's, profiled: their kernels by kind) the optimizer's kernels over its
                     modelled time -> the optimizer factor; the step beyond its kernels at two depths ->
                     the device's idle gaps per step and per dispatch (eager) or per layer (compiled)
    eager_none       the rest of an eager step beyond GEMMs, attention, optimizer -> eager element-wise factor
    compiled_none    the same for a compiled step -> compiled element-wise factor
    <mode>_qk_norm   the mode's none run with Qwen3's q and k norms, beyond it -> their factor per byte
    <mode>_full/selective   the step beyond the mode's none run -> share of the forward it recomputes
    host_2_layers    a tiny model's peak beyond its tensors -> the runtime's memory overhead
    eager/compiled_full and _full_half   (the same at half the batch) peak beyond the states, the (small)
                     saved block inputs and the casts -> bytes per logit and per element of the head's gradient
    <mode>_none/selective   peak beyond the states and logits -> scale of the modelled activations
    infer_<n>_layers two depths of the native engine: TTFT (a GPU: all dispatch, a CPU: beyond the
                     device's work) and TPOT beyond the decode's roofline -> inference host per step, per layer
    infer_tiny_<n>_layers  (a GPU's) the tiny model at two depths: TPOT -> a decode step's launch and kernel
                     latencies per step (and per layer, where no decode GEMMs' run times the weights: then
                     the deeper infer_<n>_layers' TPOT -> the weights' read factor over a stream)
    infer_kv_cache   (a CPU's) a large batch, long prompts: TPOT beyond weights and host -> the KV cache's read factor

Every prediction is linear in the term being fitted (the term multiplies one part of the step or
of the memory), so two predictions give the value that matches the run."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Callable

from parbench.metrics.fits import fit_line
from parbench.metrics import KERNEL_TIME
from parbench.predict.calibration import IDLE_UNIT, Calibration, mode_key, step_mode
from parbench.predict.costs import optimizer_seconds
from parbench.predict.host import idle_units
from parbench.predict.inference import predict_inference
from parbench.predict.layout import Layout
from parbench.predict.memory import weight_matrices
from parbench.predict.step import predict_step
from parbench.workloads.specs.inference import prefill_graphed


@dataclass(frozen=True)
class Run:
    """One calibration run: its layout and what it measured."""

    layout: Layout
    step_time_s: float
    peak_gb: float
    kernels: dict[str, float] = field(default_factory=dict)  # a profiled run's kernel_time_s metrics


@dataclass(frozen=True)
class InferenceRun:
    """One calibration run of the native inference engine: its layout and median TTFT and TPOT."""

    layout: Layout
    ttft_s: float
    tpot_s: float


Setter = Callable[[Calibration, float], Calibration]
PROBES = (50.0, 100.0)
# Two runs tell two terms apart where their sensitivities to them are further from parallel than this
# (|det| over the product of the two sensitivity vectors' lengths: the sine of the angle between them).
MIN_PAIR_CONDITIONING = 0.05
ROUNDING = 1e-6  # bytes per element: a fit this far below 0 is 0
HEAD_APART = 0.1


def step_time(layout: Layout, cal: Calibration) -> float:
    return predict_step(layout, cal).step_time_s


def peak_memory(layout: Layout, cal: Calibration) -> float:
    return predict_step(layout, cal).memory.total_gb


def solve(predicted: Callable[[Calibration], float], measured: float, cal: Calibration, setter: Setter) -> float:
    """The value x of a term that the prediction (linear in x) needs to equal the measured figure.
    The two probes are large, so that the part the term scales is the one that counts (the peak
    memory is the larger of two moments; a GPU's host time counts only beyond the device's)."""
    low, high = PROBES
    at_low, at_high = predicted(setter(cal, low)), predicted(setter(cal, high))
    return low + (measured - at_low) * (high - low) / (at_high - at_low) if at_high != at_low else math.nan


def solve_pair(predicted: tuple[Callable[[Calibration], float], Callable[[Calibration], float]],
               measured: tuple[float, float], cal: Calibration, setters: tuple[Setter, Setter]) -> tuple[float, float]:
    """The values (x, y) of two terms that two predictions (each linear in both) need to equal their
    measured figures; NaN where the runs cannot tell the terms apart."""
    low, high = PROBES
    base = setters[1](setters[0](cal, low), low)
    at_base = [f(base) for f in predicted]
    dx = [(f(setters[0](base, high)) - p) / (high - low) for f, p in zip(predicted, at_base)]
    dy = [(f(setters[1](base, high)) - p) / (high - low) for f, p in zip(predicted, at_base)]
    det = dx[0] * dy[1] - dx[1] * dy[0]
    if abs(det) <= MIN_PAIR_CONDITIONING * math.hypot(*dx) * math.hypot(*dy):
        return math.nan, math.nan
    r = [m - p for m, p in zip(measured, at_base)]
    return low + (r[0] * dy[1] - r[1] * dy[0]) / det, low + (dx[0] * r[1] - dx[1] * r[0]) / det


def keyed(field: str, key: str) -> Setter:
    """A setter of one entry of a per-mode dict of the calibration."""
    return lambda cal, x: replace(cal, **{field: {**getattr(cal, field), key: x}})


class Learner:
    """Fits term after term into a calibration; a fit that comes out non-positive or non-finite
    keeps the figure there was (memory_pair: sets its second term 0) and says so in `notes`."""

    def __init__(self, cal: Calibration, runs: dict[str, Run]):
        self.cal, self.runs, self.notes = cal, runs, []

    def fit(self, what: str, predicted: Callable[[Calibration], float], measured: float, setter: Setter) -> None:
        x = solve(predicted, measured, self.cal, setter)
        if math.isfinite(x) and x > 0:
            self.cal = setter(self.cal, x)
        else:
            self.notes.append(f"{what}: the fit gave {x:.3g}, kept the figure there was")

    def time_term(self, run: str, what: str, setter: Setter) -> None:
        if run in self.runs:
            r = self.runs[run]
            self.fit(what, lambda cal: step_time(r.layout, cal), r.step_time_s, setter)

    def memory_term(self, run: str, what: str, setter: Setter) -> None:
        if run in self.runs:
            r = self.runs[run]
            self.fit(what, lambda cal: peak_memory(r.layout, cal), r.peak_gb, setter)

    def memory_pair(self, runs: tuple[str, str], terms: tuple[tuple[str, Setter], tuple[str, Setter]]) -> None:
        """Two terms from two runs' peaks at once (solve_pair); without the second run, or where the pair
        does not fit (the first term not positive), the first term alone from the first run and the
        second 0. The second may be 0: a fit a rounding error below it is 0."""
        (what, setter), (second, second_setter) = terms
        if all(r in self.runs for r in runs):
            rs = [self.runs[r] for r in runs]
            x, y = solve_pair((lambda cal: peak_memory(rs[0].layout, cal), lambda cal: peak_memory(rs[1].layout, cal)),
                              (rs[0].peak_gb, rs[1].peak_gb), self.cal, (setter, second_setter))
            if math.isfinite(x) and math.isfinite(y) and x > 0 and y > -ROUNDING:
                self.cal = second_setter(setter(self.cal, x), max(y, 0.0))
                return
            self.notes.append(f"{what} and {second}: the fit of {' and '.join(runs)} gave {x:.3g} and {y:.3g}; "
                              f"{second} set 0")
        self.cal = second_setter(self.cal, 0.0)
        self.memory_term(runs[0], what, setter)


def head_apart(runs: dict[str, Run], run: str) -> bool:
    """Whether the run's output head is so much larger than the overhead run's that the head's bytes per
    element are not the overhead again (on a CPU both are the tiny model)."""
    if run not in runs or "host_2_layers" not in runs:
        return run in runs
    heads = [weight_matrices(runs[r].layout)[2] for r in (run, "host_2_layers")]
    return heads[1] < HEAD_APART * heads[0]


def device_terms(cal: Calibration, runs: dict[str, Run]) -> tuple[Calibration, list[str]]:
    """From the profiled runs (their kernels by kind): the optimizer factor, the optimizer's kernels over
    the model's time of them; and by mode, the device's idle time (the step beyond its kernels, its
    pipeline bubble and its exposed communication) per step and per idle unit (host.idle_units), least
    squares over the mode's profiled depths with neither negative. A GPU's runs without kernel times
    (profiled elsewhere, or without CUPTI) keep the figures there were, and say so."""
    profiled = {name: r for name, r in runs.items() if r.kernels.get(f"{KERNEL_TIME}/optimizer")}
    if not profiled:
        on_gpu = any(r.layout.cfg.hardware.device_type != "cpu" for r in runs.values())
        note = "optimizer factor and device idle: no run timed its kernels; kept the figures there were"
        return cal, [note] if on_gpu else []
    modelled = sum(optimizer_seconds(r.layout, replace(cal, optimizer_factor=1.0)) for r in profiled.values())
    cal = replace(cal, optimizer_factor=sum(r.kernels[f"{KERNEL_TIME}/optimizer"] for r in profiled.values()) / modelled)
    idle, notes = dict(cal.device_idle_s), []
    for mode in ("eager", "compiled"):
        points = [(sum(idle_units(r.layout)), r.step_time_s - r.kernels[KERNEL_TIME] - beyond_compute(r.layout, cal))
                  for r in profiled.values() if step_mode(r.layout.compiled) == mode]
        fitted = per_step_and_layer(points) if len({x for x, _ in points}) > 1 else {}
        if fitted:
            idle[mode] = {"per_step": fitted["per_step"], IDLE_UNIT[mode]: fitted["per_layer"]}
        elif points:
            notes.append(f"{mode} device idle: one profiled depth; kept the figures there were")
    return replace(cal, device_idle_s=idle), notes


def beyond_compute(layout: Layout, cal: Calibration) -> float:
    """The model's pipeline bubble and exposed communication of a step: device time that no compute kernel fills."""
    p = predict_step(layout, replace(cal, device_idle_s={}))
    return p.bubble_s + p.exposed_comm_s


def learn(cal: Calibration, runs: dict[str, Run]) -> tuple[Calibration, list[str]]:
    """The calibration with every term the runs measure fitted; notes on the terms kept."""
    cal, device_notes = device_terms(cal, runs)
    lr = Learner(cal, runs)
    lr.notes += device_notes
    for mode in ("eager", "compiled"):
        lr.time_term(f"{mode}_none", f"{mode} element-wise factor", keyed("elementwise_factor", mode))
        lr.time_term(f"{mode}_qk_norm", f"{mode} q/k norm factor", keyed("qk_norm_factor", mode))
        for ac in ("selective", "full"):
            key = mode_key(mode == "compiled", ac)
            lr.time_term(f"{mode}_{ac}", f"{key} recompute share", keyed("recompute", key))
    lr.memory_term("host_2_layers", "memory overhead", lambda c, v: replace(c, memory_overhead_gb=v))
    for mode in ("eager", "compiled"):
        logits = (f"{mode} bytes per logit", keyed("logits_bytes", mode))
        head = (f"{mode} bytes per element of the head", keyed("head_grad_bytes", mode))
        # the overhead's tiny run holds the head too: only a larger calibration model's tells the two apart
        pair = (f"{mode}_full", f"{mode}_full_half" if head_apart(runs, f"{mode}_full") else "")
        lr.memory_pair(pair, (logits, head))
        for ac in ("none", "selective"):
            key = mode_key(mode == "compiled", ac)
            lr.memory_term(f"{mode}_{ac}", f"{key} activation scale", keyed("activation_scale", key))
    return lr.cal, lr.notes


def per_step_and_layer(points: list[tuple[float, float]]) -> dict[str, float]:
    """(layers, seconds) at two or more depths -> seconds per step and per layer, least squares with
    neither negative: a line, else one through the origin, else a constant."""
    xs, ys = [x for x, _ in points], [y for _, y in points]
    line = fit_line(xs, ys)
    if line is None:
        return {}
    if line.slope >= 0 and line.intercept >= 0:
        return {"per_step": line.intercept, "per_layer": line.slope}
    through_origin = sum(x * y for x, y in points) / sum(x * x for x in xs)
    if line.intercept < 0 and through_origin > 0:
        return {"per_step": 0.0, "per_layer": through_origin}
    return {"per_step": max(0.0, sum(ys) / len(ys)), "per_layer": 0.0}


INFERENCE_ROUNDS = 6


@dataclass(frozen=True)
class InferenceRuns:
    """The calibration's native-engine runs, by what each fixes."""

    depths: list[InferenceRun]  # the calibration model at two depths: the prefill's dispatch
    # The tiny model at two depths (a GPU's): its decode step is the launch, the copy and the kernels'
    # latencies, per step and per layer; without them the depths give those too.
    tiny: list[InferenceRun] = field(default_factory=list)
    kv_cache: InferenceRun | None = None  # a large batch with long prompts: the KV cache's read factor
    graphs: list[InferenceRun] = field(default_factory=list)  # the depths replaying their prefills (a GPU's)


def inference_host(cal: Calibration, runs: InferenceRuns) -> Calibration:
    """Prefill host time per step and per layer from the calibration model's depths (its prefills launched
    op by op). A decode step's and a replayed prefill's from the tiny model's depths (else, for a decode
    step, from the calibration model's); their time per layer from the calibration model's depths (for a
    decode step where the profile times the decode GEMMs by their size, for a replay where those depths
    replay their prefills): a layer of its width costs more than the tiny model's beyond its GEMMs and
    attention."""
    bare = replace(cal, prefill_host_s={}, decode_host_s={}, prefill_graph_host_s={})

    def beyond_device(r: InferenceRun) -> tuple[float, float, float]:
        p = predict_inference(r.layout.cfg, r.layout.dims, bare)
        # a GPU's launched prefill is the dispatch it waits for; a replayed one (and a CPU's) adds its kernels
        waits_on_dispatch = r.layout.cfg.hardware.device_type != "cpu" and not prefill_graphed(r.layout.cfg)
        return (r.layout.cfg.model.layers / r.layout.dims.pp,
                r.ttft_s - sum(p.prefill.comm_s.values()) - (0.0 if waits_on_dispatch else p.prefill.device_s),
                r.tpot_s - sum(p.decode.comm_s.values()) - p.decode.device_s)

    def fit(runs_: list[InferenceRun], phase: int) -> dict[str, float]:  # phase 1: the prefill's, 2: a decode step's
        return per_step_and_layer([(point[0], point[phase]) for point in map(beyond_device, runs_)])

    def layer_of(tiny: dict[str, float], wide: dict[str, float]) -> dict[str, float]:
        return {**tiny, "per_layer": wide["per_layer"]} if tiny and wide else tiny

    decode, graph = fit(runs.depths, 2), {}
    if len(runs.tiny) > 1:
        decode = layer_of(fit(runs.tiny, 2), decode if cal.decode_gemm_s else {})
        if all(prefill_graphed(r.layout.cfg) for r in runs.tiny):
            graph = layer_of(fit(runs.tiny, 1), fit(runs.graphs, 1))
    return replace(cal, prefill_host_s=fit(runs.depths, 1), decode_host_s=decode, prefill_graph_host_s=graph)


def tpot(run: InferenceRun) -> Callable[[Calibration], float]:
    return lambda cal: predict_inference(run.layout.cfg, run.layout.dims, cal).tpot_s


def learn_inference(cal: Calibration, runs: InferenceRuns) -> tuple[Calibration, list[str]]:
    """The host's figures (inference_host); where the profile has no decode GEMMs' figures, the engine's
    read factor over a stream from the deeper calibration-model run, where the tiny runs fixed the
    decode's latencies; where it has no decode attention calls by shape, the KV cache's read factor from
    the large-batch run (its decode memory-bound). Each is a share of the others' runs, so they are
    fitted in turn until they settle."""
    lr = Learner(cal, {})
    deepest = max(runs.depths, key=lambda r: r.layout.cfg.model.layers) if runs.depths else None
    by_shape = bool(cal.decode_attention_s)
    for _ in range(INFERENCE_ROUNDS if runs.kv_cache or runs.tiny else 1):
        if len(runs.depths) > 1 or len(runs.tiny) > 1:
            lr.cal = inference_host(lr.cal, runs)
        lr.notes.clear()
        if len(runs.tiny) > 1 and deepest and not cal.decode_gemm_s:
            lr.fit("decode weights' read factor in the engine", tpot(deepest), deepest.tpot_s,
                   lambda c, x: replace(c, weight_read_factor=x))
        if runs.kv_cache and not by_shape:
            lr.fit("KV cache read factor", tpot(runs.kv_cache), runs.kv_cache.tpot_s,
                   lambda c, x: replace(c, kv_read_factor=x))
    return lr.cal, lr.notes
