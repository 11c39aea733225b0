"""PNG plots of one microbenchmark run, written to the job dir and logged as MLflow artifacts."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # workers have no display
import matplotlib.pyplot as plt  # noqa: E402

from parbench.workloads.specs.microbench import human_size  # noqa: E402

LABELS = {"algbw_gbps": "algbw", "busbw_gbps": "busbw", "membw_gbps": "copy (read+write)"}


def _save(fig, path: Path) -> str:
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path.name


def bandwidth_vs_size(path: Path, series: dict[str, list[dict[str, float]]], keys: tuple[str, ...],
                      title: str) -> str:
    """One panel per series (collective), a line per key, GB/s against message size on a log-2 axis."""
    cols = min(3, len(series))
    rows = math.ceil(len(series) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), squeeze=False)
    for ax, (name, points) in zip(axes.flat, series.items()):
        sizes = [p["size_bytes"] for p in points]
        for key in keys:
            ax.plot(sizes, [p[key] for p in points], marker="o", label=LABELS.get(key, key))
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes[:: max(1, len(sizes) // 6)], [human_size(int(s)) for s in sizes[:: max(1, len(sizes) // 6)]])
        ax.set(title=name, xlabel="message size", ylabel="GB/s")
        ax.grid(True, alpha=0.3)
        ax.legend()
    for ax in list(axes.flat)[len(series):]:
        ax.axis("off")
    fig.suptitle(title)
    return _save(fig, path)


def matmul_tflops(path: Path, points: list[dict[str, float]], peak_tflops: float, title: str) -> str:
    """Achieved TFLOP/s per shape, in order of FLOPs, with the dense peak as a line."""
    fig, ax = plt.subplots(figsize=(7, 4))
    labels = [p["shape"] for p in points]
    ax.plot(range(len(points)), [p["matmul_tflops"] for p in points], marker="o", label="achieved")
    ax.axhline(peak_tflops, color="red", linestyle="--", label=f"peak {peak_tflops:g} TFLOP/s")
    ax.set_xticks(range(len(points)), labels, rotation=30, ha="right")
    ax.set(title=title, xlabel="M x K x N", ylabel="TFLOP/s", ylim=(0, peak_tflops * 1.1))
    ax.grid(True, alpha=0.3)
    ax.legend()
    return _save(fig, path)


def heatmap(path: Path, matrix: list[list[float | None]], labels: list[str], title: str, unit: str = "GB/s") -> str:
    """A source x destination matrix with each cell's value written in it (None: not measured)."""
    values = [[math.nan if v is None else v for v in row] for row in matrix]
    fig, ax = plt.subplots(figsize=(1.1 * len(labels) + 2.5, 1.0 * len(labels) + 1.5))
    image = ax.imshow(values, cmap="viridis")
    for i, row in enumerate(values):
        for j, v in enumerate(row):
            if not math.isnan(v):  # dark text on the bright (high) end of the colour map
                color = "black" if image.norm(v) > 0.6 else "white"
                ax.text(j, i, f"{v:.0f}", ha="center", va="center", color=color, fontsize=9)
    ax.set_xticks(range(len(labels)), labels)
    ax.set_yticks(range(len(labels)), labels)
    ax.set(title=title, xlabel="destination", ylabel="source")
    fig.colorbar(image, ax=ax, label=unit)
    return _save(fig, path)
