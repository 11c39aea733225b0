"""issue 31, 2026-12-07, offline: a training step as a host that queues kernels and a device that runs them, with a
launch queue of Q kernels between them, against the model's phase rule (each phase the longer of its kernels and its
dispatch; predict_step's rule until docs/results/2026-12-07_loop31.md, which replaced it by the launch queue's). The loop before the fix synchronised at the step's end ("synced"); the loop since reads a step late
("free"). Each phase's kernels and dispatch are spread evenly over its dispatches (the model's counts); `--forward-share`
moves that share of a checkpoint's replay cost from the backward into the forward (selective31: about half).
Usage, from the repo root: python docs/results/2026-12-07_dispatch31/queue_sim.py JSONL... [--queue 1024]"""
from __future__ import annotations

import argparse
import bisect
import statistics
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from predictor_accuracy import records  # noqa: E402

from parbench.planner import compose_config  # noqa: E402
from parbench.predict import Layout  # noqa: E402
from parbench.predict.host import device_idle, eager_dispatches, host_seconds  # noqa: E402
from parbench.predict.profiles import calibration_for  # noqa: E402
from parbench.predict.step import predict_step  # noqa: E402
from parbench.prepare import validate  # noqa: E402

CHUNK = 16  # kernels a simulated launch


def phases(layout: Layout, cal, share: float) -> list[tuple[float, float, float]]:
    """(kernels, host seconds, device seconds) of the step's parts in order: the loop, forward, backward, optimizer."""
    p = predict_step(layout, cal)
    host = host_seconds(layout, cal)
    unreplayed = host_seconds(layout, replace(cal, host_s_per_replayed_call={}, host_s_per_replayed_layer={}))
    moved = share * (host.backward_s - unreplayed.backward_s)
    idle = device_idle(layout, cal)
    d = eager_dispatches(layout)
    calls, ops = (d.calls, d.ops + d.replayed_calls) if d and not layout.compiled else (400.0, 800.0)
    c = p.compute
    forward = c.forward_s + idle.forward_s
    backward = c.total_s - c.forward_s - c.optimizer_s + idle.backward_s + p.bubble_s + p.exposed_comm_s
    return [(0, host.step_s, idle.step_s), (calls, host.forward_s + moved, forward),
            (ops, host.backward_s - moved, backward), (40, 0.0, c.optimizer_s)]


def simulate(parts: list[tuple[float, float, float]], queue: float, synced: bool, steps: int = 4) -> float:
    """The last step's time between its start and end events on the device."""
    chunks = []
    for kernels, host_s, device_s in parts:
        n = max(1, round(kernels / CHUNK))
        chunks += [(kernels / n, host_s / n, device_s / n)] * n
    host_t = device_t = total = interval = 0.0
    emitted, started = [], []  # per chunk: kernels queued when it is, its start on the device
    for _ in range(steps):
        start_event = max(host_t, device_t)
        for kernels, host_s, device_s in chunks:
            host_t += host_s
            total += kernels
            j = bisect.bisect_left(emitted, total - queue)  # the queue has room once that chunk has started
            if j < len(started):
                host_t = max(host_t, started[j])
            emitted.append(total)
            started.append(max(device_t, host_t))
            device_t = started[-1] + device_s
        interval = device_t - start_event
        if synced:
            host_t = max(host_t, device_t)
    return interval


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("jsonl", nargs="+", type=Path)
    parser.add_argument("--queue", type=float, default=1024)
    parser.add_argument("--forward-share", type=float, default=0.0)
    args = parser.parse_args()
    errors = {"phase rule": [], "synced": [], "free": []}
    for path in args.jsonl:
        for r in records(path):
            m = r["metrics"]
            if "step_time_s" not in m or "workload=inference" in r["overrides"]:
                continue
            cfg = compose_config(r["overrides"])
            layout = Layout.of(cfg, validate(cfg, None))
            cal = calibration_for(cfg.hardware, layout.dtype, cfg.calibration)
            parts = phases(layout, cal, args.forward_share)
            got = {"phase rule": predict_step(layout, cal).step_time_s,
                   "synced": simulate(parts, args.queue, True), "free": simulate(parts, args.queue, False)}
            name = " ".join(o.split("=")[1] for o in r["overrides"] if o.split("=")[0] in
                            ("hardware", "model", "workload.seq_len", "workload.batch_size", "workload.compile",
                             "workload.activation_checkpointing"))
            print(f"{name:55s} measured {m['step_time_s'] * 1e3:6.1f} ms  " + "  ".join(
                f"{k} {v * 1e3:6.1f} ({100 * (v / m['step_time_s'] - 1):+5.1f} %)" for k, v in got.items()))
            for k, v in got.items():
                errors[k].append(abs(v / m["step_time_s"] - 1) * 100)
    for k, e in errors.items():
        print(f"{k}: median |error| {statistics.median(e):.1f} %, worst {max(e):.1f} % ({len(e)} cases)")


if __name__ == "__main__":
    main()
