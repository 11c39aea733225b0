"""Hydra callback: one MLflow parent run per multirun, and the sweep's table at its end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from hydra.utils import get_method
from omegaconf import DictConfig

from parbench.report.summary import format_runs, sweep_table
from parbench.tracking.store import Store

PARENT_FILE = "mlflow_parent_run.json"


def parent_run_id(sweep_dir: Path) -> str | None:
    path = sweep_dir / PARENT_FILE
    return json.loads(path.read_text())["run_id"] if path.exists() else None


class MlflowSweepCallback(Callback):
    """`reports`: dotted names of functions (store, parent run id, child runs, sweep dir) -> files,
    run at the sweep's end (conf/config.yaml names parbench.report.build.sweep_report): named in
    the config, so this layer does not import the report layer above it."""

    def __init__(self, reports: list[str] = ()) -> None:
        self.reports = list(reports)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        store = Store(config.tracking.uri, config.tracking.experiment)
        overrides = " ".join(config.hydra.overrides.task)
        run_id = store.create_run(f"sweep {sweep_dir.name}", {"parbench.sweep": "true", "overrides": overrides,
                                                               "sweep_dir": str(sweep_dir.resolve())})
        (sweep_dir / PARENT_FILE).write_text(json.dumps({"run_id": run_id, "tracking_uri": store.uri}))

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        run_id = parent_run_id(sweep_dir)
        if run_id is None:
            return
        store = Store(config.tracking.uri, config.tracking.experiment)
        children = store.child_runs(run_id)
        table = sweep_table(children)
        csv = sweep_dir / "summary.csv"
        table.to_csv(csv, index=False)
        store.log_artifacts(run_id, [csv])
        reports = [path for name in self.reports for path in get_method(name)(store, run_id, children, sweep_dir)]
        store.finish(run_id, ok=bool(len(table)) and (table["status"] == "FINISHED").any())
        print(format_runs(table, title=f"Sweep {sweep_dir} ({len(table)} jobs)"))
        print("".join(f"Report: {path}\n" for path in reports), end="")
        print(f"Summary CSV: {csv}\nCompare in MLflow: mlflow ui --backend-store-uri {store.uri}  "
              f"(parent run {run_id})")
