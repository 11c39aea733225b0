"""Figures of inference sweeps: latency against input length with fitted lines, TTFT/TPOT
against batch size, throughput per layout (the op-share pies are metrics.plots.plot_phase_pies,
which the inference workers draw too)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

from parbench.report.fits import fit_line  # noqa: E402

LATENCY_TITLES = {"ttft_s_p50": "TTFT (median)", "e2e_s_p50": "end-to-end latency (median)",
                  "tpot_s_p50": "TPOT (median)"}


def series_label(layout: str, batch: int, output_len: int, many_outputs: bool) -> str:
    return f"{layout} b={batch}" + (f" out={output_len}" if many_outputs else "")


def plot_latency_vs_input(runs: pd.DataFrame, path: Path) -> Path | None:
    """TTFT and E2E (seconds) against input length, one series per layout, batch and output length,
    each with its least-squares line drawn over the points."""
    if runs["input_len"].nunique() < 2:
        return None
    many_outputs = runs["output_len"].nunique() > 1
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, metric in zip(axes, ("ttft_s_p50", "e2e_s_p50")):
        for (layout, batch, out_len), group in runs.groupby(["layout", "batch_size", "output_len"]):
            x, y = group["input_len"].to_numpy(float), group[f"metrics.{metric}"].to_numpy(float)
            points = ax.plot(x, y, "o", label=series_label(layout, batch, out_len, many_outputs))[0]
            line = fit_line(x, y)
            if line is not None:
                grid = np.linspace(x.min(), x.max(), 50)
                ax.plot(grid, line(grid), "-", color=points.get_color(), alpha=0.7)
        ax.set(xlabel="input length (tokens)", ylabel="seconds", title=f"{LATENCY_TITLES[metric]} vs input length")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    return save(fig, path)


def plot_vs_batch(runs: pd.DataFrame, path: Path) -> Path | None:
    """TTFT and TPOT (seconds) against batch size, one series per layout and input length."""
    if runs["batch_size"].nunique() < 2:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, metric in zip(axes, ("ttft_s_p50", "tpot_s_p50")):
        for (layout, length), group in runs.groupby(["layout", "input_len"]):
            group = group.sort_values("batch_size")
            ax.plot(group["batch_size"], group[f"metrics.{metric}"], "o-", label=f"{layout} in={length}")
        ax.set(xlabel="batch size", ylabel="seconds", title=f"{LATENCY_TITLES[metric]} vs batch size",
               xscale="log", yscale="log")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    return save(fig, path)


def plot_throughput_bars(runs: pd.DataFrame, path: Path) -> Path | None:
    """Output tokens/s per layout, grouped by (input length, batch size)."""
    table = runs.pivot_table(index=["input_len", "batch_size"], columns="layout",
                             values="metrics.output_tokens_per_s", aggfunc="median")
    if table.empty:
        return None
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(table) * len(table.columns)), 4.5))
    table.plot.bar(ax=ax)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.set(xlabel="(input length, batch size)", ylabel="output tokens/s", title="Throughput per tp/pp layout")
    ax.grid(axis="y", alpha=0.3)
    return save(fig, path)


def save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
