"""The figures a prediction uses: the named profile, else this machine's or the shipped one for the
hardware (scaled to the run's dtype), else figures from the hardware's spec sheet."""

from __future__ import annotations

from dataclasses import replace
from typing import Optional

from parbench.config import ConfigError
from parbench.config.schema import HardwareConfig
from parbench.dtypes import ITEMSIZE
from parbench.predict.calibration import Calibration, LinkFit
from parbench.predict.calibration_file import calibration_path, load_calibration

# Spec fallback. cuBLAS bf16 GEMMs at LLM shapes reach about 70% of the dense peak on H100/H200,
# NCCL's bus bandwidth about 80% of the NVLink figure, and streaming kernels about 80% of HBM.
SPEC_MATMUL_EFFICIENCY = 0.7
SPEC_MEMBW_EFFICIENCY = 0.8
SPEC_LINK_EFFICIENCY = 0.8
SPEC_LATENCY_S = {"intra_node": 10e-6, "inter_node": 25e-6}
# Until measured: FlashAttention's causal kernels run at about 60 % of the large-GEMM rate; eager
# PyTorch takes about 2.2x the element-wise minimum at the memory's bandwidth (unfused RoPE and SwiGLU, the
# fp32 loss; the fp32 residual stream and the casts counted: H100, fitted 2026-11-29), compile 0.85x (it
# fuses the norms with their casts and adds); a Python host dispatches an eager step's kernels in about 2 ms plus
# 2 ms per layer (forward and backward, ~100 kernels at ~20 us).
SPEC_ATTENTION_EFFICIENCY = 0.6
SPEC_ELEMENTWISE_FACTOR = {"eager": 2.2, "compiled": 0.85}
SPEC_HOST_S = {"per_step": 2e-3, "per_layer": 2e-3}
# Inference until measured: an eager prefill forward dispatches ~20 kernels per layer; a decode
# step (a replayed CUDA graph) adds its launch, the sampling and the token's copy to the host.
SPEC_PREFILL_HOST_S = {"per_step": 1e-3, "per_layer": 0.4e-3}
SPEC_DECODE_HOST_S = {"per_step": 0.2e-3, "per_layer": 0.0}


def spec_calibration(hw: HardwareConfig, dtype: str) -> Calibration:
    """The hardware config's peaks scaled by the typical efficiencies; missing figures named."""
    missing = [n for n, v in (("peak_tflops." + dtype, hw.peak_tflops.get(dtype)),
                              ("hbm_bandwidth_gbps", hw.hbm_bandwidth_gbps),
                              ("link_bandwidth_gbps", hw.link_bandwidth_gbps)) if not v]
    if missing:
        raise ConfigError(f"hardware={hw.name} has no {', '.join(missing)} and there is no calibration profile "
                          f"for it: run `parbench calibrate hardware={hw.name}` or set the hardware figures")
    inter = hw.inter_node_bandwidth_gbps or hw.link_bandwidth_gbps
    host = SPEC_HOST_S if hw.device_type != "cpu" else {"per_step": 0.0, "per_layer": 0.0}
    return Calibration(host_s_per_step=host["per_step"], host_s_per_layer=host["per_layer"],
        attention_tflops=hw.peak_tflops[dtype] * SPEC_MATMUL_EFFICIENCY * SPEC_ATTENTION_EFFICIENCY,
        elementwise_factor=dict(SPEC_ELEMENTWISE_FACTOR),
        **({"prefill_host_s": dict(SPEC_PREFILL_HOST_S), "decode_host_s": dict(SPEC_DECODE_HOST_S)}
           if hw.device_type != "cpu" else {}),
        hardware=hw.name, source="spec", dtype=dtype, matmul_tflops=hw.peak_tflops[dtype] * SPEC_MATMUL_EFFICIENCY,
        membw_gbps=hw.hbm_bandwidth_gbps * SPEC_MEMBW_EFFICIENCY,
        intra_node=LinkFit(SPEC_LATENCY_S["intra_node"], hw.link_bandwidth_gbps * SPEC_LINK_EFFICIENCY),
        inter_node=LinkFit(SPEC_LATENCY_S["inter_node"], inter * SPEC_LINK_EFFICIENCY))


def calibration_for(hw: HardwareConfig, dtype: str, ref: Optional[str]) -> Calibration:
    """The named profile, else this machine's or the shipped <hardware>.yaml (either in `dtype`),
    else the spec figures."""
    if ref:
        return in_dtype(load_calibration(ref), hw, dtype)
    if calibration_path(hw.name).exists():
        return in_dtype(load_calibration(hw.name), hw, dtype)
    return spec_calibration(hw, dtype)


def decode_calls_in(table: dict[str, dict[str, float]], measured: str, dtype: str) -> dict[str, dict[str, float]]:
    """Decode attention calls measured in one dtype keyed by the positions of another that read as many bytes."""
    def positions(shape: str) -> str:
        blocks, length = shape.split("x")
        return f"{blocks}x{max(1, round(int(length) * ITEMSIZE[measured] / ITEMSIZE[dtype]))}"

    return {kind: {positions(shape): s for shape, s in calls.items()} for kind, calls in table.items()}


def in_dtype(cal: Calibration, hw: HardwareConfig, dtype: str) -> Calibration:
    """A profile measured in another dtype, its GEMM and attention rates scaled by the two dtypes' peaks
    (an fp32 run on a bf16 profile: 67 / 989 on an H100), its decode attention calls by the bytes they read
    (an fp32 cache of 512 positions reads what a bf16 one of 1,024 does); bytes and host times do not
    depend on it. Its prefill GEMMs, timed by bytes, stand for a slower dtype's (fp32 on a bf16 profile: their
    FLOPs at the scaled rate are the longer side) but not for a faster one's, whose GEMMs they would hold to
    the profile's FLOPs: there the weights' read at the bandwidth stands in."""
    peaks = hw.peak_tflops
    if cal.dtype == dtype or dtype not in peaks or cal.dtype not in peaks:
        return cal
    r = peaks[dtype] / peaks[cal.dtype]
    rates = ("attention_tflops", "attention_forward_tflops")
    widths = {k: {f: v * r if f in rates else v for f, v in figures.items()} for k, figures in cal.attention_widths.items()}
    return replace(cal, dtype=dtype, decode_attention_s=decode_calls_in(cal.decode_attention_s, cal.dtype, dtype),
                   prefill_gemm_s=cal.prefill_gemm_s if r <= 1 else {},
                   matmul_tflops=cal.matmul_tflops * r, attention_tflops=cal.attention_tflops * r,
                   attention_forward_tflops=cal.attention_forward_tflops * r, attention_widths=widths,
                   matmul_half_gflop=cal.matmul_half_gflop * r,
                   source=f"{cal.source} (its {cal.dtype} rates x {r:.3g} for {dtype})")
