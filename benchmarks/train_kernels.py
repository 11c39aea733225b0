"""Where a training step's device time goes, by kernel kind and by GEMM shape, beside the performance
model's parts of the same step (issue 31):

    python benchmarks/train_kernels.py [--calibration F] "OVERRIDES" ["OVERRIDES" ...]

Each case (one quoted string of overrides on top of one GPU, parallel=dp, workload=train) runs through
the CLI with the profiler on and record_shapes, then its rank-0 trace is read:
  - compute per profiled step by kind (the run's kernel_time_s/<kind> metrics, as the calibration reads
    them), beside the model's matmul, attention, optimizer and element-wise parts (predict.costs.Compute;
    under checkpointing the measured kinds hold the recompute, which the model keeps apart);
  - each GEMM shape (aten::mm, addmm, bmm, an MoE's grouped_mm, with the kernels they launched): calls per step, achieved
    TFLOP/s, and the calibrated rate curve's at its FLOPs (Calibration.matmul_rate; a grouped call's as the model
    prices an MoE's), so a shape the FLOPs alone misjudge shows. On a CPU trace (no kernels) the op's own time stands in."""

from __future__ import annotations

import argparse
import json
import math
import shlex
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import NamedTuple

from omegaconf import OmegaConf

from parbench.paths import PROFILE_DIR
from parbench.metrics import KERNEL_TIME
from parbench.metrics.trace import GEMM_OPS, KERNEL_KINDS, analyze
from parbench.metrics.trace_events import complete_events, load_trace
from parbench.models.shapes import aligned
from parbench.planner import compose_config
from parbench.predict import predict
from parbench.predict.calibration import Calibration
from parbench.predict.profiles import calibration_for
from parbench.prepare import validate

BASE = ["hardware.gpus_per_node=1", "parallel=dp", "workload=train", "workload.steps=6", "workload.warmup_steps=2",
        "profile.enabled=true", "profile.record_shapes=true", "profile.plots=false", "profile.active_steps=2"]


class Gemm(NamedTuple):
    """A GEMM op's shape: batch x M x K x N; a grouped one's (F.grouped_mm) groups and the elements of each group's
    matrix it reads or writes (its weights' K x N forward, its weight gradients' M x N backward)."""

    batch: int
    m: int
    k: int
    n: int
    groups: int = 0
    matrix: int = 0

    def label(self) -> str:
        dims = "x".join(map(str, (self.batch, self.m, self.k, self.n)))
        return f"{self.groups} groups, {dims}" if self.groups else dims


def gemm_shape(op_name: str, dims: list) -> Gemm | None:
    """The GEMM of an op from its recorded input dims; None where they do not read as one."""
    mats = [d for d in dims if isinstance(d, list) and len(d) in (2, 3)]
    offsets = [d[0] for d in dims if isinstance(d, list) and len(d) == 1] if op_name == "aten::_grouped_mm" else []
    if op_name in ("aten::addmm", "aten::baddbmm"):
        mats = mats[-2:]
    grouped_weights = offsets and len(mats) == 2 and (len(mats[0]), len(mats[1])) == (2, 3)
    if grouped_weights:
        mats = [mats[0], mats[1][1:]]  # the routed rows through each expert's [K, N]: M K N in all
    if len(mats) != 2 or len(mats[0]) != len(mats[1]):
        return None
    (*b, m, k), (*_, k2, n) = mats
    if k != k2:
        return None
    groups = offsets[0] if offsets else 0
    return Gemm(b[0] if b else 1, m, k, n, groups, (k * n if grouped_weights else m * n) if groups else 0)


GAP_BINS = ((0, 5), (5, 50), (50, 1e12))  # µs: launch gaps, short host stalls, waits


def device_gaps(kernels: list, steps: int) -> dict:
    """The device's idle time between consecutive kernels per step, by gap length, and the longest gaps
    with the kernels on either side: over the profiled steps' kernels, so the gap between two profiled
    steps (the next step's start after the last one's sync) counts, the one before the first does not."""
    kernels = sorted(kernels, key=lambda k: k.start)
    gaps, end = [], kernels[0].end
    for before, k in zip(kernels, kernels[1:]):
        if k.start > end:
            gaps.append((k.start - end, before.name, k.name))
        end = max(end, k.end)
    binned = {f"{lo:g}-{hi:g} µs" if hi < 1e12 else f">{lo:g} µs": sum(g for g, *_ in gaps if lo <= g < hi) / steps
              for lo, hi in GAP_BINS}
    return {"idle_us": sum(g for g, *_ in gaps) / steps, "by_length": binned, "count": len(gaps) / steps,
            "kernels": len(kernels) / steps, "longest": sorted(gaps, reverse=True)[:6]}


def step_kernels(trace: dict, steps: int) -> tuple[dict[str, float], dict[Gemm, list[float]], dict]:
    """Compute µs per step by kind (the trace analysis' kernel_time_s metrics), per GEMM shape the µs of
    each call (its kernels summed), and the device's idle gaps (device_gaps; empty on a CPU trace)."""
    events = complete_events(trace)
    metrics = analyze(trace).metrics()
    kinds = {kind: 1e6 * metrics[f"{KERNEL_TIME}/{kind}"] for kind in KERNEL_KINDS}
    ops = {e.args.get("External id"): e for e in events if e.cat == "cpu_op" and e.name in GEMM_OPS}
    kernels = [e for e in events if e.cat == "kernel"]
    per_op: dict[int, float] = defaultdict(float)
    for k in kernels:
        if k.args.get("External id") in ops:
            per_op[k.args["External id"]] += k.dur
    gaps = device_gaps(kernels, steps) if kernels else {}
    if not kernels:  # a CPU trace: each GEMM op's own time
        per_op = {ext: op.dur for ext, op in ops.items()}
    shapes: dict[Gemm, list[float]] = defaultdict(list)
    for ext, us in per_op.items():
        shape = gemm_shape(ops[ext].name, ops[ext].args.get("Input Dims", []))
        if shape:
            shapes[shape].append(us)
    return kinds, dict(shapes), gaps


def model_call_us(cal: Calibration, shape: Gemm) -> float:
    """The model's time of one GEMM of this shape: its FLOPs at the rate curve's, unaligned at its factor; a grouped
    one's as the model prices an MoE's (Calibration.grouped_gemm_seconds, bf16 matrices)."""
    flops = 2 * shape.batch * shape.m * shape.k * shape.n
    if shape.groups:
        return 1e6 * cal.grouped_gemm_seconds(flops, shape.groups * shape.matrix * 2, shape.m / shape.groups)
    seconds = flops / cal.matmul_rate(flops)
    return 1e6 * (seconds if aligned((shape.m, shape.k, shape.n)) else seconds / cal.unaligned_matmul_factor)


def run_case(overrides: list[str], work: Path) -> tuple[dict, dict, str]:
    """(results.json's metrics, the rank-0 trace, the hardware it resolved) of one profiled CLI run."""
    cmd = [sys.executable, "-m", "parbench", *BASE, *overrides, f"hydra.run.dir={work}",
           f"tracking.uri=sqlite:///{work}/mlflow.db"]
    print("$ python -m parbench " + " ".join([*BASE, *overrides]), flush=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    metrics = json.loads((work / "results.json").read_text())["metrics"]
    trace = next(iter(sorted((work / PROFILE_DIR).glob("trace_rank0.json*"))))
    return metrics, load_trace(trace), OmegaConf.load(work / "resolved.yaml").hardware.name


def print_case(overrides: list[str], metrics: dict, kinds: dict, shapes: dict, gaps: dict, cal_ref: str | None) -> None:
    """The case's kernels by kind and GEMM shape, its idle gaps, beside the model (overrides name the hardware)."""
    cfg = compose_config([*BASE, *overrides])
    dims = validate(cfg, None)
    cal = calibration_for(cfg.hardware, cfg.workload.dtype, cal_ref)
    p = predict(cfg, dims, cal)
    c = p.compute
    model = {"gemm": c.matmul_s, "attention": c.attention_s, "optimizer": c.optimizer_s, "other": c.elementwise_s}
    print(f"\n== {' '.join(overrides)}: step {metrics['step_time_s'] * 1e3:.1f} ms measured, "
          f"{p.step_time_s * 1e3:.1f} ms predicted (recompute {c.recompute_s * 1e3:.1f} ms, host {p.host_s * 1e3:.1f} ms)")
    print("  kernels / model, ms a step: " + "  ".join(
        f"{k} {kinds.get(k, 0) / 1e3:.2f}/{model[k] * 1e3:.2f}" for k in model)
        + f"  (kernels {sum(kinds.values()) / 1e3:.2f}, model compute {c.total_s * 1e3:.2f})")
    if gaps:
        print(f"  device idle between kernels: {gaps['idle_us'] / 1e3:.2f} ms a step in {gaps['count']:.0f} gaps "
              f"({gaps['kernels']:.0f} kernels); by gap length: "
              + ", ".join(f"{k} {v / 1e3:.2f} ms" for k, v in gaps["by_length"].items()))
        for us, before, after in gaps["longest"]:
            print(f"      {us:8.1f} µs after {before[:60]} before {after[:60]}")
    steps = cfg.profile.active_steps
    print(f"  {'batch x M x K x N':>36} {'calls':>5} {'µs a call':>9} {'TFLOP/s':>8} {'model µs':>8} {'model/meas':>10}")
    total_meas = total_model = 0.0
    for shape, calls in sorted(shapes.items(), key=lambda kv: -sum(kv[1])):
        us = sum(calls) / len(calls)
        model_us = model_call_us(cal, shape)
        total_meas, total_model = total_meas + sum(calls) / steps, total_model + model_us * len(calls) / steps
        print(f"  {shape.label():>36} {len(calls) / steps:5.0f} {us:9.1f} "
              f"{2 * math.prod(shape[:4]) / us / 1e6:8.1f} {model_us:8.1f} {model_us / us:10.3f}")
    if total_meas:
        print(f"  GEMM ops a step: {total_meas / 1e3:.2f} ms measured, {total_model / 1e3:.2f} ms at the model's rate "
              f"per shape ({total_model / total_meas - 1:+.1%}); the model's matmul part {c.matmul_s * 1e3:.2f} ms")
    else:
        print("  no GEMM op with its shapes in the trace (a compiled step's GEMMs are Inductor's calls)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("cases", nargs="+", help="one quoted string of overrides per case")
    p.add_argument("--calibration", help="a profile's name or file (default: the hardware's, as a run finds it)")
    args = p.parse_args()
    for case in args.cases:
        overrides = shlex.split(case)
        with tempfile.TemporaryDirectory() as tmp:
            metrics, trace, hardware = run_case(overrides, Path(tmp))
        kinds, shapes, gaps = step_kernels(trace, compose_config([*BASE, *overrides]).profile.active_steps)
        named = overrides if any(o.startswith("hardware=") for o in overrides) else [f"hardware={hardware}", *overrides]
        print_case(named, metrics, kinds, shapes, gaps, args.calibration)


if __name__ == "__main__":
    main()
