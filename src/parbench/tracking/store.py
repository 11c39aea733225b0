"""A thin layer over MlflowClient that survives concurrent writers on one SQLite file, fails fast
on a tracking server that is not there, and masks secrets in everything it writes."""

from __future__ import annotations

import json
import random
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Callable, TypeVar

from filelock import FileLock
from mlflow.entities import Metric, Param, RunTag
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient
from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID, MLFLOW_RUN_NAME

from parbench.tracking.reach import check_reachable
from parbench.tracking.secrets import scrub, scrub_mapping, scrubbed_file

T = TypeVar("T")
# MLflow 3's UI opens an experiment of this kind on its runs table (not the GenAI traces overview).
EXPERIMENT_KIND = {"mlflow.experimentKind": "custom_model_development"}
BATCH = 100  # MLflow's limit on params per log_batch call (metrics: 1000)
# On a sweep's parent run: the FINISHED runs a resumed sweep reused instead of running them again.
REUSED_TAG = "parbench.reused_runs"


def retry(fn: Callable[..., T], *args: Any, attempts: int = 12, **kwargs: Any) -> T:
    """Call fn, backing off while another writer holds the SQLite lock."""
    for attempt in range(attempts):
        try:
            return fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - sqlalchemy errors arrive wrapped in several types
            text = str(e).lower()
            transient = "locked" in text or "busy" in text or "unique constraint" in text
            if not transient or attempt == attempts - 1:
                raise
            time.sleep(min(2.0, 0.05 * 2**attempt) * (0.5 + random.random()))
    raise AssertionError("unreachable")


def sqlite_path(uri: str) -> Path | None:
    return Path(uri[len("sqlite:///"):]) if uri.startswith("sqlite:///") else None


class Store:
    """Runs, params, metrics, tags and artifacts of one MLflow experiment."""

    def __init__(self, uri: str, experiment: str):
        check_reachable(uri)
        db = sqlite_path(uri)
        self.artifact_root = None
        lock = None
        if db is not None:
            db = db.resolve()
            db.parent.mkdir(parents=True, exist_ok=True)
            uri = f"sqlite:///{db}"
            self.artifact_root = (db.parent / "mlartifacts").as_uri()
            # MLflow creates and migrates a new database on first use; two jobs doing that at
            # once corrupt it, so opening the store is serialised across processes.
            lock = FileLock(str(db) + ".lock")
        self.uri = uri
        with lock or nullcontext():
            self.client = MlflowClient(tracking_uri=uri)
            self.experiment_id = retry(self._experiment_id, experiment)

    def _experiment_id(self, name: str) -> str:
        found = self.client.get_experiment_by_name(name)
        if found is None:
            try:
                return self.client.create_experiment(name, artifact_location=self.artifact_root, tags=EXPERIMENT_KIND)
            except MlflowException:  # created meanwhile by a concurrent job
                found = self.client.get_experiment_by_name(name)
        if found.tags.get("mlflow.experimentKind") is None:  # a store made before parbench tagged it
            self.client.set_experiment_tag(found.experiment_id, *next(iter(EXPERIMENT_KIND.items())))
        return found.experiment_id

    def create_run(self, name: str, tags: dict[str, str], parent_id: str | None = None) -> str:
        name = scrub(name)
        tags = {**scrub_mapping(tags), MLFLOW_RUN_NAME: name}
        if parent_id:
            tags[MLFLOW_PARENT_RUN_ID] = parent_id
        run = retry(self.client.create_run, self.experiment_id, run_name=name, tags=tags)
        return run.info.run_id

    def log_params(self, run_id: str, params: dict[str, str]) -> None:
        items = [Param(k, v[:6000]) for k, v in scrub_mapping(params).items()]
        for i in range(0, len(items), BATCH):
            retry(self.client.log_batch, run_id, params=items[i:i + BATCH])

    def set_tags(self, run_id: str, tags: dict[str, str]) -> None:
        items = [RunTag(k, v[:5000]) for k, v in scrub_mapping(tags).items()]
        for i in range(0, len(items), BATCH):
            retry(self.client.log_batch, run_id, tags=items[i:i + BATCH])

    def experiment_tags(self) -> dict[str, str]:
        return retry(self.client.get_experiment, self.experiment_id).tags

    def run_name(self, run_id: str) -> str:
        return retry(self.client.get_run, run_id).info.run_name or run_id

    def set_experiment_tag(self, key: str, value: str) -> None:
        retry(self.client.set_experiment_tag, self.experiment_id, key, scrub(value))

    def log_metrics(self, run_id: str, metrics: dict[str, float], step: int = 0) -> None:
        now = int(time.time() * 1000)
        items = [Metric(k, float(v), now, step) for k, v in metrics.items()]
        for i in range(0, len(items), 1000):
            retry(self.client.log_batch, run_id, metrics=items[i:i + 1000])

    def log_step_rows(self, run_id: str, rows: list[dict]) -> None:
        """Per-step series as `steps/<field>` at their step (apart from the summaries' names)."""
        now = int(time.time() * 1000)
        items = [Metric(f"steps/{k}", float(v), now, row["step"]) for row in rows for k, v in row.items()
                 if k != "step" and isinstance(v, (int, float))]
        for i in range(0, len(items), 1000):
            retry(self.client.log_batch, run_id, metrics=items[i:i + 1000])

    def log_artifacts(self, run_id: str, paths: list[Path], folder: str | None = None) -> None:
        for path in paths:
            if path.exists():
                retry(self.client.log_artifact, run_id, str(scrubbed_file(path)), folder)

    def where_to_look(self, run_id: str) -> str:
        """The MLflow UI command and the page of this run (the experiment's runs table is /runs:
        the UI's bare experiment page opens on its GenAI overview, whatever the experiment kind)."""
        return (f"MLflow UI: mlflow ui --backend-store-uri {self.uri}\n"
                f"  then open http://127.0.0.1:5000/#/experiments/{self.experiment_id}/runs/{run_id}")

    def finish(self, run_id: str, ok: bool) -> None:
        self.close(run_id, "FINISHED" if ok else "FAILED")

    def close(self, run_id: str, status: str) -> None:
        """End a run as FINISHED, FAILED or KILLED (also one already ended: the cause was found later)."""
        retry(self.client.set_terminated, run_id, status)

    def has_run(self, run_id: str) -> bool:
        try:
            return retry(self.client.get_run, run_id).info.experiment_id == self.experiment_id
        except MlflowException:
            return False

    def search(self, filter_string: str, max_results: int):
        """Runs of this experiment matching an MLflow filter, newest first."""
        return retry(self.client.search_runs, [self.experiment_id], filter_string, max_results=max_results,
                     order_by=["attributes.start_time DESC"])

    def child_runs(self, parent_id: str):
        """Children of a sweep's parent run as a pandas DataFrame (mlflow.search_runs columns)."""
        import mlflow

        mlflow.set_tracking_uri(self.uri)
        return retry(mlflow.search_runs, experiment_ids=[self.experiment_id],
                     filter_string=f"tags.{MLFLOW_PARENT_RUN_ID} = '{parent_id}'", order_by=["start_time ASC"])

    def sweep_runs(self, parent_id: str):
        """A sweep's points: its child runs, then the runs it reused (column `reused`: True)."""
        return with_reused(self.child_runs(parent_id), self.client, parent_id)


def with_reused(runs, client: MlflowClient, parent_id: str):
    """`runs` (a sweep's children) plus the FINISHED runs the sweep reused, which its parent lists."""
    import mlflow
    import pandas as pd

    parent = retry(client.get_run, parent_id)
    ids = [i for i in parent.data.tags.get(REUSED_TAG, "").split(",") if i]
    runs = runs.assign(reused=False)
    if not ids:
        return runs
    quoted = ", ".join(f"'{i}'" for i in ids)
    reused = retry(mlflow.search_runs, experiment_ids=[parent.info.experiment_id],
                   filter_string=f"attributes.run_id IN ({quoted})", order_by=["start_time ASC"])
    return pd.concat([runs, reused.assign(reused=True)], ignore_index=True)


def read_json(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}
