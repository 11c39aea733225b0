"""What the MLflow UI shows of a sweep at the first click: the parent run's headline figures as
metrics and its description (the verdict, then every point as an aligned table, best first),
distinct child run names, and a saved view of the experiment's runs table (the sweep's children,
sorted by the headline figure, its columns shown) that the printed link opens."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from parbench.fmt import format_metric
from parbench.report import fmt
from parbench.report.inference import inference_runs
from parbench.report.inference_verdict import verdict as inference_verdict, with_intervals
from parbench.report.runs import ReportError, RunSet, annotate, differing_params
from parbench.report.training import scaling_kind, scaling_table, training_runs, verdict as training_verdict
from parbench.tracking.headline import NAMES, child_description, headline
from parbench.tracking.store import Store

VIEW_TAG = "mlflow.sharedViewState."  # the MLflow UI's shared views: an experiment tag, opened by ?viewStateShareKey=
COLUMN_WIDTH = 40  # characters of a run's label in the description's table
MAX_ROWS = 30  # points listed in the description (MLflow keeps 5,000 characters of a tag); the rest: summary.csv


def is_reused(run: pd.Series) -> bool:
    """A point resume took from an earlier sweep (store.sweep_runs' `reused` column)."""
    value = run.get("reused", False)
    return bool(value) if pd.notna(value) else False


def main_workload(children: pd.DataFrame) -> str:
    """The workload most of the sweep's finished points ran (a sweep is nearly always one)."""
    done = children[children["status"] == "FINISHED"]
    names = done.get("params.workload.name", pd.Series(dtype=object)).dropna()
    return str(names.mode().iloc[0]) if len(names) else ""


def sorted_points(children: pd.DataFrame, rank_by: str) -> pd.DataFrame:
    """Finished points (reused ones too) best first by the headline figure, then the others."""
    column = f"metrics.{rank_by}"
    key = children[column] if column in children else pd.Series(float("nan"), index=children.index)
    return children.assign(_key=key.where(children["status"] == "FINISHED")).sort_values(
        "_key", ascending=False, na_position="last").drop(columns="_key")


def points_table(children: pd.DataFrame, shown: tuple[str, ...]) -> str:
    """Every point as an aligned, monospaced table (MLflow renders Markdown tables without padding),
    each named by its label in the report: what differs between the points."""
    names = [n for n in shown if f"metrics.{n}" in children]
    header = ["run", "status", *(NAMES.get(n, n) for n in names)]
    rows = [[str(r["label"])[:COLUMN_WIDTH], "reused" if is_reused(r) else r["status"],
             *(format_metric(n, r[f"metrics.{n}"]) or "-" for n in names)] for _, r in children.head(MAX_ROWS).iterrows()]
    if len(children) > MAX_ROWS:
        rows.append([f"... {len(children) - MAX_ROWS} more: summary.csv", "", *("" for _ in names)])
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(cell).ljust(w) for cell, w in zip(row, widths)).rstrip() for row in [header, *rows]]
    return "```\n" + "\n".join(lines) + "\n```"


def verdict_lines(children: pd.DataFrame, workload: str) -> list[str]:
    """The report's verdict for this sweep's runs (the runs' intervals decide) and its flags, or why
    there is none."""
    runs = RunSet(children, "sweep")
    try:
        if workload == "train" and len(train := training_runs(runs)):
            kind = scaling_kind(train)
            table = scaling_table(train, kind)
            return training_verdict(table, kind) + flags_line(table)
        if workload == "inference":
            done = inference_runs(runs.of("inference"))
            return inference_verdict(done) + flags_line(with_intervals(done).assign(run=done["label"]))
    except ReportError as error:
        return [f"No verdict: {error}"]
    return []


def flags_line(table: pd.DataFrame) -> list[str]:
    """`Flags: dp2: wide interval (±44 %); ...` (the report's caveats say why and what to rerun)."""
    flagged = table[table["notes"].fillna("") != ""]
    return [("**Flags** (see the report's caveats): " + "; ".join(f"{r.run}: {r.notes}" for r in flagged.itertuples()))
            ] if len(flagged) else []


def description(children: pd.DataFrame, sweep_dir: Path, link: str) -> str:
    workload = main_workload(children)
    rank_by, shown = headline(workload)
    done = int((children["status"] == "FINISHED").sum())
    lines = verdict_lines(children, workload)
    reused = sum(is_reused(run) for _, run in children.iterrows())
    head = (f"**{len(children)} points** ({done} finished" + (f", {reused} reused from earlier runs" if reused else "")
            + f") of `{sweep_dir}`") + (
        f", best {NAMES.get(rank_by, rank_by)} first" if rank_by else "")
    return "\n\n".join([*(f"**Verdict.** {line}" if i == 0 else line for i, line in enumerate(lines)), head,
                        points_table(sorted_points(children, rank_by), shown),
                        f"Full report: artifacts `report/report.html`. These runs sorted, with their figures: {link}"])


def headline_metrics(children: pd.DataFrame) -> dict[str, float]:
    """best_<figure> of the best finished point (by the headline figure), and the point counts."""
    rank_by, shown = headline(main_workload(children))
    metrics = {"points_finished": float((children["status"] == "FINISHED").sum()),
               "points_failed": float((children["status"] != "FINISHED").sum())}
    best = sorted_points(children, rank_by).iloc[0] if rank_by and len(children) else None
    if best is not None and best["status"] == "FINISHED":
        # 4 significant digits: the run page lists them as raw floats (0.0034301480000067386 otherwise)
        metrics.update({f"best_{n}": float(f"{best[f'metrics.{n}']:.4g}") for n in shown
                        if pd.notna(best.get(f"metrics.{n}"))})
    return metrics


def distinct_names(store: Store, children: pd.DataFrame) -> pd.DataFrame:
    """Children that share a name get the params that tell them apart appended (renamed in MLflow)."""
    names = children.get("tags.mlflow.runName", pd.Series("", index=children.index)).fillna("")
    for name, same in children.groupby(names):
        if len(same) > 1:
            for (index, run), extra in zip(same.iterrows(), differing_params(same)):
                if is_reused(run):  # an earlier sweep's run keeps its name
                    continue
                renamed = f"{name} {extra}".strip() if extra else f"{name} #{run['run_id'][:6]}"
                store.set_tags(run["run_id"], {"mlflow.runName": renamed})
                children.loc[index, "tags.mlflow.runName"] = renamed
    return children


def describe_undescribed(store: Store, children: pd.DataFrame) -> None:
    """A child the orchestrator closed before its run could describe itself (an invalid config, a
    cluster job that died) gets its status and reason as its description."""
    notes = children.get("tags.mlflow.note.content", pd.Series(None, index=children.index))
    for _, run in children[notes.isna()].iterrows():
        if is_reused(run):
            continue
        reason = run.get("tags.failure_reason")
        store.set_tags(run["run_id"], {"mlflow.note.content": child_description(
            {}, "", run["status"], reason if isinstance(reason, str) else "", False)})


def points_filter(parent_id: str, children: pd.DataFrame) -> str:
    """The sweep's points in MLflow's search syntax: its children, or with runs reused from earlier
    sweeps (resume), every point's run id (the syntax has no OR)."""
    if "reused" not in children or not children["reused"].any():
        return f"tags.`mlflow.parentRunId` = '{parent_id}'"
    return f"attributes.run_id IN ({', '.join(repr(str(i)) for i in children['run_id'])})"


def saved_view(store: Store, parent_id: str, children: pd.DataFrame) -> str:
    """An experiment tag holding the runs table's state (this sweep's children, sorted by the headline
    figure, its figures as columns); returns its key (the URL's viewStateShareKey)."""
    rank_by, shown = headline(main_workload(children))
    key = f"sweep-{parent_id[:12]}"
    state = {"searchFilter": points_filter(parent_id, children), "orderByAsc": False,
             "startTime": "ALL", "lifecycleFilter": "Active", "datasetsFilter": [],
             "selectedColumns": [f"metrics.`{n}`" for n in shown if f"metrics.{n}" in children]}
    state["columnWidths"] = {column: 150 for column in state["selectedColumns"]}  # room for 7 digits
    if rank_by:
        state["orderByKey"] = f"metrics.`{rank_by}`"
    store.set_experiment_tag(VIEW_TAG + key, json.dumps(state))
    return key


LATEST = "**Latest sweep**"  # how parbench's experiment description starts (a user's own is left alone)


def point_to_latest(store: Store, parent_id: str, children: pd.DataFrame, view_key: str) -> None:
    """The experiment's description (shown atop each of its pages, the GenAI overview included)
    links to this sweep's saved view: from MLflow's front page, the experiment and that link are the
    two clicks to every point with its figures, best first."""
    note = store.experiment_tags().get("mlflow.note.content", "")
    if note and not note.startswith(LATEST):
        return
    rank_by, _ = headline(main_workload(children))
    name = store.run_name(parent_id)
    base = f"#/experiments/{store.experiment_id}/runs"
    order = f", best {NAMES.get(rank_by, rank_by)} first" if rank_by else ""
    # The links first: the UI shows one line of the description until it is expanded.
    store.set_experiment_tag("mlflow.note.content", (
        f"{LATEST}: [its {fmt.count(len(children), 'point')}{order}]({base}?viewStateShareKey={view_key}) · "
        f"[its verdict]({base}/{parent_id}) · `{name}`"))


def describe_sweep(store: Store, parent_id: str, children: pd.DataFrame, sweep_dir: Path) -> str:
    """Name the children apart, log the parent's headline metrics and description, save the view;
    returns the link to print."""
    if children.empty:
        return store.where_to_look(parent_id)
    children = annotate(distinct_names(store, children.copy()))
    describe_undescribed(store, children)
    key = saved_view(store, parent_id, children)
    link = f"http://127.0.0.1:5000/#/experiments/{store.experiment_id}/runs?viewStateShareKey={key}"
    point_to_latest(store, parent_id, children, key)
    store.log_metrics(parent_id, headline_metrics(children))
    store.set_tags(parent_id, {"mlflow.note.content": description(children, sweep_dir, link)})
    return f"MLflow UI: mlflow ui --backend-store-uri {store.uri}\n  then open {link}"
