"""Scaled dot-product attention throughput per device (torch's SDPA: FlashAttention or cuDNN on a GPU),
forward and backward, for [batch, heads, kv_heads, seq_len, head_dim] shapes.

    attention_tflops       = FLOPs of forward and backward / their time, the FLOPs as the model counts
                             them: 4 B H S D x attended forward, twice that backward, attended the keys a
                             query sees on average (S/2 causal); time = median over `iters` calls each
    attention_fwd_tflops, attention_bwd_tflops   each pass alone
Averaged over ranks. A short sequence runs far below a long one's rate (the masked diagonal tiles and
each row's softmax statistics cost as much as many more keys would): `parbench calibrate` fits that.

`decode_shapes` [batch, heads, kv_heads, positions, head_dim] time a decode step's attention as the
native engine's static step runs it (models.kv_cache.one_token_attention: one new query per sequence
over a cache buffer of `positions`, the query heads of a KV group as its rows, a mask of the positions
written, here all of them). The calls take enough caches in turn to exceed `rotate_bytes`, as a
model's layers each read their own, so that a small cache is not read from L2. On a GPU the calls are
replayed as one CUDA graph, as the engine replays its decode step:

    decode_attention_time_us     time of one call: a graph's mean call on a GPU, the median call on a CPU
    decode_attention_gbps        the K and V buffer's bytes over that time
    decode_attention_ns_per_position   the time over the positions, a call's fixed cost included: where
                                 fewer (sequence, KV head) thread blocks run than the device has SMs,
                                 close to one block's pace"""

from __future__ import annotations

import statistics

import torch
import torch.nn.functional as F

from parbench.config.schema import Config
from parbench.distenv import DistEnv
from parbench.dtypes import torch_dtype
from parbench.metrics.flops import attended_positions
from parbench.metrics.timing import calls_time_each_makes, time_each, time_graphed
from parbench.models.kv_cache import one_token_attention
from parbench.workloads.microbench.common import copies_to_exceed, rank_mean, shape_name
from parbench.workloads.reporting import StepReporter
from parbench.workloads.specs.microbench import parse_size


DECODE_GRAPH_CALLS = 32  # a graph's calls at the least: a step of that many layers


def forward_flops(shape: list[int], causal: bool) -> float:
    batch, heads, _, seq, head_dim = shape
    return 4 * batch * heads * seq * head_dim * attended_positions(seq, causal)


def time_passes(shape: list[int], causal: bool, dtype: torch.dtype, device: torch.device, iters: int,
                warmup: int) -> tuple[float, float]:
    """Median seconds of one forward and of one backward of SDPA over a [batch, heads, kv_heads,
    seq_len, head_dim] shape."""
    batch, heads, kv_heads, seq, head_dim = shape
    q = torch.randn(batch, heads, seq, head_dim, dtype=dtype, device=device, requires_grad=True)
    k, v = (torch.randn(batch, kv_heads, seq, head_dim, dtype=dtype, device=device, requires_grad=True)
            for _ in range(2))

    def forward(_: int = 0) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=kv_heads != heads)

    out = forward()
    grad = torch.randn_like(out)
    fwd = time_each(forward, iters, device, warmup=warmup)
    bwd = time_each(lambda _: torch.autograd.grad(out, (q, k, v), grad, retain_graph=True), iters, device,
                    warmup=warmup)
    return statistics.median(fwd), statistics.median(bwd)


def decode_cache_bytes(shape: list[int], dtype: torch.dtype) -> int:
    """The K and V buffers of a [batch, heads, kv_heads, positions, head_dim] decode shape."""
    batch, _, kv_heads, positions, head_dim = shape
    return 2 * batch * kv_heads * positions * head_dim * dtype.itemsize


def time_decode(shape: list[int], dtype: torch.dtype, device: torch.device, iters: int, warmup: int,
                rotate_bytes: int) -> float:
    """Seconds of one decode step's attention over a [batch, heads, kv_heads, positions, head_dim] cache,
    as the engine's static step calls it: on a GPU the mean call of a CUDA graph of them replayed `iters`
    times (the engine replays its decode step so: no launch between its calls), else the median call.
    The calls take caches in turn, as the engine's layers do, so that none is read from L2."""
    batch, heads, kv_heads, positions, head_dim = shape
    q = torch.randn(batch, heads, 1, head_dim, dtype=dtype, device=device)
    copies = copies_to_exceed(rotate_bytes, decode_cache_bytes(shape, dtype))
    graphed = device.type == "cuda"
    if not graphed:
        copies = min(copies, calls_time_each_makes(iters, warmup))
    caches = [[torch.randn(batch, kv_heads, positions, head_dim, dtype=dtype, device=device) for _ in range(2)]
              for _ in range(copies)]
    visible = torch.ones(1, positions, dtype=torch.bool, device=device)

    def call(i: int) -> None:
        one_token_attention(q, *caches[i % len(caches)], visible)

    if graphed:
        return time_graphed(call, max(copies, DECODE_GRAPH_CALLS), iters)
    return statistics.median(time_each(call, iters, device, warmup=warmup))


def decode_points(cfg: Config, env: DistEnv, reporter: StepReporter) -> list[dict]:
    w = cfg.workload
    dtype = torch_dtype(w.dtype)
    points = []
    for i, shape in enumerate(w.decode_shapes):
        seconds = rank_mean(time_decode(shape, dtype, env.device, w.iters, w.warmup_iters, parse_size(w.rotate_bytes)),
                            env.device)
        point = {"decode_attention_time_us": seconds * 1e6,
                 "decode_attention_gbps": decode_cache_bytes(shape, dtype) / seconds / 1e9,
                 "decode_attention_ns_per_position": seconds / shape[3] * 1e9}
        points.append({"shape": shape_name(shape), **point})
        reporter.step(i, len(w.decode_shapes), f"decode {shape_name(shape)}", **point)
    return points


def run(cfg: Config, env: DistEnv, reporter: StepReporter) -> dict:
    w = cfg.workload
    dtype = torch_dtype(w.dtype)
    points = []
    for i, shape in enumerate(w.shapes):
        fwd, bwd = (rank_mean(s, env.device)
                    for s in time_passes(shape, w.causal, dtype, env.device, w.iters, w.warmup_iters))
        flops = forward_flops(shape, w.causal)
        point = {"attention_tflops": 3 * flops / (fwd + bwd) / 1e12, "attention_fwd_tflops": flops / fwd / 1e12,
                 "attention_bwd_tflops": 2 * flops / bwd / 1e12, "attention_time_us": (fwd + bwd) * 1e6}
        points.append({"shape": shape_name(shape), "flops": 3 * flops, **point})
        reporter.step(i, len(w.shapes), shape_name(shape), **point)
    metrics = {f"{k}/{p['shape']}": p[k] for p in points for k in ("attention_tflops", "attention_fwd_tflops",
                                                                     "attention_bwd_tflops", "attention_time_us")}
    biggest = max(points, key=lambda p: p["flops"])
    metrics.update(attention_tflops=biggest["attention_tflops"],
                   attention_tflops_max=max(p["attention_tflops"] for p in points))
    decode = decode_points(cfg, env, reporter)
    metrics.update({f"{k}/{p['shape']}": v for p in decode for k, v in p.items() if k != "shape"})
    return {"metrics": metrics, "tables": {"attention": points, **({"decode_attention": decode} if decode else {})}}
