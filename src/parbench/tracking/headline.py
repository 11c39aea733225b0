"""The figures a person looks for first in the MLflow UI, per workload, and a child run's short
description made of them (its own figures, its status, where its trace is and how to open it)."""

from __future__ import annotations

from urllib.parse import quote

from parbench.fmt import format_metric

# workload -> (the figure that ranks runs, higher first; the figures shown beside it). Lower-is-better
# figures (latencies) are shown, never ranked by.
HEADLINES: dict[str, tuple[str, tuple[str, ...]]] = {
    "train": ("throughput_tokens_per_s", ("throughput_tokens_per_s", "mfu", "comm_pct", "mem_peak_allocated_gb")),
    "inference": ("output_tokens_per_s", ("output_tokens_per_s", "ttft_s_p50", "tpot_s_p50", "mem_peak_allocated_gb")),
    "collectives": ("busbw_gbps_avg", ("busbw_gbps_avg",)),
    "matmul": ("matmul_tflops", ("matmul_tflops", "matmul_peak_fraction")),
    "membw": ("membw_gbps", ("membw_gbps", "membw_peak_fraction")),
    "p2p": ("p2p_gbps_mean", ("p2p_gbps_mean",)),
}
NAMES = {"throughput_tokens_per_s": "tokens/s", "mfu": "MFU", "comm_pct": "comm", "mem_peak_allocated_gb": "peak memory",
         "output_tokens_per_s": "output tokens/s", "ttft_s_p50": "TTFT p50", "tpot_s_p50": "TPOT p50",
         "busbw_gbps_avg": "bus bandwidth", "matmul_tflops": "matmul", "matmul_peak_fraction": "of peak",
         "membw_gbps": "memory bandwidth", "membw_peak_fraction": "of peak", "p2p_gbps_mean": "GPU-to-GPU copy"}
PERFETTO = "https://ui.perfetto.dev"
TRACE_HINT = (f"Traces (`profile/*.json.gz`): download one and open it at {PERFETTO} (Open trace file; it reads "
              "the gzip as it is), or in chrome://tracing. MLflow's Traces tab is for GenAI traces and stays empty.")


def headline(workload: str) -> tuple[str, tuple[str, ...]]:
    """(ranking metric, shown metrics) of a workload; unknown workloads rank by nothing."""
    return HEADLINES.get(workload, ("", ()))


def figures_line(metrics: dict[str, float], names: tuple[str, ...]) -> str:
    """`tokens/s 43,090 tok/s · MFU 38.5 % · ...` of the figures the run has."""
    return " · ".join(f"{NAMES.get(n, n)} **{format_metric(n, metrics[n])}**" for n in names if n in metrics)


def child_description(metrics: dict[str, float], workload: str, status: str, reason: str, traced: bool) -> str:
    """A child run's description (Markdown): its status, its own headline figures, the trace hint."""
    lines = [f"**{status}**" + (f": {reason[:300]}" if reason else "")]
    figures = figures_line(metrics, headline(workload)[1])
    if figures:
        lines.append(figures)
    if traced:
        lines.append(TRACE_HINT)
    return "\n\n".join(lines)


def runs_link(experiment_id: str, parent_id: str, order_by: str) -> str:
    """The MLflow UI's runs table of one sweep's children, sorted by `order_by` (highest first)."""
    query = f"searchFilter={quote(f'tags.`mlflow.parentRunId` = {chr(39)}{parent_id}{chr(39)}')}"
    if order_by:
        query += f"&orderByKey={quote(f'metrics.`{order_by}`')}&orderByAsc=false"
    return f"http://127.0.0.1:5000/#/experiments/{experiment_id}/runs?{query}"
