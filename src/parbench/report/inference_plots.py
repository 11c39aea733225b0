"""Figures of inference sweeps: latency (ms) against input length with interval whiskers and fitted
lines, TTFT/TPOT against batch size, output tokens/s per layout and request shape with whiskers
(the op-share pies are metrics.plots.plot_phase_pies, which the inference workers draw too).
Each layout has one colour in every figure."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import FuncFormatter

from parbench.metrics.fits import fit_line
from parbench.metrics.plots import _save as save
from parbench.report.style import HALF_WIDTH_IN, WIDE_IN, palette, slanted

LATENCY_TITLES = {"ttft_s_p50": "TTFT (median)", "e2e_s_p50": "end-to-end latency (median)",
                  "tpot_s_p50": "TPOT (median)"}
MS = 1e3


def layout_colours(runs: pd.DataFrame) -> dict[str, tuple]:
    return palette(list(runs["layout"]))  # the runs come by device count, then layout


def series_label(layout: str, batch: int, output_len: int, many_batches: bool, many_outputs: bool) -> str:
    return layout + (f" bs{batch}" if many_batches else "") + (f" out{output_len}" if many_outputs else "")


def _latency_whiskers(group: pd.DataFrame, metric: str) -> list[np.ndarray] | None:
    name = metric.removesuffix("_p50")
    low, high = f"metrics.{name}_ci_low", f"metrics.{name}_ci_high"
    if low not in group:
        return None
    value = group[f"metrics.{metric}"].to_numpy(float)
    return [np.nan_to_num(np.clip(value - group[low].to_numpy(float), 0, None)) * MS,
            np.nan_to_num(np.clip(group[high].to_numpy(float) - value, 0, None)) * MS]


def plot_latency_vs_input(runs: pd.DataFrame, path: Path, min_fit_inputs: int) -> Path | None:
    """TTFT and E2E (ms) against input length, one series per layout, batch and output length;
    a least-squares line only over min_fit_inputs input lengths or more, and only where its slope's
    interval excludes 0 (a flat line through noise says nothing)."""
    if runs["input_len"].nunique() < 2:
        return None
    many_batches, many_outputs = runs["batch_size"].nunique() > 1, runs["output_len"].nunique() > 1
    colours = layout_colours(runs)
    fig, axes = plt.subplots(1, 2, figsize=(WIDE_IN, 4.8))
    for ax, metric in zip(axes, ("ttft_s_p50", "e2e_s_p50")):
        for (layout, batch, out_len), group in runs.groupby(["layout", "batch_size", "output_len"], sort=False):
            group = group.sort_values("input_len")
            x, y = group["input_len"].to_numpy(float), group[f"metrics.{metric}"].to_numpy(float) * MS
            ax.errorbar(x, y, yerr=_latency_whiskers(group, metric), fmt="o", capsize=4, color=colours[layout],
                        label=series_label(layout, batch, out_len, many_batches, many_outputs))
            line = fit_line(x, y) if len(np.unique(x)) >= min_fit_inputs else None
            if line is not None and (line.slope_low > 0 or line.slope_high < 0):  # a trend beyond noise
                grid = np.linspace(x.min(), x.max(), 50)
                ax.plot(grid, line(grid), "-", color=colours[layout], alpha=0.7)
        ax.set(xlabel="input length (tokens)", ylabel="ms", title=f"{LATENCY_TITLES[metric]} vs input length")
        ax.grid(alpha=0.3)
    axes[0].legend()
    return save(fig, path)


def plot_vs_batch(runs: pd.DataFrame, path: Path) -> Path | None:
    """TTFT and TPOT (ms) against batch size, one series per layout and input length."""
    if runs["batch_size"].nunique() < 2:
        return None
    colours = layout_colours(runs)
    fig, axes = plt.subplots(1, 2, figsize=(WIDE_IN, 4.8))
    for ax, metric in zip(axes, ("ttft_s_p50", "tpot_s_p50")):
        for (layout, length), group in runs.groupby(["layout", "input_len"], sort=False):
            group = group.sort_values("batch_size")
            ax.errorbar(group["batch_size"], group[f"metrics.{metric}"] * MS, yerr=_latency_whiskers(group, metric),
                        fmt="o-", capsize=4, color=colours[layout], label=f"{layout} in{length}")
        ax.set(xlabel="batch size", ylabel="ms", title=f"{LATENCY_TITLES[metric]} vs batch size",
               xscale="log", yscale="log")
        ax.grid(alpha=0.3)
    axes[0].legend()
    return save(fig, path)


def plot_throughput_bars(runs: pd.DataFrame, path: Path) -> Path | None:
    """Output tokens/s per layout (bars side by side, one colour each), grouped by request shape,
    whiskers from output_tokens_per_s_ci_low/_high."""
    if runs["output_tokens_per_s"].isna().all():
        return None
    shapes = list(dict.fromkeys(zip(runs["input_len"], runs["batch_size"], runs["output_len"])))
    layouts = list(dict.fromkeys(runs["layout"]))
    colours, width = layout_colours(runs), 0.8 / len(layouts)
    many_outputs = runs["output_len"].nunique() > 1
    fig, ax = plt.subplots(figsize=(max(HALF_WIDTH_IN, 0.5 * len(shapes) * len(layouts) + 3), 4.8))
    for i, layout in enumerate(layouts):
        rows = runs[runs["layout"] == layout].set_index(["input_len", "batch_size", "output_len"])
        rows = rows[~rows.index.duplicated(keep="last")].reindex(shapes)
        value = rows["output_tokens_per_s"]
        whisker = [(value - rows["output_tokens_per_s_ci_low"]).clip(lower=0).fillna(0),
                   (rows["output_tokens_per_s_ci_high"] - value).clip(lower=0).fillna(0)]
        ax.bar(np.arange(len(shapes)) + (i - (len(layouts) - 1) / 2) * width, value, width, yerr=whisker,
               capsize=4, color=colours[layout], label=layout)
    ax.set_xticks(range(len(shapes)), [f"in{i} bs{b}" + (f" out{o}" if many_outputs else "") for i, b, o in shapes])
    slanted(ax)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.set(xlabel="request shape (input length, batch)", ylabel="output tokens/s", title="Throughput per layout")
    ax.grid(axis="y", alpha=0.3)
    ax.legend()
    return save(fig, path)
