"""Cross-run report from MLflow: step time with its confidence interval, whether each run is
told apart from the fastest, communication figures, and the step breakdown of profiled runs.

    python -m parbench.report.compare --uri sqlite:///outputs/mlflow.db [--parent RUN_ID] [--out DIR]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import mlflow
import pandas as pd

from parbench.metrics.plots import BREAKDOWN, runs_breakdown_plot
from parbench.report.summary import format_runs

COLUMNS = ("step_time_s", "step_time_s_ci_low", "step_time_s_ci_high", "throughput_tokens_per_s", "mfu",
           "comm_pct", "exposed_comm_pct", "overlap_pct", "profile_overhead_ratio", "mem_peak_allocated_gb")
# Percentages of the profiled step, turned into seconds of it for the breakdown plot.
BREAKDOWN_PCT = {"compute_s": "compute_pct", "exposed_comm_s": "exposed_comm_pct", "memcpy_s": "memcpy_pct",
                 "idle_s": "idle_pct"}


def load_runs(uri: str, experiment: str, parent: str | None) -> pd.DataFrame:
    """Finished child runs (or all finished runs) of the experiment, one row each."""
    mlflow.set_tracking_uri(uri)
    found = mlflow.get_experiment_by_name(experiment)
    if found is None:
        raise SystemExit(f"no experiment {experiment!r} in {uri}: pass --experiment (tracking.experiment of the runs)")
    query = "attributes.status = 'FINISHED'"
    if parent:
        query += f" and tags.mlflow.parentRunId = '{parent}'"
    return mlflow.search_runs([found.experiment_id], filter_string=query, order_by=["start_time ASC"])


def distinct_labels(names: list[str]) -> list[str]:
    """Short run labels: the `key=value` overrides in a run name that not every run shares."""
    items = [name.replace(" ", ",").split(",") for name in names]
    common = set.intersection(*map(set, items)) if items else set()
    return [",".join(i for i in parts if i not in common) or name for parts, name in zip(items, names)]


def compare_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per run with a training step time (labelled by what differs between the runs);
    `vs_fastest` says whether the median step time
    differs from the fastest run's beyond both confidence intervals."""
    if "metrics.step_time_s" not in runs:
        return pd.DataFrame(columns=["run"])
    runs = runs[runs["metrics.step_time_s"].notna()].reset_index(drop=True)
    table = pd.DataFrame({"run": distinct_labels(list(runs["tags.mlflow.runName"]))})
    for column in COLUMNS:
        if f"metrics.{column}" in runs:
            table[column] = runs[f"metrics.{column}"]
    if table.empty or "step_time_s_ci_low" not in table:
        return table
    best = table.loc[table["step_time_s"].idxmin()]
    table["vs_fastest"] = [
        "fastest" if i == best.name else
        ("slower" if row.step_time_s_ci_low > best.step_time_s_ci_high else "within noise")
        for i, row in table.iterrows()]
    return table


def breakdown_seconds(runs: pd.DataFrame) -> pd.DataFrame:
    """compute/exposed comm/memcpy/idle seconds of a profiled step for each profiled run."""
    needed = [f"metrics.{m}" for m in BREAKDOWN_PCT.values()] + ["metrics.profiled_step_time_s"]
    if not set(needed) <= set(runs.columns):
        return pd.DataFrame()
    profiled = runs.dropna(subset=needed)
    frame = pd.DataFrame({column: profiled[f"metrics.{pct}"] / 100 * profiled["metrics.profiled_step_time_s"]
                          for column, pct in BREAKDOWN_PCT.items()})
    frame.index = distinct_labels(list(profiled["tags.mlflow.runName"]))
    return frame[[c for c, _, _ in BREAKDOWN]]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uri", default="sqlite:///outputs/mlflow.db", help="MLflow tracking URI")
    parser.add_argument("--experiment", default="parbench")
    parser.add_argument("--parent", help="only the children of this sweep's parent run")
    parser.add_argument("--out", type=Path, default=Path("outputs/report"), help="where report.csv and PNGs go")
    args = parser.parse_args(argv)
    runs = load_runs(args.uri, args.experiment, args.parent)
    table = compare_table(runs)
    args.out.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out / "report.csv", index=False)
    print(format_runs(table, f"{len(table)} run(s) from {args.uri}"))
    breakdown = breakdown_seconds(runs)
    if not breakdown.empty:
        print(f"breakdown plot: {runs_breakdown_plot(breakdown, args.out / 'breakdown.png')}")


if __name__ == "__main__":
    main()
