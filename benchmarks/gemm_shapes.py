"""Each weight matrix of a model's block (as the native engine fuses them) and its head, timed as
F.linear calls at a few row counts, replayed in a CUDA graph as the engine's decode step replays them
(issue 31):

    python benchmarks/gemm_shapes.py --models llama3_2_1b,qwen3_1_7b,gpt2_xl --rows 1,8,32,2048 [--out F.json]

A graph holds `--calls` calls, each on its own copy of the weights (for matrices of 1.3 MiB and more,
together beyond an H100's L2, so every call reads its weights from memory); the graph is replayed and
timed with CUDA events (parbench.metrics.timing.time_graphed, as `workload=matmul workload.graph_calls=N`
times its shapes). Printed per shape: µs a call, the weights' GB/s and the TFLOP/s, beside the performance
model's figure for the same call (--hardware's profile): a decode GEMM's calibrated time at its weights'
size (Calibration.decode_gemm_seconds, before the engine's read factor), a prefill GEMM at the rate curve
of its FLOPs."""

from __future__ import annotations

import argparse
import json
import math

import torch
import torch.nn.functional as F

from parbench.metrics.timing import time_graphed
from parbench.planner import compose_config
from parbench.predict.calibration import Calibration
from parbench.predict.costs import gemm_call_seconds
from parbench.predict.inference import engine_gemm_shapes
from parbench.predict.layout import Layout
from parbench.predict.profiles import calibration_for
from parbench.prepare import validate

L2_MULTIPLE_BYTES = 512 * 2**20  # every graph's weights together: ten H100 L2s
DECODE_ROWS = 64  # up to this many rows a call is a decode step's (the model's decode GEMM)


def block_matrices(model: str) -> dict[str, tuple[int, int, bool]]:
    """name -> (out_features, in_features, biased) of the block's GEMMs as the engine's compiled decode
    runs them (predict.inference.engine_gemm_shapes), and of the head."""
    cfg = compose_config(["workload=inference", f"model={model}", "hardware=h100_sxm", "hardware.gpus_per_node=1",
                          "workload.decode_mode=compile"])
    layout = Layout.of(cfg, validate(cfg, None))
    names = {name for name, _ in layout.shapes.block}
    matrices = {name.removesuffix(".weight"): (out_f, in_f, name.replace(".weight", ".bias") in names)
                for name, (out_f, in_f) in engine_gemm_shapes(layout).items()}
    return {**matrices, "head": (cfg.model.vocab, cfg.model.hidden, False)}


def graphed_seconds(rows: int, out_f: int, in_f: int, biased: bool, calls: int, replays: int) -> float:
    """Seconds of one F.linear call of `rows` rows, inside a CUDA graph of `calls` calls on distinct weights."""
    copies = max(1, min(calls, math.ceil(L2_MULTIPLE_BYTES / (2 * out_f * in_f))))
    weights = [torch.randn(out_f, in_f, dtype=torch.bfloat16, device="cuda") * 0.02 for _ in range(copies)]
    bias = torch.zeros(out_f, dtype=torch.bfloat16, device="cuda") if biased else None
    x = torch.randn(rows, in_f, dtype=torch.bfloat16, device="cuda")
    return time_graphed(lambda i: F.linear(x, weights[i % copies], bias), calls, replays)


def modelled_seconds(cal: Calibration, rows: int, out_f: int, in_f: int) -> float:
    """The performance model's time of the same call: a decode GEMM's at its weights' size (before the
    engine's factor), or a GEMM at the rate of its FLOPs."""
    nbytes = 2 * out_f * in_f
    if rows <= DECODE_ROWS:
        return cal.decode_gemm_seconds(nbytes)
    return gemm_call_seconds(cal, 2 * rows * out_f * in_f, nbytes)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="llama3_2_1b,qwen3_1_7b,gpt2_xl,llama2_7b")
    p.add_argument("--rows", default="1,4,8,32,512,2048,4096")
    p.add_argument("--calls", type=int, default=40)
    p.add_argument("--replays", type=int, default=20)
    p.add_argument("--hardware", default="h100_sxm")
    p.add_argument("--out", help="JSON of every point")
    args = p.parse_args()
    cfg = compose_config([f"hardware={args.hardware}", "hardware.gpus_per_node=1"])
    cal = calibration_for(cfg.hardware, "bf16", None)
    print(f"[gemm_shapes] {torch.cuda.get_device_name()} (torch {torch.__version__}), model: {cal.label(args.hardware)}")
    points = []
    for name in args.models.split(","):
        for matrix, (out_f, in_f, biased) in block_matrices(name).items():
            for rows in map(int, args.rows.split(",")):
                s = graphed_seconds(rows, out_f, in_f, biased, args.calls, args.replays)
                point = {"model": name, "matrix": matrix, "rows": rows, "out": out_f, "in": in_f, "bias": biased,
                         "us": s * 1e6, "gbps": 2 * out_f * in_f / s / 1e9, "tflops": 2 * rows * out_f * in_f / s / 1e12,
                         "model_us": modelled_seconds(cal, rows, out_f, in_f) * 1e6}
                points.append(point)
                print(f"{name:12s} {matrix:22s} {rows:5d} x {in_f:5d} -> {out_f:6d}{' +b' if biased else '   '}  "
                      f"{point['us']:9.2f} µs  {point['gbps']:7.0f} GB/s  {point['tflops']:6.1f} TF/s  "
                      f"model {point['model_us']:9.2f} µs ({100 * (point['model_us'] / point['us'] - 1):+.0f} %)",
                      flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "points": points}, f, indent=1)


if __name__ == "__main__":
    main()
