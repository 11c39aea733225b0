"""Matplotlib figures (PNG) of a profiled run: step-time breakdown per rank, op share per
phase, time per layer and phase, inference op shares of prefill and decode; and the breakdown
across runs for the cross-run report."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: workers and CI have no display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

BREAKDOWN = (("compute_s", "compute", "#4C72B0"), ("exposed_comm_s", "exposed comm", "#DD8452"),
             ("memcpy_s", "memcpy", "#55A868"), ("idle_s", "idle", "#BBBBBB"))
PHASES = ("forward", "backward", "optimizer")
TOP_OPS = 7
TEXT = 10  # points: at 110 dpi, about 13 px where the report shows a figure at 85 % of its size


def save_profile_plots(folder: Path, tables: dict[str, pd.DataFrame]) -> list[Path]:
    """step_breakdown.png, op_share.png and layer_heatmap.png from the profile tables."""
    written = []
    if not tables["steps"].empty:
        written.append(step_breakdown_plot(tables["steps"], folder / "step_breakdown.png"))
    ops = tables["ops"]
    if not ops.empty:
        rank0 = ops[ops["rank"] == 0]
        steps = max(1, int(tables["steps"]["step"].max()) + 1) if not tables["steps"].empty else 1
        written.append(op_share_plot(rank0, folder / "op_share.png"))
        written.append(layer_heatmap(rank0, steps, folder / "layer_heatmap.png"))
    return written


def stacked_breakdown(ax, labels: list[str], frame: pd.DataFrame) -> None:
    """Stacked bars of milliseconds: compute, exposed comm, memcpy, idle (a partition of the step)."""
    bottom = pd.Series(0.0, index=frame.index)
    for column, label, color in BREAKDOWN:
        values = frame[column] * 1e3
        ax.bar(labels, values, bottom=bottom, label=label, color=color)
        bottom = bottom + values
    ax.set_ylabel("ms per step")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=TEXT)


def step_breakdown_plot(steps: pd.DataFrame, path: Path) -> Path:
    per_rank = steps.groupby("rank")[[c for c, _, _ in BREAKDOWN] + ["comm_s", "wall_s"]].mean()
    fig, ax = plt.subplots(figsize=(max(4, 1.2 * len(per_rank) + 2), 4))
    stacked_breakdown(ax, [f"rank {r}" for r in per_rank.index], per_rank)
    comm_pct = 100 * per_rank["comm_s"].sum() / per_rank["wall_s"].sum()
    exposed = 100 * per_rank["exposed_comm_s"].sum() / per_rank["wall_s"].sum()
    ax.set_title(f"Step time breakdown (mean of {steps['step'].nunique()} profiled steps)\n"
                 f"comm {comm_pct:.1f}% of the step, exposed {exposed:.1f}%", fontsize=TEXT + 1)
    return _save(fig, path)


def op_share_plot(ops: pd.DataFrame, path: Path) -> Path:
    """One pie per phase: the top ops by time, the rest as `other`."""
    phases = [p for p in PHASES if p in set(ops["phase"])]
    fig, axes = plt.subplots(1, len(phases), figsize=(5 * len(phases), 4.5), squeeze=False)
    for ax, phase in zip(axes[0], phases):
        by_op = ops[ops["phase"] == phase].groupby("op")["total_s"].sum().sort_values(ascending=False)
        shown = by_op.head(TOP_OPS)
        if len(by_op) > TOP_OPS:
            shown = pd.concat([shown, pd.Series({"other": by_op.iloc[TOP_OPS:].sum()})])
        ax.pie(shown.values, labels=[_short(op) for op in shown.index], autopct="%1.0f%%", textprops={"fontsize": TEXT})
        ax.set_title(f"{phase}: {by_op.sum() * 1e3:.1f} ms", fontsize=TEXT + 1)
    fig.suptitle("Op share of time per phase (rank 0, profiled steps)", fontsize=TEXT + 2)
    return _save(fig, path)


def layer_heatmap(ops: pd.DataFrame, steps: int, path: Path) -> Path:
    """Milliseconds per step of each layer (rows) in each phase (columns)."""
    grid = ops.pivot_table(index="layer", columns="phase", values="total_s", aggfunc="sum", fill_value=0.0)
    grid = grid.reindex(columns=[p for p in PHASES if p in grid.columns])
    return heatmap(layers_in_order(grid) * 1e3 / steps, path, "Time per layer and phase (rank 0)", "ms per step", 2)


def layers_in_order(grid: pd.DataFrame) -> pd.DataFrame:
    """Rows by model order (embeddings, layers.0.., norm, output, then time outside every layer)."""
    grid = grid.loc[sorted(grid.index, key=_layer_order)]
    return grid.rename(index={"-": "(outside layers)"})


def heatmap(grid: pd.DataFrame, path: Path, title: str, unit: str, digits: int = 1,
            xlabel: str = "", ylabel: str = "") -> Path:
    """Each cell coloured and labelled with its value (NaN cells stay blank)."""
    values = grid.to_numpy(dtype=float)
    fig, ax = plt.subplots(figsize=(3.2 + 1.2 * len(grid.columns), 1.6 + 0.42 * len(grid)))
    image = ax.imshow(values, aspect="auto", cmap="viridis")
    ax.set_xticks(range(len(grid.columns)), [str(c) for c in grid.columns], fontsize=TEXT,
                  rotation=30 if len(grid.columns) > 3 else 0, ha="right" if len(grid.columns) > 3 else "center")
    ax.set_yticks(range(len(grid.index)), [str(i) for i in grid.index], fontsize=TEXT)
    for (row, col), value in np.ndenumerate(values):
        if not np.isnan(value):
            ax.text(col, row, f"{value:.{digits}f}", ha="center", va="center", fontsize=TEXT,
                    color="black" if image.norm(value) > 0.6 else "white")
    ax.set(xlabel=xlabel, ylabel=ylabel)
    ax.set_title(title, fontsize=TEXT + 1)
    fig.colorbar(image, ax=ax, label=unit)
    return _save(fig, path)


def runs_breakdown_plot(runs: pd.DataFrame, path: Path) -> Path:
    """Cross-run stacked bars: columns compute_s, exposed_comm_s, memcpy_s, idle_s per run."""
    fig, ax = plt.subplots(figsize=(max(6.5, 1.2 * len(runs) + 3), 4.8))
    stacked_breakdown(ax, list(runs.index), runs)
    ax.tick_params(labelsize=TEXT)
    for label in ax.get_xticklabels():
        label.set_rotation(25)
        label.set_ha("right")
    ax.set_title("Step time breakdown per run", fontsize=TEXT + 1)
    return _save(fig, path)


def _layer_order(name: str) -> tuple:
    number = re.fullmatch(r"layers\.(\d+)", name)
    if "embeddings" in name:
        return (0, name)
    if number:
        return (1, int(number.group(1)))
    return (3, name) if name == "-" else (2, {"norm": 0, "output": 1}.get(name, 2), name)


# Op types in a fixed order, so each keeps its colour in every pie of every run (others follow).
# The first ten take tab10's colours (`other` its grey), the rest tab20's light ones.
OP_TYPES = ("attention", "mlp", "norm", "embedding", "lm_head", "sampling", "all_reduce", "other", "outside_ops",
            "p2p", "broadcast", "all_gather", "reduce_scatter", "all_to_all")


def op_type_colours(op_types: list[str]) -> dict[str, tuple]:
    order = list(OP_TYPES) + sorted(set(op_types) - set(OP_TYPES))
    palette = [plt.get_cmap("tab10")(i) for i in range(10)] + [plt.get_cmap("tab20")(2 * i + 1) for i in range(10)]
    return {op: palette[order.index(op) % len(palette)] for op in op_types}


def plot_phase_pies(shares: dict[str, dict[str, float]], path: Path, title: str = "") -> Path:
    """One pie of op-type shares (% of op time) per phase (prefill, decode)."""
    fig, axes = plt.subplots(1, len(shares), figsize=(5.4 * len(shares), 4.0))
    colour = op_type_colours([op for table in shares.values() for op in table])
    for ax, (phase, table) in zip([axes] if len(shares) == 1 else axes, shares.items()):
        # Percentages on slices of 5% or more (smaller ones would overlap); the legend has all.
        wedges, *_ = ax.pie(list(table.values()), startangle=90, counterclock=False, colors=[colour[op] for op in table],
                            autopct=lambda pct: f"{pct:.0f}%" if pct >= 5 else "", textprops={"fontsize": TEXT})
        ax.legend(wedges, [f"{k} {v:.1f}%" for k, v in table.items()], fontsize=TEXT, loc="center left",
                  bbox_to_anchor=(1.0, 0.5))
        ax.set_title(f"{phase}: share of op time (%)", fontsize=TEXT + 1)
    if title:
        fig.suptitle(title, fontsize=TEXT + 1)
    return _save(fig, path)


def _short(op: str, width: int = 36) -> str:
    op = op.removeprefix("autograd::engine::evaluate_function: ")  # the node's name says backward
    return op if len(op) <= width else op[: width - 1] + "…"


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
