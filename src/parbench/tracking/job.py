"""The MLflow child run of one job: opened before launch, filled from what the worker wrote.
Everything it logs is also in the job dir (resolved.yaml, plan.json, outcome.json, the worker's
files), so a run the tracking server missed is uploaded later by `parbench sync`."""

from __future__ import annotations

import json
from pathlib import Path

from parbench import __version__
from parbench.config import resolve
from parbench.config.hf_model import source_tags
from parbench.config.schema import Config
from parbench.launch.torchrun import LaunchOutcome
from parbench.paths import PLAN_FILE, PROFILE_DIR, RESULTS_FILE, STEPS_FILE, git_sha
from parbench.tracking.headline import TRACE_HINT, child_description
from parbench.tracking.orphans import process_tags
from parbench.tracking.resume import HASH_TAG, config_hash
from parbench.tracking.store import Store, read_json

LOG_FILE = "worker.log"
TRACE_README = "HOW_TO_OPEN_TRACES.md"
STACKS = "stacks"  # each rank's stack, dumped when the job hung


class JobRun:
    def __init__(self, store: Store, run_id: str):
        self.store, self.run_id = store, run_id

    @classmethod
    def start(cls, store: Store, cfg: Config, plan: dict, name: str, choices: dict[str, str], overrides: list[str],
              parent_id: str | None, job_dir: Path) -> "JobRun":
        sha = git_sha()
        tags = {**{f"choice.{k}": v for k, v in choices.items()}, "git_sha": sha,
                "mlflow.source.git.commit": sha.removesuffix("-dirty"), "parbench_version": __version__,
                **process_tags(), "job_dir": str(job_dir.resolve()), "overrides": " ".join(overrides),
                HASH_TAG: config_hash(cfg), **source_tags(cfg.model)}
        run = cls(store, store.create_run(name, tags, parent_id))
        store.log_params(run.run_id, resolve.flatten(resolve.as_dict(cfg)))
        store.log_metrics(run.run_id, {f"plan_{k}": v for k, v in resolve.flatten(plan).items()
                                       if _is_number(v)})
        store.log_artifacts(run.run_id, [job_dir / resolve.RESOLVED_FILE])
        return run

    def attach(self, tags: dict[str, str], files: list[Path]) -> None:
        """Tags and artifacts the orchestrator adds itself (e.g. the GPU topology)."""
        self.store.set_tags(self.run_id, tags)
        self.store.log_artifacts(self.run_id, files)

    def finish(self, outcome: LaunchOutcome, job_dir: Path) -> dict[str, float]:
        """Log everything the worker left (also after a crash) and close the run."""
        steps = [json.loads(line) for line in (job_dir / STEPS_FILE).read_text().splitlines()
                 if line.strip()] if (job_dir / STEPS_FILE).exists() else []
        results = read_json(job_dir / RESULTS_FILE)
        metrics = results.get("metrics", {})
        self.store.log_step_rows(self.run_id, steps)
        self.store.log_metrics(self.run_id, {**metrics, "launch_duration_s": outcome.duration_s})
        for name, series in results.get("step_metrics", {}).items():
            self.store.log_step_rows(self.run_id, [{"step": i, name: v} for i, v in enumerate(series)])
        tags = {**results.get("tags", {}), "status": outcome.status}
        if not outcome.ok:
            tags.update(failure_reason=outcome.reason, log_tail=outcome.log_tail[-4000:])
        traces = sorted((job_dir / PROFILE_DIR).glob("trace*.json.gz"))
        if traces:  # beside the traces in the artifact view: how to open them
            (job_dir / PROFILE_DIR / TRACE_README).write_text(f"# Opening these traces\n\n{TRACE_HINT}\n")
        # The run page's description: its own figures at the first click, and how to open its traces.
        tags["mlflow.note.content"] = child_description(metrics, read_json(job_dir / PLAN_FILE).get("workload", ""),
                                                        outcome.status, "" if outcome.ok else outcome.reason, bool(traces))
        self.store.set_tags(self.run_id, tags)
        files = (LOG_FILE, RESULTS_FILE, STEPS_FILE, *results.get("artifacts", []))
        self.store.log_artifacts(self.run_id, [job_dir / f for f in files])
        self.store.log_artifacts(self.run_id, sorted((job_dir / ".hydra").glob("*.yaml")), "hydra")
        # Traces (one per rank), CSV tables, plots and memory snapshots of a profiled run.
        self.store.log_artifacts(self.run_id, sorted(p for p in (job_dir / PROFILE_DIR).glob("*") if p.is_file()),
                                 PROFILE_DIR)
        self.store.log_artifacts(self.run_id, sorted(p for p in (job_dir / STACKS).glob("*.txt") if p.stat().st_size),
                                 STACKS)
        self.store.close(self.run_id, outcome.status)
        return metrics


def _is_number(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return True
