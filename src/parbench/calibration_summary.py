"""What `parbench calibrate` prints of the profile it fitted: each figure group on a line, then its notes."""

from __future__ import annotations

from pathlib import Path

from parbench.config.schema import Config
from parbench.fmt import format_metric
from parbench.metrics.fits import by_count
from parbench.predict.calibration import ATTENTION_FIELDS, Calibration
from parbench.workloads.specs.microbench import human_size


def decode_gemm_summary(cal: Calibration) -> str:
    if not cal.decode_gemm_s:
        return "decode GEMMs: weights at the memory's bandwidth"
    return "decode GEMMs: " + ", ".join(f"{human_size(int(b))} {format_metric('latency_s', s)}" for b, s in
                                        cal.decode_gemm_s.items()) + f" (unaligned x{cal.decode_unaligned_factor:.2f})"


def prefill_gemm_summary(cal: Calibration, weight_bytes: int = 32 << 20) -> str:
    """The prefill GEMMs' memory side at one size, by the measured row counts."""
    counts = by_count(cal.prefill_gemm_s)
    if not counts:
        return "prefill GEMMs: weights at the memory's bandwidth"
    return f"prefill GEMMs on {human_size(weight_bytes)}: " + ", ".join(
        f"{rows} rows {format_metric('latency_s', cal.prefill_gemm_seconds(rows, weight_bytes))}" for rows in counts)


def decode_attention_summary(cal: Calibration) -> str:
    if not cal.decode_attention_s:
        return f"decode attention: KV cache read x{cal.kv_read_factor:.3g}"
    def kind_range(calls: dict[str, float]) -> str:
        """The grid's size and its two corners (a grid holds up to a few dozen calls)."""
        counts, (first, last) = by_count(calls), (min(calls, key=calls.get), max(calls, key=calls.get))
        return (f"{len(counts)} block counts x {len(next(iter(counts.values())))} lengths, "
                f"{first} {format_metric('latency_s', calls[first])} to {last} {format_metric('latency_s', calls[last])}")

    return "decode attention calls: " + ", ".join(f"{kind} heads {kind_range(calls)}"
                                                  for kind, calls in cal.decode_attention_s.items())


def attention_summary(cal: Calibration) -> str:
    widths = cal.attention_widths or {"every": {f: getattr(cal, f) for f in ATTENTION_FIELDS}}

    def curve(f: dict, prefix: str) -> str:
        return (f"{format_metric('tflops', f[f'{prefix}_tflops'])} +{f[f'{prefix}_extra_positions']:.0f} keys a query "
                f"+ {format_metric('latency_s', f[f'{prefix}_call_s'])} a call")

    return "attention " + ", ".join(f"{width}: {curve(f, 'attention')} (forward {curve(f, 'attention_forward')})"
                                    for width, f in widths.items())


def kernels_summary(cal: Calibration) -> str:
    """The replayed prefill's kernels a layer by block structure, where counted."""
    counted = ", ".join(f"{structure} {k:.1f}" for structure, k in sorted(cal.prefill_kernels_per_layer.items()))
    return f" (kernels a layer: {counted})" if counted else ""


def grouped_summary(cal: Calibration) -> str:
    """The grouped GEMMs' roofline, where the grouped runs fitted it."""
    if not cal.grouped_matmul_tflops:
        return "grouped GEMMs on that curve"
    return (f"grouped {format_metric('tflops', cal.grouped_matmul_tflops)}, reads "
            f"{format_metric('membw_gbps', cal.grouped_read_gbps)} x (rows a group)^{cal.grouped_read_rows_exp:.3g}, "
            f"{cal.grouped_call_s * 1e6:.1f} µs a call, "
            f"p {cal.grouped_roofline_p:.2g}")


def summary(cfg: Config, cal: Calibration, notes: list[str], path: Path) -> str:
    link = cal.inter_node if cfg.hardware.nodes > 1 else cal.intra_node
    return "\n".join([
        f"[calibrate] matmul {format_metric('tflops', cal.matmul_tflops)} (half at {cal.matmul_half_gflop:.3g} "
        f"GFLOP; {grouped_summary(cal)}), {attention_summary(cal)}, memory "
        f"{format_metric('membw_gbps', cal.membw_gbps)}, link {format_metric('busbw_gbps', link.busbw_gbps)} + "
        f"{format_metric('latency_s', link.latency_s)}, overlap dp {100 * cal.overlap['dp']:.1f} % fsdp "
        f"{100 * cal.overlap['fsdp']:.1f} %",
        f"[calibrate] inference host: prefill {cal.prefill_host_s}, replayed prefill "
        f"{cal.prefill_graph_host_s or 'as a decode step'}{kernels_summary(cal)}, decode {cal.decode_host_s}; "
        f"{decode_gemm_summary(cal)}, "
        f"x{cal.weight_read_factor:.3g} in the engine; {decode_attention_summary(cal)}; {prefill_gemm_summary(cal)}",
        f"[calibrate] element-wise x{cal.elementwise_factor}, q/k norms x{cal.qk_norm_factor}, recompute "
        f"{cal.recompute}, activations x{cal.activation_scale}, bytes per logit {cal.logits_bytes}, per head "
        f"element {cal.head_grad_bytes}, memory overhead {format_metric('overhead_gb', cal.memory_overhead_gb)}, "
        f"host {format_metric('host_s', cal.host_s_per_step)}"
        f" per step + {format_metric('host_s', cal.host_s_per_dispatch)} per dispatch"
        + "".join(f" + {format_metric('host_s', cal.host_s_per_replayed_layer.get(mode, 0.0))} per {mode}-checkpointed "
                  f"layer and {format_metric('host_s', cal.host_s_per_replayed_call.get(mode, 0.0))} per call it replays"
                  for mode in sorted({*cal.host_s_per_replayed_call, *cal.host_s_per_replayed_layer}))
        + "".join(f", {strategy} +{format_metric('host_s', s)} a dispatch" for strategy, s in cal.host_s_per_dispatch_by_strategy.items())
        + (f", an MoE layer +{format_metric('host_s', cal.host_s_per_moe_layer)}" if cal.host_s_per_moe_layer else "")
        + (f"; on several ranks {format_metric('host_s', cal.host_s_several_ranks['per_step'])} per step + "
           f"{format_metric('host_s', cal.host_s_several_ranks['per_dispatch'])} per dispatch" if cal.host_s_several_ranks else ""),
        *(f"[calibrate] note: {n}" for n in notes), f"[calibrate] saved {path}"])
