"""Hydra callback: one MLflow parent run per multirun, and the sweep's table and reports at its end.
Before the sweep starts, the tracking store must answer (fail fast) and runs orphaned by a killed
sweep are marked FAILED; an interrupted sweep closes its parent run as KILLED."""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from parbench.launch.cluster import SLURM_JOB_TAG
from parbench.launch.interrupt import INTERRUPTS
from parbench.launch.prestart import PRESTARTED
from parbench.fmt import plural
from parbench.paths import SKIPPED_FILE, SWEEP_PENDING_FILE
from parbench.sweep_check import check_sweep, launched_here
from parbench.tracking.labels import NOT_DEFINING
from parbench.tracking.reach import TrackingUnreachable, check_reachable

if TYPE_CHECKING:
    from parbench.tracking.store import Store

PARENT_FILE = "mlflow_parent_run.json"


def parent_run_id(sweep_dir: Path) -> str | None:
    path = sweep_dir / PARENT_FILE
    return json.loads(path.read_text())["run_id"] if path.exists() else None


def reused_run_ids(sweep_dir: Path) -> list[str]:
    """The FINISHED runs that resume reused for this sweep's points, in point order."""
    marks = sorted(sweep_dir.glob(f"*/{SKIPPED_FILE}"), key=lambda p: (len(p.parent.name), p.parent.name))
    return [json.loads(p.read_text())["run_id"] for p in marks]


def close_sweep(sweep_dir: Path, status: str | None = None, reason: str = "") -> int:
    """The sweep's table, reports and CSV on its parent run (the points it ran and those it reused),
    then the run closed (status None: FINISHED if any point finished, else FAILED). Returns the
    number of points that did not finish."""
    from parbench.report.build import sweep_report
    from parbench.report.mlflow_view import describe_sweep
    from parbench.report.summary import format_runs, sweep_table
    from parbench.tracking.store import REUSED_TAG, Store

    parent = json.loads((sweep_dir / PARENT_FILE).read_text())
    store, run_id = Store(parent["tracking_uri"], parent["experiment"]), parent["run_id"]
    reused = reused_run_ids(sweep_dir)
    if reused:
        store.set_tags(run_id, {REUSED_TAG: ",".join(reused)})
    runs = store.sweep_runs(run_id)
    table = sweep_table(runs)
    csv = sweep_dir / "summary.csv"
    table.to_csv(csv, index=False)
    store.log_artifacts(run_id, [csv])
    title = f"{plural(len(table), 'point')}" + (f", {len(reused)} reused from earlier runs" if reused else "")
    store.set_tags(run_id, {"skipped": str(len(reused)), **({"failure_reason": reason} if reason else {})})
    # Closed before the description and reports: a bug there must not leave a finished sweep RUNNING.
    unfinished = int((table["status"] != "FINISHED").sum()) if len(table) else 0
    store.close(run_id, status or ("FINISHED" if len(table) > unfinished else "FAILED"))
    link = describe_sweep(store, run_id, runs, sweep_dir)  # what the MLflow UI shows at the first click
    reports = sweep_report(store, run_id, runs, sweep_dir)
    (sweep_dir / SWEEP_PENDING_FILE).unlink(missing_ok=True)
    print(format_runs(table, title=f"Sweep {sweep_dir} ({title})"))
    if reused:
        print(f"Reused {plural(len(reused), 'point')} that already had a FINISHED run with the same config "
              "(resume=true; resume=false runs them again)")
    print("".join(f"Report: {path}\n" for path in reports), end="")
    print(f"Summary CSV: {csv}\nCompare the runs: {link}", flush=True)
    return unfinished


def close_sweep_or_defer(sweep_dir: Path, status: str | None = None, reason: str = "") -> int:
    """close_sweep; if the store fails, leave a marker for `parbench sync` instead of failing the
    sweep. Returns the number of points that did not finish (0 when the store could not say)."""
    try:
        return close_sweep(sweep_dir, status, reason)
    except Exception as e:  # noqa: BLE001 - a store that fails must not fail the finished sweep
        (sweep_dir / SWEEP_PENDING_FILE).write_text(json.dumps({"status": status, "reason": reason}))
        print(f"[parbench] the sweep's parent run was not closed ({e}); `parbench sync {sweep_dir}` closes it "
              "once the store answers", flush=True)
        return 0


def fail_sweep(sweep_dir: Path, reason: str) -> None:
    """A sweep that ran no point (its cluster refused the jobs): the parent run FAILED with the reason,
    tagged so `parbench report` passes over it when it looks for the latest sweep."""
    from parbench.tracking.store import Store

    parent = json.loads((sweep_dir / PARENT_FILE).read_text())
    store = Store(parent["tracking_uri"], parent["experiment"])
    store.set_tags(parent["run_id"], {"parbench.sweep": "refused", "failure_reason": reason})
    store.close(parent["run_id"], "FAILED")


def opened_here(sweep_dir: Path) -> bool:
    """Whether this process opened the sweep's parent run; a job a cluster launcher runs elsewhere
    (SLURM, submitit) leaves the parent to the sweep's own process."""
    opener = json.loads((sweep_dir / PARENT_FILE).read_text()).get("opened_by")
    return opener is None or opener == {"pid": os.getpid(), "host": socket.gethostname()}


def stop_sweep(sweep_dir: Path | None) -> NoReturn:
    """After SIGINT/SIGTERM: close the parent run as KILLED (where this process opened it) and exit
    without a traceback."""
    if sweep_dir is not None and parent_run_id(sweep_dir) and opened_here(sweep_dir):
        close_sweep_or_defer(sweep_dir, "KILLED", INTERRUPTS.reason())
    print(f"parbench: stopped by {INTERRUPTS.signal.name}; run the same command again to resume "
          "(points already FINISHED are skipped)", file=sys.stderr, flush=True)
    raise SystemExit(INTERRUPTS.exit_code)


class MlflowSweepCallback(Callback):
    """Hydra creates it for every run, sweep or not, so mlflow and the reports are imported in its
    hooks: a single run refused for a bad config never pays for them."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        INTERRUPTS.install()
        try:
            check_reachable(config.tracking.uri)
        except TrackingUnreachable as e:
            print(f"parbench: {e}", file=sys.stderr, flush=True)
            sys.exit(2)
        if launched_here(config) and config.launch.prestart and not config.dry_run:
            PRESTARTED.start()  # the first point's torchrun imports torch while the sweep is checked
        check_sweep(config)
        from parbench.tracking.orphans import process_tags, reap_orphans
        from parbench.tracking.store import Store

        sweep_dir = Path(config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        store = Store(config.tracking.uri, config.tracking.experiment)
        reap_orphans(store)
        overrides = " ".join(config.hydra.overrides.task)
        defining = " ".join(o for o in config.hydra.overrides.task if not o.lstrip("+~").startswith(NOT_DEFINING))
        name = f"sweep {defining[:80] or 'defaults'} ({sweep_dir.name})"
        run_id = store.create_run(name, {"parbench.sweep": "true", "overrides": overrides,
                                         "sweep_dir": str(sweep_dir.resolve()), **process_tags()})
        (sweep_dir / PARENT_FILE).write_text(json.dumps({"run_id": run_id, "tracking_uri": store.uri,
                                                         "experiment": config.tracking.experiment,
                                                         "opened_by": {"pid": os.getpid(),
                                                                       "host": socket.gethostname()}}))

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        PRESTARTED.stop()  # started after the last point for a next one
        sweep_dir = Path(config.hydra.sweep.dir)
        if parent_run_id(sweep_dir) is None:
            return
        if INTERRUPTS.signal:  # came between two jobs, or during the last one's logging
            stop_sweep(sweep_dir)
        unfinished = close_sweep_or_defer(sweep_dir)
        if unfinished:  # after the summary: scripts and CI see that points failed
            print(f"parbench: {plural(unfinished, 'point')} of the sweep did not finish (see the table above)",
                  file=sys.stderr, flush=True)
            sys.exit(1)


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
