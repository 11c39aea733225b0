"""The machine's figures from `parbench calibrate`'s microbenchmarks: the matmul and attention rate curves, a
decode GEMM's time by its size, and
per link scope the latency and bus bandwidth of the collectives, with the overlap the profiled
dp and fsdp runs measured (docs/plan.md, Calibration)."""

from __future__ import annotations

import statistics
from collections import defaultdict
from itertools import accumulate
from typing import Any

from parbench.config.schema import HardwareConfig
from parbench.metrics.fits import by_count, fit_alpha_beta, fit_line, fit_relative, fit_smooth_roofline, two_at_two
from parbench.metrics.flops import attended_positions
from parbench.models.shapes import aligned
from parbench.predict.calibration import ATTENTION_FIELDS, Calibration, LinkFit
from parbench.predict.comm import BUS_FACTOR

FITTED_OPS = ("all_reduce", "all_gather", "reduce_scatter")


def fit_link(points: list[tuple[float, float]]) -> LinkFit:
    """(bus bytes = size x bus factor, seconds) of the collectives microbenchmark -> latency and bus
    bandwidth of the alpha-beta model (metrics.fits: least squares on relative error)."""
    fit = fit_alpha_beta([b for b, _ in points], [t for _, t in points])
    return LinkFit(latency_s=max(fit.alpha_s, 0.0), busbw_gbps=fit.bandwidth_gbps)


def fit_saturating(points: list[tuple[float, float]]) -> tuple[float, float]:
    """(size x, achieved rate) -> (R, X) of rate(x) = R x / (x + X), the rate of a large size and the
    size at half of it: 1/rate is linear in 1/x with intercept 1/R and slope X/R."""
    line = fit_line([1 / x for x, _ in points], [1 / r for _, r in points])
    if line is None or line.intercept <= 0:  # one size, or no saturation seen: the best rate, no size penalty
        return max(r for _, r in points), 0.0
    return 1 / line.intercept, max(0.0, line.slope / line.intercept)


def fit_matmul(points: list[tuple[float, float]]) -> tuple[float, float]:
    """(GEMM FLOPs, achieved TFLOP/s) -> (large-GEMM TFLOP/s, GFLOP at half that rate)."""
    tflops, half_flops = fit_saturating(points)
    return tflops, half_flops / 1e9


def fit_attention_curve(points: list[tuple[float, float, float]]) -> tuple[float, float, float]:
    """(keys a query attends, FLOPs, seconds) of each call -> (R TFLOP/s, E keys, c seconds) of
    time = c + FLOPs (1 + E / attended) / R: the long-sequence rate, the extra keys each query costs
    (the masked diagonal tiles, each row's softmax statistics), and a call's fixed cost (its kernels'
    ramp and tail), which only shapes of one length at several batches tell apart from E. Without such
    shapes, or where a figure comes out negative: c = 0 and the rate curve alone; from one length only:
    the best rate measured."""
    flops, per_key, seconds = ([f for _, f, _ in points], [f / a for a, f, _ in points], [t for _, _, t in points])
    with_call = fit_relative([1.0, flops, per_key], seconds) if len(points) > 3 else None
    if with_call is not None and min(with_call) >= 0 and with_call[1] > 0:
        call_s, per_flop, extra_per_flop = (float(c) for c in with_call)
        return 1e-12 / per_flop, extra_per_flop / per_flop, call_s
    without = fit_relative([flops, per_key], seconds) if len({a for a, _, _ in points}) > 1 else None
    if without is not None and min(without) >= 0 and without[0] > 0:
        per_flop, extra_per_flop = (float(c) for c in without)
        return 1e-12 / per_flop, extra_per_flop / per_flop, 0.0
    return max(f / t / 1e12 for _, f, t in points), 0.0, 0.0


def attention_figures(metrics: dict) -> dict:
    """The causal attention microbenchmark's [batch, heads, kv_heads, seq_len, head_dim] shapes -> the
    figures of fit_attention_curve for forward and backward (training) and for the forward alone (a
    prefill): over every shape, and by head width where a width has shapes of its own at several lengths
    (a model of a width measured at one length only takes the nearest width fitted)."""
    shapes = [tuple(int(v) for v in key.split("/")[1].split("x")) for key in metrics if key.startswith("attention_tflops/")]
    if not shapes:
        return {}
    widths = {}
    for head_dim in sorted({s[4] for s in shapes}):
        own = [s for s in shapes if s[4] == head_dim]
        figures = attention_curves(metrics, own) if len(own) < len(shapes) and len({s[3] for s in own}) > 1 else {}
        if set(figures) == set(ATTENTION_FIELDS):
            widths[str(head_dim)] = figures
    return {**attention_curves(metrics, shapes), "attention_widths": widths}


def attention_curves(metrics: dict, shapes: list[tuple[int, ...]]) -> dict[str, float]:
    """fit_attention_curve of these shapes, forward and backward and the forward alone (ATTENTION_FIELDS)."""
    figures = {}
    for name, prefix, passes in (("attention", "attention_tflops", 3), ("attention_forward", "attention_fwd_tflops", 1)):
        points = []
        for batch, heads, kv_heads, seq, head_dim in shapes:
            key = f"{prefix}/{batch}x{heads}x{kv_heads}x{seq}x{head_dim}"
            if key not in metrics:
                continue
            attended = attended_positions(seq, causal=True)
            flops = passes * 4 * batch * heads * seq * head_dim * attended  # the model's count (forward: 4 B H S D a)
            points.append((attended, flops, flops / (metrics[key] * 1e12)))
        if points:
            figures[f"{name}_tflops"], figures[f"{name}_extra_positions"], figures[f"{name}_call_s"] = \
                fit_attention_curve(points)
    return figures


def decode_attention_class(shape: list[int]) -> str:
    """The key of Calibration.decode_attention_s a [batch, heads, kv_heads, positions, head_dim] shape measures."""
    _, heads, kv_heads, _, head_dim = shape
    return f"{head_dim}" if heads > kv_heads else f"{head_dim}/mha"


def decode_attention_table(metrics: dict) -> dict[str, Any]:
    """decode_attention_s from the attention microbenchmark's decode shapes: each kind's calls, seconds by
    'BLOCKSxPOSITIONS' (blocks: sequences x KV heads), where it holds two lengths at each of two or more
    block counts (empty without them: the base profile's calls are not this machine's)."""
    calls: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for key, us in metrics.items():
        if key.startswith("decode_attention_time_us/"):
            batch, _, kv_heads, positions, _ = shape = [int(v) for v in key.split("/")[1].split("x")]
            calls[decode_attention_class(shape)][f"{batch * kv_heads}x{positions}"].append(us * 1e-6)
    # shapes of one kind with as many blocks and positions (a batch and heads split otherwise): their mean
    table = {kind: {shape: statistics.mean(times) for shape, times in shapes.items()} for kind, shapes in calls.items()}
    return {"decode_attention_s": {kind: calls for kind, calls in table.items() if two_at_two(calls)}}


def elementwise_table(metrics: dict) -> dict[str, Any]:
    """elementwise_gbps from the elementwise microbenchmark's elementwise_gbps/<mode>/<kernel>/<width>."""
    table: dict[str, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    for key, gbps in metrics.items():
        if key.startswith("elementwise_gbps/"):
            _, mode, kernel, width = key.split("/")
            table[mode][kernel][width] = gbps
    return {"elementwise_gbps": {mode: dict(kernels) for mode, kernels in table.items()}}


def matmul_points(metrics: dict, unaligned: bool = False) -> list[tuple[float, float]]:
    """(GEMM FLOPs, achieved TFLOP/s) of the aligned shapes (or the unaligned ones)."""
    points = []
    for key, tflops in metrics.items():
        if key.startswith("matmul_tflops/"):
            dims = tuple(int(v) for v in key.split("/")[1].split("x"))
            if aligned(dims) != unaligned:
                points.append((2.0 * dims[0] * dims[1] * dims[2], tflops))
    return points


def matmul_figures(metrics: dict) -> dict[str, float]:
    """The matmul microbenchmark's figures of a calibration: the aligned shapes' rate curve, and the
    unaligned shapes' rate over that curve's at their size (median; 1.0 without them)."""
    tflops, half = fit_matmul(matmul_points(metrics))
    curve = Calibration(matmul_tflops=tflops, matmul_half_gflop=half)
    ratios = [1e12 * r / curve.matmul_rate(f) for f, r in matmul_points(metrics, unaligned=True)]
    return {"matmul_tflops": tflops, "matmul_half_gflop": half,
            "unaligned_matmul_factor": statistics.median(ratios) if ratios else 1.0}


GROUPED_FIELDS = ("grouped_matmul_tflops", "grouped_read_gbps", "grouped_read_rows_exp", "grouped_call_s", "grouped_roofline_p")


def grouped_gemm_figures(metrics: dict, groups: int, itemsize: int) -> dict[str, float]:
    """The grouped runs' calls (matmul_time_us/<M>x<K>x<N> over `groups` K x N matrices, of which each reads
    matmul_groups_read/<shape>: those given rows, each taking M / that many rows) on a smooth roofline
    (metrics.fits.fit_smooth_roofline); zeros (plain GEMMs' figures stand in) without the runs, or where the calls
    give no fit."""
    calls = []
    for shape in (key.split("/", 1)[1] for key in metrics if key.startswith("matmul_time_us/")):
        m, k, n = map(int, shape.split("x"))
        read = metrics.get(f"matmul_groups_read/{shape}", groups)
        calls.append((2 * m * k * n, read * k * n * itemsize, m / read, metrics[f"matmul_time_us/{shape}"] * 1e-6))
    fit = fit_smooth_roofline(*zip(*calls)) if calls else None
    if fit is None:
        return dict.fromkeys(GROUPED_FIELDS, 0.0)
    return dict(zip(GROUPED_FIELDS, (fit.flops_per_s / 1e12, fit.bytes_per_s / 1e9, fit.read_exp, fit.fixed_s, fit.p)))


def decode_gemm_figures(metrics: dict, itemsize: int) -> dict:
    """The decode_matmul run's aligned shapes (matmul_time_us/<M>x<K>x<N>) as seconds of one call by the bytes
    of its weights (B: K x N), the median where shapes share a size, and the bandwidth beyond the largest:
    between the two largest sizes (the largest's own where the two do not rise); its unaligned shapes' time
    over that table's at their size (median). Empty figures where the run did not measure two sizes: the
    weights at the memory's bandwidth."""
    by_bytes: dict[int, list[float]] = defaultdict(list)
    for _, weight_bytes, seconds in timed_gemms(metrics, itemsize):
        by_bytes[weight_bytes].append(seconds)
    if len(by_bytes) < 2:
        return {"decode_gemm_s": {}, "decode_gemm_gbps": 0.0, "decode_unaligned_factor": 1.0}
    seconds = {b: statistics.median(times) for b, times in sorted(by_bytes.items())}
    (b0, s0), (b1, s1) = list(seconds.items())[-2:]
    gbps = (b1 - b0) / (s1 - s0) / 1e9 if s1 > s0 else b1 / s1 / 1e9
    table = Calibration(decode_gemm_s={str(b): s for b, s in seconds.items()}, decode_gemm_gbps=gbps)
    ratios = [s / table.decode_gemm_seconds(b) for _, b, s in timed_gemms(metrics, itemsize, unaligned=True)]
    return {"decode_gemm_s": table.decode_gemm_s, "decode_gemm_gbps": gbps,
            "decode_unaligned_factor": statistics.median(ratios) if ratios else 1.0}


# A prefill GEMM's rows the calibration times: up to where its FLOPs set its time (an H100's ridge is about 260
# rows of bf16: beyond it the rate curve times the GEMM; a table of more rows came out 5-12 % above the engine's)
PREFILL_GEMM_ROWS = (16, 32, 64, 128, 256)


def prefill_gemm_figures(metrics: dict, itemsize: int) -> dict:
    """The prefill_matmul run's shapes of up to PREFILL_GEMM_ROWS' most rows (a ledger's from a run of more keeps
    only those) as seconds of one call by 'ROWSxBYTES' (the weights' bytes, B: K x N): the median where shapes
    share both, each at least a smaller size's at its rows (a few sizes take one time, give or take noise);
    empty where it did not time two sizes at each of two row counts."""
    calls: dict[str, list[float]] = defaultdict(list)
    for rows, weight_bytes, seconds in timed_gemms(metrics, itemsize):
        if rows <= max(PREFILL_GEMM_ROWS):
            calls[f"{rows}x{weight_bytes}"].append(seconds)
    table = {shape: statistics.median(times) for shape, times in calls.items()}
    if not two_at_two(table):
        return {"prefill_gemm_s": {}}
    rising = {f"{rows}x{nbytes}": seconds for rows, points in by_count(table).items()
              for (nbytes, _), seconds in zip(points, accumulate((s for _, s in points), max))}
    return {"prefill_gemm_s": rising}


def timed_gemms(metrics: dict, itemsize: int, unaligned: bool = False) -> list[tuple[int, int, float]]:
    """(rows, weight bytes, seconds of one call) of each aligned shape a matmul run timed
    (matmul_time_us/<M>x<K>x<N>), or each unaligned one."""
    gemms = []
    for key, us in metrics.items():
        if key.startswith("matmul_time_us/"):
            rows, k, n = dims = tuple(map(int, key.split("/")[1].split("x")))
            if aligned(dims) != unaligned:
                gemms.append((rows, k * n * itemsize, us * 1e-6))
    return gemms


def link_points(metrics: dict, ranks: int) -> list[tuple[float, float]]:
    """(bus bytes, seconds) of every timed collective size."""
    points = []
    for key, us in metrics.items():
        parts = key.split("/")
        if parts[0] == "time_us" and len(parts) == 3 and parts[1] in FITTED_OPS:
            points.append((int(parts[2]) * BUS_FACTOR[parts[1]](ranks), us * 1e-6))
    return points


def fit_links(hw: HardwareConfig, results: dict[str, dict], base: Calibration) -> dict:
    """The link and overlap figures the collectives and profiled runs measure; a single-node run
    measures the intra-node link (and stands in for the inter-node one where nothing else gives it),
    a multi-node run the inter-node one. None on one device."""
    if "collectives" not in results:
        return {}
    link = fit_link(link_points(results["collectives"], hw.nodes * hw.gpus_per_node))
    links = {"inter_node": link} if hw.nodes > 1 else {"intra_node": link}
    if not base.inter_node.busbw_gbps:
        links.setdefault("inter_node", link)
    overlap = {**base.overlap, "dp": results["train_dp"].get("overlap_pct", 0.0) / 100,
               "fsdp": results["train_fsdp"].get("overlap_pct", 0.0) / 100}
    overlap["zero"] = overlap["fsdp"]
    return {**links, "overlap": overlap}
