"""What inference runs support: each run's figures with their intervals, the tp/pp runs against the
matching single-device run (overhead and efficiency, flagged above 100 %), and the verdict per
request shape (input length, batch, output length): the best layout only where the intervals
clear."""

from __future__ import annotations

import numpy as np
import pandas as pd

from parbench.report import fmt, noise
from parbench.tracking.store import Store

# Runs that differ only in the layout are compared: these params must match.
SAME_REQUEST = ("params.workload.engine", "params.workload.input_len", "params.workload.output_len",
                "params.workload.batch_size", "params.workload.dtype", "decode_mode",
                "params.model.name", "params.hardware.name")
# (metric, lower is better): overhead % = layout / single device - 1, sign so that + is worse.
COMPARED = (("ttft_s_p50", True), ("tpot_s_p50", True), ("e2e_s_p50", True), ("output_tokens_per_s", False))
SHAPE = ["input_len", "batch_size", "output_len"]


def metric(runs: pd.DataFrame, name: str) -> pd.Series:
    return runs.get(f"metrics.{name}", pd.Series(np.nan, index=runs.index)).astype(float)


def with_intervals(runs: pd.DataFrame) -> pd.DataFrame:
    """Output tokens/s with the interval its E2E median gives (tokens/s = tokens / E2E per batch):
    output_tokens_per_s_ci_low/_high, and each run's flags in `notes`."""
    runs = runs.copy()
    tok_s, e2e = metric(runs, "output_tokens_per_s"), metric(runs, "e2e_s_p50")
    runs["output_tokens_per_s"] = tok_s
    runs["output_tokens_per_s_ci_low"] = tok_s * e2e / metric(runs, "e2e_s_ci_high")
    runs["output_tokens_per_s_ci_high"] = tok_s * e2e / metric(runs, "e2e_s_ci_low")
    runs["notes"] = [noise.notes(noise.wide_note(v, lo, hi)) for v, lo, hi in
                     zip(tok_s, runs["output_tokens_per_s_ci_low"], runs["output_tokens_per_s_ci_high"])]
    return runs


def single_device_match(run: pd.Series, runs: pd.DataFrame) -> pd.Series | None:
    """The single-device run with the same request, engine, model and dtype (the latest)."""
    match = runs[runs["devices"] == 1]
    for key in SAME_REQUEST:
        if key in runs:  # runs logged before a param existed lack its column
            match = match[match[key] == run[key]]
    return None if match.empty else match.iloc[-1]


def scaling_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per multi-device run that has a matching single-device run: overhead % per compared
    metric, efficiency = tokens/s / (single-device tokens/s x devices) with its interval, flags."""
    runs = with_intervals(runs)
    rows = []
    for _, run in runs[runs["devices"] > 1].iterrows():
        base = single_device_match(run, runs)
        if base is None:
            continue
        row = {"run_id": run["run_id"], "layout": run["layout"], "devices": run["devices"],
               "input_len": run["input_len"], "batch_size": run["batch_size"], "baseline_run_id": base["run_id"]}
        for name, lower_better in COMPARED:
            value, ref = run.get(f"metrics.{name}"), base.get(f"metrics.{name}")
            if pd.notna(value) and pd.notna(ref) and ref:
                ratio = value / ref
                row[f"overhead_pct_{name}"] = 100 * (ratio - 1 if lower_better else 1 / ratio - 1)
        if pd.notna(run["output_tokens_per_s"]) and base["output_tokens_per_s"]:
            row["scaling_efficiency"] = run["output_tokens_per_s"] / (base["output_tokens_per_s"] * run["devices"])
            low, high = noise.ratio_interval(run["output_tokens_per_s_ci_low"], run["output_tokens_per_s_ci_high"],
                                             base["output_tokens_per_s_ci_low"], base["output_tokens_per_s_ci_high"])
            row["scaling_efficiency_ci_low"], row["scaling_efficiency_ci_high"] = low / run["devices"], high / run["devices"]
            row["notes"] = noise.efficiency_note(row["scaling_efficiency"], row["scaling_efficiency_ci_low"])
        rows.append(row)
    return pd.DataFrame(rows)


def log_scaling(store: Store, table: pd.DataFrame) -> None:
    """Each multi-device run gets its overhead and efficiency as its own MLflow metrics."""
    for _, row in table.iterrows():
        metrics = {k: v for k, v in row.items()
                   if (k.startswith("overhead_pct_") or k.startswith("scaling_efficiency")) and pd.notna(v)}
        store.log_metrics(row["run_id"], metrics)


def shape_label(input_len: int, batch: int, output_len: int) -> str:
    """A request shape as the run names write it: `in64 out16 bs4`."""
    return f"in{input_len} out{output_len} bs{batch}"


def verdict(runs: pd.DataFrame) -> list[str]:
    """Per model and request shape with several layouts: the layout with the most output tokens/s
    where its interval clears the others', else the layouts that cannot be told apart; the lowest
    TTFT too. Runs of two models are never ranked against each other (their labels name the model)."""
    runs = with_intervals(runs)
    lines = []
    for (_, *shape), group in runs.groupby(["model", *SHAPE]):
        if group["layout"].nunique() < 2:
            continue
        rank = noise.ranking(group["output_tokens_per_s"], group["output_tokens_per_s_ci_low"],
                             group["output_tokens_per_s_ci_high"])
        best = group.loc[group["output_tokens_per_s"].idxmax()]
        figure = (f"{fmt.rate(best['output_tokens_per_s'], 'tok/s')} "
                  f"({noise.interval_text(best['output_tokens_per_s_ci_low'], best['output_tokens_per_s_ci_high'], fmt.number)})")
        if rank[best.name] == "fastest":
            text = f"**{best['layout']}** has the most output tokens/s, {figure}, clear of the others' intervals"
        else:
            tied = group.loc[rank[rank == "tied for fastest"].index, "layout"]
            text = f"no winner in output tokens/s: {', '.join(f'**{t}**' for t in tied)} overlap (best median {best['layout']}, {figure})"
        lines.append(f"{shape_label(*shape)}: {text}; {_ttft_verdict(group)}.")
    return lines


def _ttft_verdict(group: pd.DataFrame) -> str:
    """The lowest TTFT, or the layouts whose TTFT intervals overlap it."""
    ttft = metric(group, "ttft_s_p50")
    rank = noise.ranking(-ttft, -metric(group, "ttft_s_ci_high"), -metric(group, "ttft_s_ci_low"))
    best = group.loc[ttft.idxmin()]
    if rank[best.name] == "fastest":
        return f"lowest TTFT: **{best['layout']}** ({fmt.seconds(best['metrics.ttft_s_p50'])})"
    tied = group.loc[rank[rank == "tied for fastest"].index, "layout"]
    return f"TTFT: {', '.join(tied)} overlap (lowest median {best['layout']}, {fmt.seconds(best['metrics.ttft_s_p50'])})"
