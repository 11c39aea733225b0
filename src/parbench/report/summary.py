"""Readable tables of run metrics for the terminal and CSV."""

from __future__ import annotations

import re
from textwrap import shorten

import pandas as pd

from parbench.fmt import format_metric

# Shown when present, in this order; the rest of a run lives in MLflow.
TABLE_METRICS = ("throughput_tokens_per_s", "throughput_tokens_per_s_per_device", "step_time_s",
                 "step_time_s_p90", "mfu", "mfu_nocausal", "comm_pct", "exposed_comm_pct", "bubble_pct",
                 "bubble_pct_theory", "mem_peak_allocated_gb", "loss_final", "ttft_s_p50", "tpot_s_p50", "e2e_s_p50",
                 "output_tokens_per_s", "mbu", "matmul_tflops", "matmul_peak_fraction", "busbw_gbps_avg",
                 "wrong_elements", "membw_gbps", "p2p_gbps_mean")
TABLE_TAGS = ("mlflow.runName", "status_reason")


def sweep_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per point: name, status, the headline metrics, the run reused (resume), failure reason
    (cut at a word)."""
    if runs.empty:
        return pd.DataFrame(columns=["run", "status"])
    table = pd.DataFrame({"run": runs.get("tags.mlflow.runName"), "status": runs["status"]})
    for metric in TABLE_METRICS:
        column = f"metrics.{metric}"
        if column in runs and runs[column].notna().any():
            table[metric] = runs[column]
    if "reused" in runs and runs["reused"].any():  # a resumed sweep's points run before
        table["reused"] = [run_id[:8] if reused else "" for run_id, reused in zip(runs["run_id"], runs["reused"])]
    if "tags.failure_reason" in runs:
        table["failure_reason"] = [shorten(str(r), 100, placeholder=" ...") for r in runs["tags.failure_reason"].fillna("")]
    return table.reset_index(drop=True)


def format_runs(table: pd.DataFrame, title: str) -> str:
    shown = _formatted(table)
    body = shown.to_string(index=False) if len(shown) else "(no runs)"
    rule = "=" * min(120, max(len(title), max((len(line) for line in body.splitlines()), default=0)))
    return f"\n{rule}\n{title}\n{rule}\n{body}\n"


def metrics_table(metrics: dict[str, float], keys: tuple[str, ...]) -> str:
    """Two columns, metric and value, for one run; a `*` in a key matches one `/`-separated segment."""
    rows = [(k, metrics[k]) for key in keys for k in metrics if re.fullmatch(_pattern(key), k)]
    width = max((len(k) for k, _ in rows), default=10)
    return "\n".join(f"  {k:<{width}}  {format_metric(k, v)}" for k, v in rows)


def _pattern(key: str) -> str:
    return "[^/]*".join(re.escape(part) for part in key.split("*"))


def _formatted(table: pd.DataFrame) -> pd.DataFrame:
    """Each metric column in its unit; columns empty everywhere left out."""
    shown = table.dropna(axis=1, how="all").copy()
    for column in shown.columns:
        if pd.api.types.is_numeric_dtype(shown[column]):
            shown[column] = [format_metric(column, v) for v in shown[column]]
    return shown
