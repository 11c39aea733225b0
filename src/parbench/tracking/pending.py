"""A job's tracking record, kept in its job dir: where its run goes and whether it got there.
A job whose store fails (a tracking server gone, a store refusing writes) still runs to its end;
what it measured stays in the job dir and `parbench sync` uploads it later."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from parbench.config.schema import Config
from parbench.launch.torchrun import LaunchOutcome
from parbench.predict import prediction_errors
from parbench.tracking.job import JobRun
from parbench.tracking.orphans import reap_orphans
from parbench.tracking.resume import finished_run
from parbench.paths import PLAN_FILE, RESULTS_FILE, SKIPPED_FILE, write_json_atomic
from parbench.tracking.store import Store, read_json

RECORD_FILE, OUTCOME_FILE = "tracking.json", "outcome.json"


@dataclass
class JobRecord:
    uri: str
    experiment: str
    name: str
    choices: dict[str, str] = field(default_factory=dict)
    overrides: list[str] = field(default_factory=list)
    parent_run_id: str | None = None
    run_id: str | None = None
    synced: bool = False

    def save(self, job_dir: Path) -> None:
        (job_dir / RECORD_FILE).write_text(json.dumps(asdict(self), indent=2))

    @classmethod
    def load(cls, job_dir: Path) -> "JobRecord":
        return cls(**read_json(job_dir / RECORD_FILE))


def warn_unsynced(job_dir: Path, uri: str, error: BaseException) -> None:
    print(f"[parbench] tracking failed ({uri}: {str(error).splitlines()[0][:200] if str(error) else type(error).__name__}); "
          f"the results stay in {job_dir}: upload them later with `parbench sync {job_dir}`", flush=True)


class TrackedJob:
    """The job's run when the store answers; the job dir's record either way."""

    def __init__(self, job_dir: Path, record: JobRecord, run: JobRun | None = None, skipped_by: str | None = None):
        self.job_dir, self.record, self.run, self.skipped_by = job_dir, record, run, skipped_by

    @classmethod
    def open(cls, cfg: Config, plan: dict, name: str, choices: dict[str, str], overrides: list[str],
             parent_id: str | None, job_dir: Path, main: bool = True, reap: bool = False) -> "TrackedJob":
        """Skip the job if resume finds it FINISHED; else, on the main node (which alone writes the
        job dir's record; the others share that dir), record it and open its run."""
        job = cls(job_dir, JobRecord(cfg.tracking.uri, cfg.tracking.experiment, name, choices, overrides, parent_id))
        if main:
            (job_dir / PLAN_FILE).write_text(json.dumps(plan, indent=2, default=str))
        try:
            store = Store(cfg.tracking.uri, cfg.tracking.experiment)
            if reap:
                reap_orphans(store)
            job.skipped_by = finished_run(store, cfg)
            if job.skipped_by or not main:
                if job.skipped_by and main:
                    (job_dir / SKIPPED_FILE).write_text(json.dumps({"run_id": job.skipped_by}))
                return job
            job.run = JobRun.start(store, cfg, plan, name, choices, overrides, parent_id, job_dir)
            job.record.run_id = job.run.run_id
        except Exception as e:  # noqa: BLE001 - whatever the store raises, the job still runs
            warn_unsynced(job_dir, cfg.tracking.uri, e)
        if main:
            job.record.save(job_dir)
        return job

    def finish(self, outcome: LaunchOutcome, prediction: dict | None = None) -> dict[str, float]:
        """Keep the outcome in the job dir, add the model's `prediction` and its errors to the
        results, log everything to the run if the store answers (else `parbench sync` does later)."""
        (self.job_dir / OUTCOME_FILE).write_text(json.dumps(asdict(outcome), indent=2))
        if prediction and outcome.ok:
            add_prediction_errors(self.job_dir / RESULTS_FILE, prediction)
        metrics = read_json(self.job_dir / RESULTS_FILE).get("metrics", {})
        if self.run is not None:
            try:
                metrics = self.run.finish(outcome, self.job_dir)
                self.record.synced = True
            except Exception as e:  # noqa: BLE001
                warn_unsynced(self.job_dir, self.record.uri, e)
        self.record.save(self.job_dir)
        return metrics


def add_prediction_errors(results_path: Path, prediction: dict) -> None:
    """The predicted figures and their errors against the measured ones, into the worker's results."""
    results = read_json(results_path)
    if "metrics" not in results:
        return
    results["metrics"].update(prediction_errors(prediction, results["metrics"]))
    write_json_atomic(results_path, results)
