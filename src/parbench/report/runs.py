"""Which runs a report covers (a sweep's children, a filter over an experiment, a baseline) and
the per-run facts every section reads from their params: label, world size, workload."""

from __future__ import annotations

from dataclasses import dataclass

import mlflow
import pandas as pd
from mlflow.tracking import MlflowClient
from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID

from parbench.tracking.store import with_reused

SWEEP_TAG = "parbench.sweep"


class ReportError(ValueError):
    """The runs asked for cannot make a report (none found, a mixed set): the message says what to pass."""


@dataclass
class RunSet:
    runs: pd.DataFrame  # mlflow.search_runs rows, plus `label`, `world_size`, `workload`
    title: str
    parent_id: str | None = None  # the sweep's parent run, when the set is one sweep

    @property
    def finished(self) -> pd.DataFrame:
        return self.runs[self.runs["status"] == "FINISHED"]

    @property
    def failed(self) -> pd.DataFrame:
        return self.runs[self.runs["status"] != "FINISHED"]

    def of(self, *workloads: str) -> pd.DataFrame:
        """Finished runs of these workloads, labelled by what differs among them."""
        done = self.finished
        return relabel(done[done["workload"].isin(workloads)])


def distinct_labels(names: list[str]) -> list[str]:
    """Short run labels: the words of a run name (`tiny dp2 seq64 mbs2`; older names: `key=value`
    overrides joined by commas) that not every run shares, a `key.path=value` shortened to
    `path=value` where no other key ends the same."""
    items = [name.replace(",", " ").split() for name in names]
    common = set.intersection(*map(set, items)) if items else set()
    distinct = [[i for i in parts if i not in common] for parts in items]
    keys = {i.split("=", 1)[0] for parts in distinct for i in parts}
    last = [k.rsplit(".", 1)[-1] for k in keys]
    short = {k: k.rsplit(".", 1)[-1] if last.count(k.rsplit(".", 1)[-1]) == 1 else k for k in keys}
    return [" ".join(short[i.split("=", 1)[0]] + i[len(i.split("=", 1)[0]):] for i in parts) or name
            for parts, name in zip(distinct, names)]


# Params that say where a run went, not what it measured: never what tells two runs apart.
NOT_DEFINING = ("params.tracking.", "params.launch.", "params.debug.", "params.dry_run")


def relabel(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs with labels of what differs among them alone (a section's runs, not the whole set);
    runs whose names read the same (`1 rank` under dp and under fsdp) get the params that differ."""
    names = runs.get("tags.mlflow.runName", pd.Series([r[:8] for r in runs["run_id"]], index=runs.index))
    labels = pd.Series(distinct_labels(list(names.fillna("run"))) if len(runs) else [], index=runs.index, dtype=object)
    for label, same in runs.groupby(labels):
        if len(same) > 1:
            labels[same.index] = [f"{label} {extra}".strip() for extra in differing_params(same)]
    return runs.assign(label=labels)


def differing_params(runs: pd.DataFrame) -> list[str]:
    """Per run, the params that differ among these runs: the config choices (`parallel=fsdp`) when
    one differs, else up to 3 `leaf=value`."""
    keys = [c for c in runs.columns if c.startswith("params.") and not c.startswith(NOT_DEFINING)
            and runs[c].astype(str).nunique() > 1]
    choices = [k for k in keys if k.endswith(".name")]
    shown = {k: k.split(".")[1] for k in choices} if choices else {k: k.rsplit(".", 1)[-1] for k in keys[:3]}
    return [" ".join(f"{name}={run[k]}" for k, name in shown.items()) for _, run in runs.iterrows()]


def annotate(runs: pd.DataFrame) -> pd.DataFrame:
    """Add `label` (what differs between the runs), `world_size` and `workload` columns."""
    runs = relabel(runs.reset_index(drop=True))
    runs["world_size"] = pd.array([_world_size(row) for _, row in runs.iterrows()], dtype="Int64")
    runs["workload"] = runs.get("params.workload.name", pd.Series("unknown", index=runs.index)).fillna("unknown")
    return runs


def _world_size(row: pd.Series) -> int | None:
    plan = row.get("metrics.plan_world_size")
    if pd.notna(plan):
        return int(plan)
    nodes, per_node = row.get("params.hardware.nodes"), row.get("params.hardware.gpus_per_node")
    if pd.isna(nodes) or pd.isna(per_node) or int(per_node) < 1:
        return None
    return int(nodes) * int(per_node)


def select_runs(uri: str, sweep: str | None = None, experiment: str | None = None,
                filter_string: str | None = None) -> RunSet:
    """A sweep's children (--sweep, or the latest sweep); or, with a filter and no sweep, every
    run of the experiment(s) that matches it (sweep parent runs left out)."""
    mlflow.set_tracking_uri(uri)
    experiments = _experiment_ids(uri, experiment)
    if sweep is None and filter_string is None:
        sweep = latest_sweep(uri, experiments)
    if sweep is not None:
        query = f"tags.{MLFLOW_PARENT_RUN_ID} = '{sweep}'" + (f" and {filter_string}" if filter_string else "")
        runs = _search(experiments, query)
        if filter_string is None:  # the whole sweep: with the points a resumed sweep reused
            runs = with_reused(runs, MlflowClient(uri), sweep)
        if runs.empty:
            raise ReportError(f"sweep {sweep} has no runs{' matching ' + filter_string if filter_string else ''} "
                              f"in {uri}: check --sweep (the parent run id printed at the sweep's end)")
        name = MlflowClient(uri).get_run(sweep).data.tags.get("mlflow.runName", sweep)
        return RunSet(annotate(runs), f"{name} ({sweep[:8]})", sweep)
    runs = _search(experiments, filter_string)
    runs = runs[runs.get(f"tags.{SWEEP_TAG}", pd.Series(index=runs.index, dtype=object)) != "true"]
    if runs.empty:
        raise ReportError(f"no run matches {filter_string!r} in {uri}: MLflow search syntax, e.g. "
                          "--filter \"params.model.name = 'tiny'\"")
    return RunSet(annotate(runs), f"runs matching {filter_string}")


def baseline_runs(uri: str, run_id: str) -> RunSet:
    """--baseline: a sweep's parent run means its children; any other run is a set of one."""
    mlflow.set_tracking_uri(uri)
    try:
        run = MlflowClient(uri).get_run(run_id)
    except mlflow.exceptions.MlflowException as e:
        raise ReportError(f"--baseline {run_id}: no such run in {uri}") from e
    if run.data.tags.get(SWEEP_TAG) == "true":
        return select_runs(uri, sweep=run_id)
    runs = mlflow.search_runs([run.info.experiment_id], filter_string=f"attributes.run_id = '{run_id}'")
    return RunSet(annotate(runs), run.data.tags.get("mlflow.runName", run_id))


def latest_sweep(uri: str, experiments: list[str]) -> str:
    found = mlflow.search_runs(experiments, filter_string=f"tags.`{SWEEP_TAG}` = 'true'",
                               order_by=["attributes.start_time DESC"], max_results=1)
    if found.empty:
        raise ReportError(f"no sweep in {uri}: run one with `python -m parbench -m ...`, or pass --sweep RUN_ID "
                          "or --filter")
    return str(found["run_id"].iloc[0])


def _experiment_ids(uri: str, name: str | None) -> list[str]:
    client = MlflowClient(uri)
    if name is None:
        return [e.experiment_id for e in client.search_experiments()]
    found = client.get_experiment_by_name(name)
    if found is None:
        names = ", ".join(e.name for e in client.search_experiments())
        raise ReportError(f"no experiment {name!r} in {uri} (there are: {names}): check --experiment")
    return [found.experiment_id]


def _search(experiments: list[str], query: str | None) -> pd.DataFrame:
    try:
        return mlflow.search_runs(experiments, filter_string=query or "", order_by=["attributes.start_time ASC"])
    except mlflow.exceptions.MlflowException as e:
        raise ReportError(f"MLflow rejected the filter {query!r}: {e.message}") from e
