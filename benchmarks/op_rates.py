"""Each op of one training step timed alone on this GPU, beside what the performance model costs it at:
every block GEMM (forward, input gradient, weight gradient) and the head's, causal attention forward
and backward, and the element-wise ops of a block, one model and shape per line of the table.

    python benchmarks/op_rates.py [--out table.md] OVERRIDES...   (e.g. model=gpt2_xl workload.seq_len=1024 workload.batch_size=4)

The column `own size` is what the model does (each GEMM at the matmul curve's rate for its FLOPs, no
faster than its weights' read: predict/costs.gemm_call_seconds);
`typical` costs every GEMM at the rate of the layout's MLP's first, as the model did before
2026-11-26, so the table shows how far a family's shapes (GPT-2's 1,600-wide blocks, 25 heads) sit
from the curve. Attention rows: the calibrated curve for the sequence's length."""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import torch
import torch.nn.functional as F

from parbench.config.hardware import detect_gpus
from parbench.metrics.flops import attended_positions, attention_flops_per_token
from parbench.metrics.timing import time_each
from parbench.models.shapes import model_shapes
from parbench.workloads.microbench.attention import time_passes
from parbench.planner import compose_config
from parbench.predict.profiles import calibration_for
from parbench.predict.costs import gemm_call_seconds, typical_gemm_flops

ITERS = 20


def median_s(fn, device: torch.device) -> float:
    return statistics.median(time_each(lambda _: fn(), ITERS, device, warmup=3))


def gemm_rows(tokens: int, weights: list[tuple[str, tuple[int, int]]], cal, typical: float,
              device: torch.device, dtype: torch.dtype) -> list[tuple]:
    """(name, FLOPs, measured s, typical-rate s, the model's s) of each weight's three products."""
    rows = []
    for name, (out, inp) in weights:
        x = torch.randn(tokens, inp, device=device, dtype=dtype)
        w = torch.randn(out, inp, device=device, dtype=dtype)
        g = torch.randn(tokens, out, device=device, dtype=dtype)
        flops = 2 * tokens * out * inp
        for part, fn in (("fwd", lambda: x @ w.t()), ("dgrad", lambda: g @ w), ("wgrad", lambda: g.t() @ x)):
            rows.append((f"{name} {part} [{tokens}x{inp}]x[{inp}x{out}]", flops, median_s(fn, device),
                         flops / cal.matmul_rate(typical), gemm_call_seconds(cal, flops, out * inp * dtype.itemsize)))
    return rows


def attention_rows(cfg, cal, device: torch.device, dtype: torch.dtype) -> list[tuple]:
    """A block's causal attention, forward and backward (the attention microbenchmark's timing)."""
    m, w = cfg.model, cfg.workload
    hd = m.head_dim or m.hidden // m.heads
    fwd, bwd = time_passes([w.batch_size, m.heads, m.kv_heads, w.seq_len, hd], True, dtype, device, ITERS, 3)
    flops = attention_flops_per_token(m, w.seq_len, causal=True) / m.layers * w.batch_size * w.seq_len
    attended = attended_positions(w.seq_len, True, m.sliding_window)
    both, fwd_model = cal.attention_seconds(flops, attended, 1, hd), cal.attention_seconds(flops / 3, attended, 1, hd, forward_only=True)
    name = f"{m.heads}x{hd} heads, {m.kv_heads} kv"
    return [(f"attention fwd {name}", flops / 3, fwd, fwd_model, fwd_model),
            (f"attention bwd {name}", 2 * flops / 3, bwd, both - fwd_model, both - fwd_model)]


def elementwise_rows(cfg, device: torch.device, dtype: torch.dtype) -> list[tuple]:
    """A block's norm and MLP activation, forward and forward+backward (no FLOPs: the model costs
    them as bytes over the bandwidth)."""
    m, w = cfg.model, cfg.workload
    tokens = w.batch_size * w.seq_len
    x = torch.randn(tokens, m.hidden, device=device, dtype=dtype, requires_grad=True)
    h = torch.randn(tokens, m.ffn, device=device, dtype=dtype, requires_grad=True)
    weight = torch.ones(m.hidden, device=device, dtype=dtype, requires_grad=True)
    bias = torch.zeros(m.hidden, device=device, dtype=dtype, requires_grad=True)
    if m.family == "gpt2":
        ops = (("layer_norm", lambda: F.layer_norm(x, (m.hidden,), weight, bias), (x, weight, bias)),
               ("gelu", lambda: F.gelu(h, approximate="tanh"), (h,)))
    else:
        ops = (("rms_norm", lambda: F.rms_norm(x, (m.hidden,), weight), (x, weight)),
               ("silu*mul", lambda: F.silu(h) * h, (h,)))
    nan = float("nan")
    rows = []
    for name, fn, inputs in ops:
        grad = torch.randn_like(fn())
        rows.append((f"{name} fwd", 0, median_s(fn, device), nan, nan))
        rows.append((f"{name} fwd+bwd", 0, median_s(lambda: torch.autograd.grad(fn(), inputs, grad), device), nan, nan))
    return rows


def table(overrides: list[str]) -> str:
    cfg = compose_config(overrides, detect_gpus())  # hardware=auto: this machine's GPUs and profile
    m, w = cfg.model, cfg.workload
    device, dtype = torch.device("cuda" if torch.cuda.is_available() else "cpu"), torch.bfloat16
    cal = calibration_for(cfg.hardware, w.dtype, None)
    tokens = w.batch_size * w.seq_len
    typical = typical_gemm_flops(m, tokens, 1)
    shapes = model_shapes(m)
    weights = [(n.split(".")[-2], s) for n, s in shapes.block if len(s) == 2]
    weights.append(("head", (m.vocab, m.hidden)))
    rows = gemm_rows(tokens, weights, cal, typical, device, dtype) + attention_rows(cfg, cal, device, dtype)
    rest = elementwise_rows(cfg, device, dtype)
    gpu = torch.cuda.get_device_name() if device.type == "cuda" else "CPU"
    lines = [f"### {' '.join(overrides)} ({gpu}, profile: {cal.label(cfg.hardware.name)})", "",
             "| op | GFLOP | measured µs | TFLOP/s | typical µs | own-size µs |", "|---|---|---|---|---|---|"]
    for name, flops, s, model_s, own_s in rows:
        lines.append(f"| {name} | {flops / 1e9:.1f} | {1e6 * s:.0f} | {flops / s / 1e12:.0f} | {1e6 * model_s:.0f} "
                     f"| {1e6 * own_s:.0f} |")
    lines += [f"| {name} | | {1e6 * s:.0f} | | | |" for name, _, s, _, _ in rest]
    block = [r for r in rows if not r[0].startswith("head")]
    per_layer = [sum(r[i] for r in block) for i in (2, 3, 4)]
    lines += ["", f"one block (GEMMs + attention): measured {1e3 * per_layer[0]:.2f} ms, typical {1e3 * per_layer[1]:.2f} ms "
              f"({100 * (per_layer[1] / per_layer[0] - 1):+.1f} %), own-size {1e3 * per_layer[2]:.2f} ms "
              f"({100 * (per_layer[2] / per_layer[0] - 1):+.1f} %)", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, help="append the markdown table here")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_intermixed_args()
    text = table(args.overrides)
    print(text, flush=True)
    if args.out:
        with args.out.open("a") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
