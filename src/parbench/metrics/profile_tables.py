"""The CSV tables of a profiled run (steps, ops, layers, collectives, ranks: one row per rank and
item) and the bandwidth metrics read from them; plain csv, so a run imports pandas only to plot."""

from __future__ import annotations

import csv
import statistics
from pathlib import Path


def bandwidth_metrics(collectives: list[dict]) -> dict[str, float]:
    """busbw_gbps_<collective>, mean over ranks, where the trace gave sizes."""
    by_kind: dict[str, list[float]] = {}
    for row in collectives:
        if row.get("busbw_gbps") is not None:
            by_kind.setdefault(row["collective"], []).append(row["busbw_gbps"])
    return {f"busbw_gbps_{kind}": statistics.fmean(values) for kind, values in sorted(by_kind.items())}


def layer_rows(ops: list[dict]) -> list[dict]:
    """Time per (rank, layer, phase, kind): the ops table summed over ops."""
    totals: dict[tuple, float] = {}
    for row in ops:
        key = (row["rank"], row["layer"], row["phase"], row["kind"])
        totals[key] = totals.get(key, 0.0) + row["total_s"]
    return [dict(zip(("rank", "layer", "phase", "kind", "total_s"), (*key, total)))
            for key, total in sorted(totals.items())]


def write_csv(path: Path, rows: list[dict]) -> None:
    """Rows as CSV, columns in order of first appearance (None: an empty cell)."""
    columns = list(dict.fromkeys(k for row in rows for k in row))
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, columns)
        writer.writeheader()
        writer.writerows(rows)


def write_tables(folder: Path, gathered: list[dict]) -> dict[str, list[dict]]:
    """steps.csv, ops.csv, layers.csv, collectives.csv and ranks.csv, each with a rank column
    (plain csv: pandas is imported only for plots)."""
    def rows(key: str, numbered: bool = False) -> list[dict]:
        return [{"rank": rank, **({"step": i} if numbered else {}), **row}
                for rank, g in enumerate(gathered) for i, row in enumerate(g[key])]

    ops = rows("ops")
    tables = {"steps": rows("steps", numbered=True), "ops": ops, "layers": layer_rows(ops),
              "collectives": rows("collectives"),
              "ranks": [{"rank": r, **g["metrics"]} for r, g in enumerate(gathered)]}
    for name, table in tables.items():
        write_csv(folder / f"{name}.csv", table)
    return tables
