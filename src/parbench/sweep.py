"""Hydra callback: one MLflow parent run per multirun, and the sweep's table and reports at its end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from parbench.tracking.labels import NOT_DEFINING

PARENT_FILE = "mlflow_parent_run.json"


def parent_run_id(sweep_dir: Path) -> str | None:
    path = sweep_dir / PARENT_FILE
    return json.loads(path.read_text())["run_id"] if path.exists() else None


class MlflowSweepCallback(Callback):
    """Hydra creates it for every run, sweep or not, so mlflow and the reports are imported in its
    hooks: a single run refused for a bad config never pays for them."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        from parbench.tracking.store import Store

        sweep_dir = Path(config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        store = Store(config.tracking.uri, config.tracking.experiment)
        overrides = " ".join(config.hydra.overrides.task)
        defining = " ".join(o for o in config.hydra.overrides.task if not o.lstrip("+~").startswith(NOT_DEFINING))
        name = f"sweep {defining[:80] or 'defaults'} ({sweep_dir.name})"
        run_id = store.create_run(name, {"parbench.sweep": "true", "overrides": overrides,
                                                               "sweep_dir": str(sweep_dir.resolve())})
        (sweep_dir / PARENT_FILE).write_text(json.dumps({"run_id": run_id, "tracking_uri": store.uri}))

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        from parbench.report.inference import inference_sweep_report
        from parbench.report.summary import format_runs, markdown_table, sweep_table
        from parbench.tracking.store import Store

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
        # The parent run's description: the first click in the MLflow UI shows the figures.
        store.set_tags(run_id, {"mlflow.note.content": f"**{len(table)} runs** of `{sweep_dir}`\n\n"
                                                        f"{markdown_table(table)}"})
        reports = inference_sweep_report(store, run_id, children, sweep_dir)
        store.finish(run_id, ok=bool(len(table)) and (table["status"] == "FINISHED").any())
        print(format_runs(table, title=f"Sweep {sweep_dir} ({len(table)} jobs)"))
        print("".join(f"Report: {path}\n" for path in reports), end="")
        print(f"Summary CSV: {csv}\nCompare the runs: {store.where_to_look(run_id)}")
