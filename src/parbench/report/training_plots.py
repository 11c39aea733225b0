"""Figures of the training section: throughput with interval whiskers, speedup against ideal,
the step breakdown, memory against capacity and time per layer across profiled runs."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

from parbench.metrics.plots import _save, heatmap, layers_in_order, runs_breakdown_plot  # noqa: E402

THOUSANDS = FuncFormatter(lambda v, _: f"{v:,.0f}")


def _bar_width(count: int) -> tuple[float, float]:
    return max(6.0, 0.9 * count + 2.5), 4.5


def throughput(table: pd.DataFrame, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=_bar_width(len(table)))
    values = table["throughput_tokens_per_s"]
    low = (values - table["throughput_tokens_per_s_ci_low"]).clip(lower=0).fillna(0)
    high = (table["throughput_tokens_per_s_ci_high"] - values).clip(lower=0).fillna(0)
    colors = ["#4C72B0" if v != "slower" else "#9BB0D3" for v in table["vs_fastest"]]
    ax.bar(table["run"], values, yerr=[low, high], capsize=4, color=colors)
    ax.yaxis.set_major_formatter(THOUSANDS)
    return _bars_done(fig, ax, path, "tokens/s (all devices)", "Training throughput (dark: fastest or indistinguishable)")


def _bars_done(fig, ax, path: Path, ylabel: str, title: str) -> Path:
    """Labels, slanted run names under the bars, a grid; saved."""
    ax.set(ylabel=ylabel, title=title)
    ax.tick_params(axis="x", rotation=30, labelsize=8)
    for label in ax.get_xticklabels():
        label.set_ha("right")
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, path)


def scaling(table: pd.DataFrame, path: Path, kind: str) -> Path:
    """Speedup against devices, a line per layout (parallel config), with the ideal (linear) line."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    base = table["devices"].min()
    for name, group in table.groupby("layout"):
        group = group.sort_values("devices")
        ax.plot(group["devices"], group["speedup"], "o-", label=name)
    worlds = np.array(sorted(table["devices"].unique()), dtype=float)
    ax.plot(worlds, worlds / base, "k--", alpha=0.6, label="ideal")
    ax.set_xticks(worlds, [str(int(w)) for w in worlds])
    ax.set(xlabel="devices", ylabel="speedup (x)", title=f"{kind.capitalize()} scaling against ideal")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def breakdown(frame: pd.DataFrame, path: Path) -> Path:
    return runs_breakdown_plot(frame, path)


def memory(table: pd.DataFrame, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=_bar_width(len(table)))
    ax.bar(table["run"], table["mem_peak_allocated_gb"], color="#55A868")
    capacity = table["memory_capacity_gb"].dropna()
    if len(capacity):
        ax.axhline(capacity.max(), color="red", linestyle="--", label=f"capacity {capacity.max():g} GB")
        ax.legend(fontsize=8)
    return _bars_done(fig, ax, path, "GB per device", "Peak memory per device")


def layer_times(runs: pd.DataFrame, fetch_artifact) -> pd.DataFrame:
    """ms per profiled step of each layer (rows) in each profiled run (columns), rank 0."""
    columns = {}
    profiled = runs.get("params.profile.enabled", pd.Series("False", index=runs.index)) == "True"
    for _, run in runs[profiled].iterrows():
        path = fetch_artifact(run["run_id"], "profile/layers.csv")
        if path is None:
            continue
        layers = pd.read_csv(path)
        steps = float(run.get("params.profile.active_steps", 1) or 1)
        columns[run["label"]] = layers[layers["rank"] == 0].groupby("layer")["total_s"].sum() * 1e3 / steps
    if not columns:
        return pd.DataFrame()
    return layers_in_order(pd.DataFrame(columns).fillna(0.0))


def layer_heatmap(runs: pd.DataFrame, fetch_artifact, path: Path) -> Path | None:
    grid = layer_times(runs, fetch_artifact)
    return None if grid.empty else heatmap(grid, path, "Time per layer (rank 0)", "ms per step")