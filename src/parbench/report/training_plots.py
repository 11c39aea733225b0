"""Figures of the training section: throughput with interval whiskers, speedup against one
baseline and ideal, the step breakdown, memory against capacity and time per layer across
profiled runs. Every figure lists the runs in the table's order, each in its own colour."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import FuncFormatter

from parbench.metrics.plots import _save, heatmap, layers_in_order, runs_breakdown_plot
from parbench.report.style import HALF_WIDTH_IN, palette, slanted

THOUSANDS = FuncFormatter(lambda v, _: f"{v:,.0f}")


def _bar_size(count: int) -> tuple[float, float]:
    return max(HALF_WIDTH_IN, 0.8 * count + 2.5), 4.8


def whiskers(values: pd.Series, low: pd.Series, high: pd.Series) -> list[pd.Series]:
    """Error-bar lengths below and above each value (0 where no interval)."""
    return [(values - low).clip(lower=0).fillna(0), (high - values).clip(lower=0).fillna(0)]


def throughput(table: pd.DataFrame, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=_bar_size(len(table)))
    values = table["throughput_tokens_per_s"]
    colours = palette(list(table["run"]))
    ax.bar(table["run"], values, color=[colours[r] for r in table["run"]], capsize=5,
           yerr=whiskers(values, table["throughput_tokens_per_s_ci_low"], table["throughput_tokens_per_s_ci_high"]))
    ax.yaxis.set_major_formatter(THOUSANDS)
    device_groups(ax, table)
    return _bars_done(fig, ax, path, "tokens/s (all devices)", "Training throughput, by device count")


def device_groups(ax, table: pd.DataFrame) -> None:
    """A dotted line between device counts and each group's count above its bars: runs are ranked
    only within a group."""
    devices = list(table["devices"])
    starts = [i for i, d in enumerate(devices) if i == 0 or d != devices[i - 1]]
    for start, end in zip(starts, starts[1:] + [len(devices)]):
        if start:
            ax.axvline(start - 0.5, color="grey", linestyle=":")
        ax.text((start + end - 1) / 2, 1.0, f"{devices[start]} device" + ("s" if devices[start] != 1 else ""),
                transform=ax.get_xaxis_transform(), ha="center", va="bottom", color="grey")


def _bars_done(fig, ax, path: Path, ylabel: str, title: str) -> Path:
    """Labels, slanted run names under the bars, a grid; saved."""
    ax.set_ylabel(ylabel)
    ax.set_title(title, pad=18)  # room for the device-count labels
    slanted(ax)
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, path)


def scaling(table: pd.DataFrame, path: Path, kind: str) -> Path:
    """Speedup against devices: every layout's line starts at the one baseline (1x), whiskers from
    the speedup's interval, the ideal (linear) line dashed."""
    fig, ax = plt.subplots(figsize=(HALF_WIDTH_IN, 4.8))
    base = table[table["run"] == table["baseline"].iloc[0]].iloc[0]
    colours = palette(list(table["run"]))
    for name, group in table[table["devices"] > base["devices"]].groupby("layout", sort=False):
        group = pd.concat([base.to_frame().T, group]).astype({"devices": float, "speedup": float})
        colour = colours[group["run"].iloc[-1]]
        ax.errorbar(group["devices"], group["speedup"], capsize=5, fmt="o-", color=colour, label=name,
                    yerr=whiskers(group["speedup"], group["speedup_ci_low"].astype(float),
                                  group["speedup_ci_high"].astype(float)))
    worlds = np.array(sorted(table["devices"].unique()), dtype=float)
    ax.plot(worlds, worlds / base["devices"], "k--", alpha=0.6, label="ideal")
    ax.plot([base["devices"]], [1.0], "ks", label=f"baseline: {base['run']}")
    ax.set_xticks(worlds, [str(int(w)) for w in worlds])
    ax.set(xlabel="devices", ylabel="speedup (x)", title=f"{kind.capitalize()} scaling against one baseline")
    ax.grid(alpha=0.3)
    ax.legend()
    return _save(fig, path)


def breakdown(frame: pd.DataFrame, path: Path) -> Path:
    return runs_breakdown_plot(frame, path)


def memory(table: pd.DataFrame, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=_bar_size(len(table)))
    colours = palette(list(table["run"]))
    ax.bar(table["run"], table["mem_peak_allocated_gb"], color=[colours[r] for r in table["run"]])
    capacity = table["memory_capacity_gb"].dropna()
    if len(capacity):
        ax.axhline(capacity.max(), color="red", linestyle="--", label=f"capacity {capacity.max():g} GB")
        ax.legend()
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


def layer_heatmap(runs: pd.DataFrame, fetch_artifact, path: Path, order: list[str]) -> Path | None:
    """Runs as columns in the report's order."""
    grid = layer_times(runs, fetch_artifact)
    if grid.empty:
        return None
    grid = grid[[r for r in order if r in grid.columns]]
    return heatmap(grid, path, "Time per layer (rank 0)", "ms per step")
