"""`parbench sync [DIR ...]` (or `python -m parbench.sync`): upload the jobs whose results did not
reach the tracking store (a server that went away mid-sweep), and close their sweeps' parent runs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from parbench.config import resolve
from parbench.launch.torchrun import LaunchOutcome
from parbench.paths import SWEEP_PENDING_FILE
from parbench.sweep import close_sweep
from parbench.tracking.job import JobRun
from parbench.tracking.pending import OUTCOME_FILE, PLAN_FILE, RECORD_FILE, JobRecord
from parbench.tracking.store import Store, read_json
from parbench.workloads.registry import load_config

NO_OUTCOME = LaunchOutcome(False, "the orchestrator stopped before the job ended (no outcome.json)", None, 0.0, "")


def unsynced_jobs(roots: list[Path]) -> list[Path]:
    return sorted(p.parent for root in roots for p in root.rglob(RECORD_FILE) if not JobRecord.load(p.parent).synced)


def sync_job(job_dir: Path) -> str:
    """Upload one job dir to its store: into its own run if the store has it, else a new run."""
    record = JobRecord.load(job_dir)
    store = Store(record.uri, record.experiment)
    if record.run_id and store.has_run(record.run_id):
        run = JobRun(store, record.run_id)
    else:
        parent = record.parent_run_id if record.parent_run_id and store.has_run(record.parent_run_id) else None
        run = JobRun.start(store, load_config(job_dir / resolve.RESOLVED_FILE), read_json(job_dir / PLAN_FILE),
                           record.name, record.choices, record.overrides, parent, job_dir)
    saved = read_json(job_dir / OUTCOME_FILE)
    outcome = LaunchOutcome(**saved) if saved else NO_OUTCOME
    run.finish(outcome, job_dir)
    record.run_id, record.synced = run.run_id, True
    record.save(job_dir)
    return f"{job_dir}: {outcome.status} -> run {run.run_id} ({store.uri})"


def sync(roots: list[Path]) -> int:
    """Upload every unsynced job under roots, then close pending sweeps; the number of failures."""
    failed = 0
    jobs = unsynced_jobs(roots)
    print(f"parbench sync: {len(jobs)} job(s) to upload under {', '.join(map(str, roots))}", flush=True)
    for job_dir in jobs:
        try:
            print("  " + sync_job(job_dir), flush=True)
        except Exception as e:  # noqa: BLE001 - report each failure, go on with the rest
            failed += 1
            print(f"  {job_dir}: failed ({e}); run `parbench sync {job_dir}` again once the store answers",
                  file=sys.stderr, flush=True)
    for marker in sorted(p for root in roots for p in root.rglob(SWEEP_PENDING_FILE)):
        try:
            close_sweep(marker.parent)
        except Exception as e:  # noqa: BLE001
            failed += 1
            print(f"  {marker.parent}: sweep parent run not closed ({e})", file=sys.stderr, flush=True)
    return failed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="parbench sync", description=__doc__)
    parser.add_argument("dirs", nargs="*", type=Path, default=[Path("outputs")],
                        help="job or sweep dirs, searched recursively (default: outputs)")
    args = parser.parse_args(argv)
    sys.exit(1 if sync(args.dirs) else 0)


if __name__ == "__main__":
    main()
