"""The op-time side of the inference section: prefill/decode op-type shares per layout (pies and a
table) and, for native runs, time per layer and op type (heat maps)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from parbench.metrics.plots import OP_TYPES, heatmap, layers_in_order, plot_phase_pies
from parbench.paths import INFERENCE_LAYERS_FILE
from parbench.report import fmt
from parbench.report.document import Figure, Table
from parbench.report.inference_verdict import shape_label

MAX_PIES = 4  # op-share figures shown (one per layout); every run's shares are in its own metrics


def op_shares(run: pd.Series) -> dict[str, dict[str, float]]:
    """{'prefill': {'attention': 41.0, ...}, 'decode': {...}} from the run's *_op_pct_* metrics."""
    shares: dict[str, dict[str, float]] = {}
    for phase in ("prefill", "decode"):
        prefix = f"metrics.{phase}_op_pct_"
        table = {k.removeprefix(prefix): float(v) for k, v in run.items()
                 if k.startswith(prefix) and pd.notna(v) and v > 0}
        if table:
            shares[phase] = dict(sorted(table.items(), key=lambda kv: -kv[1]))
    return shares


def pie_runs(runs: pd.DataFrame) -> list[tuple[pd.Series, dict]]:
    """One profiled run per layout (its longest input, largest batch), at most MAX_PIES."""
    chosen = []
    for _, group in runs.sort_values(["input_len", "batch_size"], ascending=False).groupby("layout", sort=False):
        profiled = [(row, op_shares(row)) for _, row in group.iterrows()]
        chosen += [p for p in profiled if p[1]][:1]
    return chosen[:MAX_PIES]


def layer_grids(path: Path) -> dict[str, pd.DataFrame]:
    """{phase: layers (rows) x op types (columns, in one order for every figure), ms per step} from
    the native engine's inference_layers.csv."""
    table = pd.read_csv(path)
    grids = {}
    for phase in ("prefill", "decode"):
        rows = table[table["phase"] == phase]
        if not rows.empty:
            grid = rows.pivot_table(index="layer", columns="op_type", values="ms_per_step", aggfunc="sum", fill_value=0.0)
            grids[phase] = layers_in_order(grid[sorted(grid.columns, key=op_type_order)])
    return grids


def op_type_order(op_type: str) -> tuple[int, str]:
    return (OP_TYPES.index(op_type), "") if op_type in OP_TYPES else (len(OP_TYPES), op_type)


def run_name(row: pd.Series) -> str:
    """A run as the page names it: its layout and request shape, the words of its run name."""
    return f"{row['layout']} {shape_label(row['input_len'], row['batch_size'], row['output_len'])}"


def layer_heatmaps(row: pd.Series, fetch_artifact, out: Path) -> list[Figure]:
    """Time per layer and op type of a profiled native run, one heat map per phase."""
    path = fetch_artifact(row["run_id"], INFERENCE_LAYERS_FILE)
    if path is None:
        return []
    return [Figure(heatmap(grid, out / f"inference_layers_{phase}_{row['run_id'][:8]}.png",
                           f"{phase}: time per layer and op type", "ms per step", 2),
                   f"{phase.capitalize()}: ms per step of each layer (rows) by op type (columns), {run_name(row)}, "
                   "mean over the ranks that ran the layer")
            for phase, grid in layer_grids(path).items()]


def op_share_blocks(row: pd.Series, shares: dict[str, dict[str, float]], out: Path) -> list:
    """The pies of one run's op-type shares per phase and their table."""
    name = run_name(row)
    path = plot_phase_pies(shares, out / f"inference_ops_{row['run_id'][:8]}.png", name)
    data = op_share_table(shares)
    return [Figure(path, f"Prefill vs decode: share of op time (%) by op type, {name} (rank 0)"),
            Table(data.map(fmt.percent).reset_index(), data.reset_index(), f"inference_ops_{row['run_id'][:8]}.csv",
                  f"Share of op time (%) by op type, {name}")]


def op_share_table(shares: dict[str, dict[str, float]]) -> pd.DataFrame:
    """Op types as rows (largest first over the phases), one column per phase, in percent."""
    table = pd.DataFrame(shares).fillna(0.0)
    table.index.name = "op type"
    return table.loc[table.max(axis=1).sort_values(ascending=False).index]
