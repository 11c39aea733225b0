"""A layer's element-wise work beyond its GEMMs and attention, by the kernel that does it and the width of
the rows it runs over, and its time at each kernel's measured rate (Calibration.elementwise_gbps, the
calibration's elementwise run): on the H200 GPT-2's tanh GELU runs at 3.1 TB/s and its 1,600-wide LayerNorm,
compiled, at 1.4, where the Llama's SwiGLU runs at 4.0 (docs/results/2026-11-29_elementwise31.md). One rate for
every kernel could not fit both families."""

from __future__ import annotations

from collections import defaultdict

from parbench.config.schema import head_width
from parbench.metrics.fits import along
from parbench.models.shapes import FP32
from parbench.predict.calibration import Calibration, step_mode
from parbench.predict.layout import Layout

Traffic = dict[tuple[str, int], float]  # (kernel, row width) -> bytes read and written per token


def layer_traffic(layout: Layout, compiled: bool, training: bool = True, qk_norm_factor: float = 1.0) -> Traffic:
    """Bytes one layer's forward reads and writes per token beyond the GEMMs, by kernel and row width: the
    two norms (LayerNorm with biases, as GPT-2's, else RMSNorm) and the two residual adds on the residual
    stream, which is fp32 in a training step under autocast (fp32 weights, as DDP's: each add reads a GEMM's
    output in the compute dtype, and each norm's output is cast to it for its GEMM, by a kernel of its own
    where eager, in the norm where compiled); RoPE on q and k (none with
    learned positions); Qwen3's q and k norms over each head (times their calibrated factor: a norm per head
    is slower per byte); the MLP's activation (SwiGLU: 3 ffn, tanh GELU: 2 ffn); with biases, the backward's
    bias gradients read each biased output once more (a third of that here, as the forward counts thrice;
    none for an inference forward: training=False)."""
    m, d, fam = layout.cfg.model, layout.dims, layout.family
    hd, b = head_width(m), layout.dtype_bytes
    autocast = training and layout.autocast
    stream = FP32 if autocast else b
    qk = (m.heads + m.kv_heads) * hd / d.tp
    h = m.hidden / (d.tp if layout.cfg.parallel.sp else 1)
    biased = (qk + m.kv_heads * hd / d.tp if fam.norm_bias or m.qkv_bias else 0) \
        + (m.hidden + m.ffn / d.tp + 2 * h if fam.norm_bias else 0)  # q, k, v; output, MLP and norms (GPT-2)
    traffic: Traffic = defaultdict(float)
    # an eager norm writes the stream's dtype and autocast casts it for the GEMM; a compiled one writes the GEMM's
    traffic["layer_norm" if fam.norm_bias else "rms_norm", m.hidden] += 2 * h * (stream + (b if compiled else stream))
    if autocast and not compiled:
        traffic["cast", m.hidden] += 2 * h * (FP32 + b)
    traffic["add", m.hidden] += 2 * h * (2 * stream + b) + (biased / 3 * b if training else 0.0)
    if not fam.learned_positions:  # over each token's q heads and k heads: a row of q's width
        traffic["rope", m.heads * hd // d.tp] += 2 * qk * b
    if m.qk_norm:
        traffic["rms_norm", hd] += 2 * qk * qk_norm_factor * b
    activation = (3 if fam.gated_mlp else 2) * m.ffn * (m.top_k or 1) / d.tp
    traffic["swiglu" if fam.gated_mlp else "gelu_tanh", m.ffn // d.tp] += activation * b
    if m.experts:  # every tp rank routes all of its tokens (the experts stay replicated over tp)
        traffic["moe_dispatch", m.hidden] += moe_dispatch_bytes(m.top_k * m.hidden, m.hidden, b, stream, compiled,
                                                                autocast)
    return dict(traffic)


def moe_dispatch_bytes(rows: int, hidden: int, b: int, stream: int, compiled: bool, autocast: bool) -> float:
    """Bytes per token of an MoE layer's dispatch beyond its GEMMs (models/moe.py), `rows` the elements of a token's
    routed rows (top_k x hidden): the rows gathered (in the residual stream's dtype, or the GEMMs' where compiled,
    whose norm writes that), cast for the experts under eager autocast, scattered back into a zeroed (token, choice)
    buffer, and summed with their gates (eager: the product written and read again)."""
    source = b if compiled else stream
    gather = 2 * rows * source
    cast = rows * (source + b) if autocast and not compiled else 0.0
    scatter = 3 * rows * b
    combine = rows * b + hidden * stream + (0.0 if compiled else 2 * rows * stream)
    return gather + cast + scatter + combine


def kernel_gbps(cal: Calibration, compiled: bool, kernel: str, width: int) -> float:
    """The kernel's rate at rows of `width`: along the widths measured of its kind, powers of two or not (a
    row of a power of two fills the kernel's blocks; any other leaves lanes idle or takes a second pass:
    H200, a compiled LayerNorm at 2,048 runs at 2.5 TB/s, at 1,536 and 2,560 at 1.3-1.4); a row narrower than
    every width of its kind (a head's, 80 wide) along every width measured; beyond the widths read, the nearest
    one's rate; membw_gbps where the profile has no rate for the kernel (and for a cast, a plain stream)."""
    rates = cal.elementwise_gbps.get(step_mode(compiled), {}).get(kernel)
    if not rates:
        return cal.membw_gbps
    points = [(int(w), gbps) for w, gbps in rates.items()]
    same_kind = [(w, gbps) for w, gbps in points if is_power_of_two(w) == is_power_of_two(width)]
    if same_kind and width >= min(w for w, _ in same_kind):
        points = same_kind
    widths = [w for w, _ in points]
    return along(points, min(max(width, min(widths)), max(widths)))


def is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def elementwise_seconds(cal: Calibration, compiled: bool, traffic: Traffic, per_token: float) -> float:
    """The traffic's time, each kernel's bytes per token times per_token (the tokens and layers) at its rate,
    times the step's measured element-wise factor."""
    seconds = sum(nbytes * per_token / (kernel_gbps(cal, compiled, kernel, int(width)) * 1e9)
                  for (kernel, width), nbytes in traffic.items())
    return seconds * cal.elementwise(compiled)
