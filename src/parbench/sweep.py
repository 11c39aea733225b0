"""Hydra callback: one MLflow parent run per multirun, and the sweep's table and reports at its end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from parbench.launch.cluster import SLURM_JOB_TAG
from parbench.tracking.labels import NOT_DEFINING

if TYPE_CHECKING:
    from parbench.tracking.store import Store

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
        from parbench.report.build import sweep_report
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
        reports = sweep_report(store, run_id, children, sweep_dir)
        store.finish(run_id, ok=bool(len(table)) and (table["status"] == "FINISHED").any())
        print(format_runs(table, title=f"Sweep {sweep_dir} ({len(table)} jobs)"))
        print("".join(f"Report: {path}\n" for path in reports), end="")
        print(f"Summary CSV: {csv}\nCompare the runs: {store.where_to_look(run_id)}")


def record_point_failure(store: "Store", parent_id: str | None, job_id: str, name: str, choices: dict[str, str],
                         overrides: list[str], status: str, reason: str) -> str | None:
    """A point whose cluster job ended badly: its run (found by the SLURM job id the orchestrator
    tagged) is closed with the reason; a job that never opened one (it died first, or timed out
    before starting) gets a run here. Returns the run id; None when the run had FINISHED already
    (SLURM stopped the job while it was writing its last files) and stays so."""
    children = store.child_runs(parent_id)
    column = f"tags.{SLURM_JOB_TAG}"
    found = children[children[column] == job_id] if column in children else children.iloc[0:0]
    if len(found) and found.iloc[0]["status"] == "FINISHED":
        return None
    if len(found):
        run_id = found.iloc[0]["run_id"]
        earlier = found.iloc[0].get("tags.failure_reason")
        if isinstance(earlier, str) and earlier and earlier not in reason:
            reason = f"{reason}; the orchestrator saw: {earlier}"
    else:
        tags = {SLURM_JOB_TAG: job_id, "overrides": " ".join(overrides), **{f"choice.{k}": v for k, v in choices.items()}}
        run_id = store.create_run(name, tags, parent_id)
        store.log_params(run_id, dict(o.lstrip("+~").split("=", 1) for o in overrides if "=" in o))
    store.set_tags(run_id, {"status": status, "failure_reason": reason})
    store.close(run_id, status)
    return run_id
