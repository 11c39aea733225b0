"""Figures of the microbenchmark section, across runs and group sizes."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from parbench.report.fmt import size as size_label  # noqa: E402
from parbench.metrics.plots import _save, heatmap  # noqa: E402


def _series(data: pd.DataFrame, run: str, single: str) -> str:
    """A line's legend entry: the run's label where several runs share the axes."""
    return run if data["run"].nunique() > 1 else single


def _size_axis(ax, sizes) -> None:
    ticks = sorted(set(sizes))
    ticks = ticks[:: max(1, len(ticks) // 6)]
    ax.set_xscale("log", base=2)
    ax.set_xticks(ticks, [size_label(t) for t in ticks], fontsize=8)


def bandwidth_curves(points: pd.DataFrame, fits: pd.DataFrame, path: Path) -> Path:
    """One panel per collective: busbw (solid) and algbw (dashed) per group size and run, with the
    alpha-beta model's algbw (dotted)."""
    collectives = list(dict.fromkeys(points["collective"]))
    cols = min(3, len(collectives))
    fig, axes = plt.subplots(math.ceil(len(collectives) / cols), cols, figsize=(5.2 * cols, 3.9 * math.ceil(len(collectives) / cols)),
                             squeeze=False)
    for ax, collective in zip(axes.flat, collectives):
        mine = points[points["collective"] == collective]
        for (group, run), curve in mine.groupby(["group_size", "run"], sort=False):
            label = f"n={group}" + (f" {run}" if mine["run"].nunique() > mine["group_size"].nunique() else "")
            line = ax.plot(curve["size_bytes"], curve["busbw_gbps"], "o-", ms=3, label=f"{label} busbw")[0]
            ax.plot(curve["size_bytes"], curve["algbw_gbps"], "s--", ms=3, color=line.get_color(), alpha=0.6,
                    label=f"{label} algbw")
            fit = fits[(fits["collective"] == collective) & (fits["group_size"] == group) & (fits["run"] == run)]
            if len(fit):
                grid = np.geomspace(curve["size_bytes"].min(), curve["size_bytes"].max(), 60)
                model = grid / (fit["alpha_us"].iloc[0] * 1e-6 + fit["beta_s_per_byte"].iloc[0] * grid) / 1e9
                ax.plot(grid, model, ":", color=line.get_color(), label=f"{label} alpha-beta fit (algbw)")
        _size_axis(ax, mine["size_bytes"])
        ax.set(title=collective, xlabel="message size", ylabel="GB/s")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(collectives):]:
        ax.axis("off")
    return _save(fig, path)


def matmul(data: pd.DataFrame, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(8, 4.5))
    shapes = list(dict.fromkeys(data.sort_values("flops")["shape"]))
    for run, group in data.groupby("run", sort=False):
        ax.plot([shapes.index(s) for s in group["shape"]], group["tflops"], "o-", label=_series(data, run, "achieved"))
    ax.set_xticks(range(len(shapes)), shapes, rotation=30, ha="right", fontsize=8)
    peaks = data.dropna(subset=["peak_tflops"]).groupby("dtype")["peak_tflops"].max()
    return _against_reference(fig, ax, path, {f"{dtype} peak {peak:g} TFLOP/s": peak for dtype, peak in peaks.items()},
                              "M x K x N", "TFLOP/s", "Matmul throughput against size")


def _against_reference(fig, ax, path: Path, references: dict[str, float], xlabel: str, ylabel: str,
                       title: str) -> Path:
    """Dashed red lines at the references (a peak, a spec), axes from zero, legend; saved."""
    for label, value in references.items():
        ax.axhline(value, linestyle="--", color="red", alpha=0.7, label=label)
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def membw(data: pd.DataFrame, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for run, group in data.groupby("run", sort=False):
        ax.plot(group["size_bytes"], group["gbps"], "o-", label=_series(data, run, "measured"))
    _size_axis(ax, data["size_bytes"])
    return _against_reference(fig, ax, path, {f"spec {spec:,.0f} GB/s": spec for spec in data["spec_gbps"].dropna().unique()},
                              "copy size", "GB/s", "Memory bandwidth against size")


def p2p_heatmap(matrix: pd.DataFrame, path: Path) -> Path:
    return heatmap(matrix, path, "GPU-to-GPU copy bandwidth", "GB/s", 0, "destination", "source")
