"""Element-wise kernels a transformer layer runs beyond its GEMMs and attention, each over [rows, width]
activations of `elements` in all (rows: tokens, or tokens x heads for a norm per head), eager (torch's own
kernel) and compiled (torch.compile's generated one):

    layer_norm, rms_norm   a norm over each row of `width` (GPT-2; Llama and Qwen3): reads and writes it
    add                    a residual add: reads two, writes one
    gelu_tanh              GPT-2's MLP activation: reads and writes `width`
    swiglu                 Llama's: silu(gate) x up, reads two of `width` (each its own projection's), writes one
    rope                   the Llama family's rotary positions over heads of 64, in fp32 as the models compute
                           them: reads and writes `width` (the angles' table, 256 bytes a row, is small beside a
                           row of several heads)
    copy                   a layout copy to heads of 64 by token ([rows, heads, 64] -> [heads, rows, 64])

    elementwise_gbps/<mode>/<kernel>/<width>   those minimum bytes over the median call's time, averaged
                                                over ranks; elementwise_time_us/... the call's time
The calls take inputs in turn through `rotate_bytes`, so that none is read from L2. A norm's rate depends
on its row's width (a row not a multiple of the kernel's block leaves lanes idle: H200, GPT-2 XL's 1,600),
a point-wise kernel's hardly: `parbench calibrate` reads the table at a model's widths (predict/elementwise.py)."""

from __future__ import annotations

import statistics
from typing import Callable

import torch
import torch.nn.functional as F

from parbench.config.schema import Config
from parbench.distenv import DistEnv
from parbench.dtypes import torch_dtype
from parbench.metrics.timing import time_each
from parbench.models.llama import apply_rope, rope_tables
from parbench.workloads.microbench.common import copies_to_exceed, rank_mean
from parbench.workloads.reporting import StepReporter
from parbench.workloads.specs.elementwise import ELEMENTWISE_HEAD as HEAD, MOVED, TWO_OPERANDS
from parbench.workloads.specs.microbench import parse_size

def head_copy(x: torch.Tensor) -> torch.Tensor:
    return x.view(x.shape[0], -1, HEAD).transpose(0, 1).contiguous()


def kernel_call(kernel: str, width: int, rows: int, dtype: torch.dtype,
                device: torch.device) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """The kernel over one input of [rows, width] and, for add and SwiGLU, a second of the same shape (the
    residual; the up projection), its weights and tables made here."""
    if kernel in ("layer_norm", "rms_norm"):
        weight = torch.randn(width, dtype=dtype, device=device)
        if kernel == "rms_norm":
            return lambda x, _: F.rms_norm(x, (width,), weight, eps=1e-6)
        bias = torch.randn(width, dtype=dtype, device=device)
        return lambda x, _: F.layer_norm(x, (width,), weight, bias)
    if kernel == "rope":  # the models' own: one sequence of `rows` positions, heads of HEAD
        cos, sin = (t.to(device) for t in rope_tables(HEAD, rows, theta=10000.0))
        return lambda x, _: apply_rope(x.view(1, rows, -1, HEAD), cos, sin)
    return {"add": lambda x, other: x + other, "swiglu": lambda x, other: F.silu(x) * other,
            "gelu_tanh": lambda x, _: F.gelu(x, approximate="tanh"), "copy": lambda x, _: head_copy(x)}[kernel]


def time_kernel(kernel: str, width: int, compiled: bool, cfg: Config, device: torch.device) -> float:
    """Median seconds of one call of the kernel at this width, its inputs taken in turn."""
    w = cfg.workload
    dtype = torch_dtype(w.dtype)
    shape = (w.elements // width, width)
    operands = 2 if kernel in TWO_OPERANDS else 1
    copies = copies_to_exceed(parse_size(w.rotate_bytes), operands * shape[0] * shape[1] * dtype.itemsize)
    inputs = [[torch.randn(shape, dtype=dtype, device=device) for _ in range(operands)] for _ in range(copies)]
    call = kernel_call(kernel, width, shape[0], dtype, device)
    if compiled:
        torch._dynamo.reset()  # a fresh compile per shape: dynamo stops recompiling one function after a few shapes
        call = torch.compile(call, dynamic=False)
    # a one-operand kernel's second argument is its input again, unused
    return statistics.median(time_each(lambda i: call(inputs[i % copies][0], inputs[i % copies][-1]), w.iters, device,
                                       warmup=w.warmup_iters))


def run(cfg: Config, env: DistEnv, reporter: StepReporter) -> dict:
    w = cfg.workload
    itemsize = torch_dtype(w.dtype).itemsize
    cases = [(mode, kernel, width) for mode in w.modes for kernel in w.kernels for width in w.widths]
    points = []
    for i, (mode, kernel, width) in enumerate(cases):
        seconds = rank_mean(time_kernel(kernel, width, mode == "compiled", cfg, env.device), env.device)
        nbytes = MOVED[kernel] * (w.elements // width) * width * itemsize
        point = {"elementwise_gbps": nbytes / seconds / 1e9, "elementwise_time_us": seconds * 1e6}
        points.append({"mode": mode, "kernel": kernel, "width": width, **point})
        reporter.step(i, len(cases), f"{mode} {kernel} {width}", **point)
    metrics = {f"{k}/{p['mode']}/{p['kernel']}/{p['width']}": p[k] for p in points
               for k in ("elementwise_gbps", "elementwise_time_us")}
    results = {"metrics": metrics, "tables": {"elementwise": points}}
    if env.is_main:
        table = rates_table(points, f"Element-wise kernels, GB/s of their minimum bytes by row width ({w.dtype}, "
                                    f"{w.elements:,} elements a call, {cfg.hardware.name})")
        print(table, flush=True)
        (reporter.job_dir / "elementwise.md").write_text(table + "\n")
        results["artifacts"] = ["elementwise.md"]
    return results


def rates_table(points: list[dict], title: str) -> str:
    """A markdown table: a row per mode and kernel, a column per width."""
    widths = sorted({p["width"] for p in points})
    rows: dict[str, dict[int, float]] = {}
    for p in points:
        rows.setdefault(f"{p['mode']} {p['kernel']}", {})[p["width"]] = p["elementwise_gbps"]
    lines = [title, "", "| kernel | " + " | ".join(map(str, widths)) + " |", "|---|" + "---:|" * len(widths)]
    lines += [f"| {name} | " + " | ".join(f"{rates[w]:,.0f}" if rates[w] >= 100 else f"{rates[w]:.3g}" for w in widths) + " |"
              for name, rates in rows.items()]
    return "\n".join(lines)
