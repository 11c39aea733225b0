"""Hydra callback: one MLflow parent run per multirun, and the sweep's table at its end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from parbench.launch.cluster import SLURM_JOB_TAG
from parbench.report.inference import inference_sweep_report
from parbench.report.summary import format_runs, sweep_table
from parbench.tracking.store import Store

PARENT_FILE = "mlflow_parent_run.json"
# Cross-run reports made at a sweep's end: (store, parent run id, child runs, sweep dir) -> files
# written (and logged on the parent run); each returns nothing when the sweep is not its kind.
SWEEP_REPORTS = (inference_sweep_report,)


def run_name(choices: dict[str, str], override_dirname: str) -> str:
    """A job's run name: its workload and what its overrides change (Hydra's override_dirname)."""
    label = override_dirname or f"parallel={choices.get('parallel')},model={choices.get('model')}"
    return f"{choices.get('workload', 'job')} {label}"


def parent_run_id(sweep_dir: Path) -> str | None:
    path = sweep_dir / PARENT_FILE
    return json.loads(path.read_text())["run_id"] if path.exists() else None


class MlflowSweepCallback(Callback):
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
        reports = [path for report in SWEEP_REPORTS for path in report(store, run_id, children, sweep_dir)]
        store.finish(run_id, ok=bool(len(table)) and (table["status"] == "FINISHED").any())
        print(format_runs(table, title=f"Sweep {sweep_dir} ({len(table)} jobs)"))
        print("".join(f"Report: {path}\n" for path in reports), end="")
        print(f"Summary CSV: {csv}\nCompare in MLflow: mlflow ui --backend-store-uri {store.uri}  "
              f"(parent run {run_id})")


def record_point_failure(store: Store, parent_id: str, job_id: str, name: str, overrides: list[str],
                         status: str, reason: str) -> str | None:
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
        run_id = store.create_run(name, {SLURM_JOB_TAG: job_id, "overrides": " ".join(overrides)}, parent_id)
        store.log_params(run_id, dict(o.lstrip("+~").split("=", 1) for o in overrides if "=" in o))
    store.set_tags(run_id, {"status": status, "failure_reason": reason})
    store.close(run_id, status)
    return run_id
