"""Request latencies with vLLM's definitions, throughput, and decode memory-bandwidth use (MBU).

    TTFT  = first token time - request start           (prefill + first sampling)
    TPOT  = (E2E - TTFT) / (output_len - 1)            (per request)
    ITL   = time between consecutive output tokens     (every gap of every request)
    E2E   = last token time - request start
    prefill_dispatch_s = the host's time to queue the prefill, no synchronise (native engine);
          as long as TTFT: the prefill is host-bound
    output_tokens_per_s = output tokens of all measured requests / their total time
    requests_per_s      = measured requests / their total time
    MBU   = (weight bytes + KV bytes read per decode step) / TPOT / (peak HBM bandwidth x devices)
    prefill MFU = prefill FLOPs / TTFT / (peak dense FLOP/s x devices), the FLOPs of the forward
          over the prompts with the causal convention (the masked half of the scores not counted):
          batch x (2 (N - head) T + 2 head + 2 L d_attn T^2), T = input_len; the head runs on
          the last position only (as in vLLM). TTFT includes the first sampling.
The byte and FLOP counts are parbench.metrics.inference_cost's.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from parbench.metrics.timing import median_ci_order, percentile

LATENCIES = ("ttft_s", "tpot_s", "itl_s", "e2e_s")


@dataclass(frozen=True)
class RequestTiming:
    """One request's latencies; `itls` only when the engine reports every token's time."""

    ttft: float
    e2e: float
    output_tokens: int
    itls: tuple[float, ...] = ()

    @classmethod
    def from_token_times(cls, times: list[float]) -> "RequestTiming":
        """From the seconds between the request's start and each of its output tokens."""
        return cls(times[0], times[-1], len(times), tuple(b - a for a, b in zip(times, times[1:])))

    @property
    def tpot(self) -> float | None:
        n = self.output_tokens
        return (self.e2e - self.ttft) / (n - 1) if n > 1 else None


def distribution(values: list[float], name: str) -> dict[str, float]:
    """`name` (median), name_p50/p90/p99 and name_mean, as vLLM's benchmark reports them."""
    if not values:
        return {}
    stats = {f"{name}_p{q}": percentile(values, q) for q in (50, 90, 99)}
    return {name: stats[f"{name}_p50"], **stats, f"{name}_mean": sum(values) / len(values)}


@dataclass(frozen=True)
class BatchTiming:
    """One measured batch: its requests and the wall time from submitting them to the last token."""

    requests: list[RequestTiming]
    wall_s: float
    prefill_dispatch_s: float | None = None  # the host's time to queue the prefill (native engine)


def latency_metrics(batches: list[BatchTiming], output_len: int, confidence: float) -> dict[str, float]:
    """Distributions over requests (ITL over every token gap), the medians' confidence intervals
    over batches; throughput over the batches' time."""
    requests = [r for b in batches for r in b.requests]
    total_time = sum(b.wall_s for b in batches)
    return {
        **median_intervals(batches, confidence),
        **distribution([r.ttft for r in requests], "ttft_s"),
        **distribution([r.tpot for r in requests if r.tpot is not None], "tpot_s"),
        **distribution([gap for r in requests for gap in r.itls], "itl_s"),
        **distribution([r.e2e for r in requests], "e2e_s"),
        **distribution([b.prefill_dispatch_s for b in batches if b.prefill_dispatch_s is not None], "prefill_dispatch_s"),
        "requests_per_s": len(requests) / total_time,
        "output_tokens_per_s": len(requests) * output_len / total_time,
        "requests_measured": float(len(requests)),
    }


def median_intervals(batches: list[BatchTiming], confidence: float) -> dict[str, float]:
    """`<latency>_ci_low/_ci_high/_ci_level` for TTFT, TPOT and E2E: the interval of the median over
    the batches' medians (a batch's requests run together, so batches are the independent samples)."""
    metrics: dict[str, float] = {}
    for name, latency in (("ttft_s", lambda r: r.ttft), ("tpot_s", lambda r: r.tpot), ("e2e_s", lambda r: r.e2e)):
        per_batch = [statistics.median(values) for b in batches
                     if (values := [v for r in b.requests if (v := latency(r)) is not None])]
        if per_batch:
            low, high, level = median_ci_order(per_batch, confidence)
            metrics.update({f"{name}_ci_low": low, f"{name}_ci_high": high, f"{name}_ci_level": level})
    return metrics


def mbu_metrics(weight_bytes: float, kv_bytes: float, tpot_s: float | None, devices: int,
                hbm_bandwidth_gbps: float | None) -> tuple[dict[str, float], dict[str, str]]:
    """Achieved decode bandwidth and MBU; MBU is n/a (a tag, no metric) without a peak bandwidth."""
    if not tpot_s:
        return {}, {"mbu": "n/a (output_len 1 has no decode step)"}
    achieved = (weight_bytes + kv_bytes) / tpot_s / 1e9
    metrics = {"decode_bytes_per_step": weight_bytes + kv_bytes, "decode_bandwidth_gbps": achieved}
    if not hbm_bandwidth_gbps:
        return metrics, {"mbu": "n/a (hardware.hbm_bandwidth_gbps is not set for this hardware)"}
    return {**metrics, "mbu": achieved / (hbm_bandwidth_gbps * devices)}, {}


def prefill_mfu_metrics(flops: float, ttft_s: float | None, devices: int,
                        peak_tflops: float | None) -> tuple[dict[str, float], dict[str, str]]:
    """Prefill FLOP/s and MFU from the TTFT; MFU is n/a (a tag) without a peak for the dtype."""
    if not ttft_s:
        return {}, {}
    metrics = {"prefill_flops": flops, "prefill_tflops": flops / ttft_s / 1e12}
    if not peak_tflops:
        return metrics, {"prefill_mfu": "n/a (hardware.peak_tflops has no entry for workload.dtype)"}
    return {**metrics, "prefill_mfu": flops / ttft_s / (peak_tflops * 1e12 * devices)}, {}
