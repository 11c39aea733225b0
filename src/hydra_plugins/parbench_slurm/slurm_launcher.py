"""hydra/launcher=slurm: hydra-submitit-launcher's SLURM launcher, plus what a benchmark sweep
needs: the SQLite store made absolute at submission, job states from squeue (no accounting
database needed), and every point that SLURM ended badly (time limit, scancel, a crash, out of
memory) recorded as a FAILED or KILLED run with its reason, so the sweep finishes and closes
its parent run."""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path
from typing import Any, Sequence

from hydra.core.utils import JobReturn, JobStatus, filter_overrides

try:
    from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
    from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher
except ImportError:  # the slurm extra is not installed: hydra/launcher=slurm says so when chosen
    SlurmLauncher = None

RESULT_WAIT_S = 30  # how long a shared file system may take to show a job's result file

if SlurmLauncher is not None:

    class ParbenchSlurmLauncher(SlurmLauncher):
        def __call__(self, *args: Any, **kwargs: Any) -> JobReturn:
            """In the job: the point, with SLURM's time-limit warning signal ignored."""
            from parbench.launch.slurm import ignore_time_limit_signal

            ignore_time_limit_signal()
            return super().__call__(*args, **kwargs)

        def executor(self):
            """A submitit SLURM executor with this launcher's sbatch parameters."""
            import submitit
            from omegaconf import OmegaConf

            params = dict(self.params)
            folder, max_num_timeout = params.pop("submitit_folder"), params.pop("max_num_timeout")
            executor = submitit.AutoExecutor(cluster="slurm", folder=folder, slurm_max_num_timeout=max_num_timeout)
            base = set(OmegaConf.structured(BaseQueueConf).keys())
            executor.update_parameters(**{k if k in base else f"slurm_{k}": v for k, v in params.items()})
            return executor

        def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
            from hydra.core.singleton import Singleton

            from parbench.launch.slurm import JobWatcher, accounting_note, with_absolute_tracking

            assert self.config is not None
            overrides = [with_absolute_tracking(o, self.config.tracking.uri) for o in job_overrides]
            Path(str(self.config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
            self._note_auto_hardware()
            numbers = [initial_job_idx + i for i in range(len(overrides))]
            job_params = [(o, "hydra.sweep.dir", n, f"job_id_for_{n}", Singleton.get_state())
                          for o, n in zip(overrides, numbers)]
            jobs = self._submit(job_params)
            points = {job.job_id: self._point(o) for job, o in zip(jobs, overrides)}
            labels = {job.job_id: f"#{n} {points[job.job_id][0]}" for job, n in zip(jobs, numbers)}
            for job in jobs:
                print(f"[parbench] submitted SLURM job {job.job_id} ({labels[job.job_id]})", flush=True)
            print(f"[parbench] watch: squeue -j {jobs[0].job_id.split('_')[0]}; job logs: {jobs[0].paths.folder.parent}",
                  flush=True)
            note = accounting_note()
            if note:
                print(f"[parbench] {note}", flush=True)
            by_id = {job.job_id: job for job in jobs}
            ends = JobWatcher(labels, lambda job_id: by_id[job_id].paths.result_pickle.exists()).wait()
            results = [self._outcome(job, ends[job.job_id], list(o), points[job.job_id])
                       for job, o in zip(jobs, job_overrides)]
            self._tag_sweep(ends)
            return results

        def _submit(self, job_params: list[tuple]) -> list:
            """The sweep's jobs, submitted as one array; a refusal (or no SLURM here) closes the sweep's
            parent run FAILED and exits with its one-line reason instead of Hydra's traceback."""
            from submitit.core.utils import FailedJobError, FailedSubmissionError

            from parbench.launch.slurm import SubmissionRefused, check_slurm_commands, refusal_reason

            try:
                check_slurm_commands()
                # submitit prints sbatch's stderr itself; the reason below says it once.
                with contextlib.redirect_stderr(io.StringIO()):
                    return self.executor().map_array(self, *zip(*job_params))
            except SubmissionRefused as e:
                reason = str(e)
            except (FailedJobError, FailedSubmissionError, OSError) as e:
                reason = refusal_reason(e)
            from parbench.sweep import fail_sweep

            fail_sweep(Path(str(self.config.hydra.sweep.dir)), reason)
            print(f"parbench: {reason}", file=sys.stderr, flush=True)
            raise SystemExit(2)

        def _note_auto_hardware(self) -> None:
            """hardware=auto is resolved here, on the submitting host: say what the jobs ask for."""
            from parbench.launch.slurm import job_hardware

            if self.config.hardware.name != "auto":
                return
            device_type, devices = job_hardware(self.config.hardware)
            asks = f"--cpus-per-task={self.params.get('cpus_per_task')}"
            asks += f" --gpus-per-node={self.params['gpus_per_node']}" if self.params.get("gpus_per_node") else ", no GPU"
            print(f"[parbench] hardware=auto, resolved on this host: {device_type}, {devices} per node; each job asks "
                  f"for {asks} (compute nodes unlike this host: name their profile, e.g. hardware=h100_sxm)",
                  flush=True)

        def _tag_sweep(self, ends: dict) -> None:
            """The parent run names the jobs SLURM ended badly (timed out, cancelled, ...)."""
            from parbench.launch.slurm import sweep_tags
            from parbench.sweep import parent_run_id
            from parbench.tracking.store import Store

            tags = sweep_tags(ends)
            parent = parent_run_id(Path(str(self.config.hydra.sweep.dir)))
            if tags and parent is not None:
                Store(self.config.tracking.uri, self.config.tracking.experiment).set_tags(parent, tags)

        def _point(self, overrides: list[str]) -> tuple[str, dict[str, str]]:
            """The point's name (for the terminal, and a run made here: the orchestrator names a valid
            point's run by its layout, once its config is checked) and its config choices."""
            from parbench.tracking.labels import point_label

            cfg = self.hydra_context.config_loader.load_sweep_config(self.config, overrides)
            choices = {k: str(v) for k, v in cfg.hydra.runtime.choices.items() if not k.startswith("hydra")}
            return point_label(choices, cfg.hydra.job.override_dirname), choices

        def _outcome(self, job, end, overrides: list[str], point: tuple[str, dict[str, str]]) -> JobReturn:
            """The point's JobReturn; a failure is recorded in MLflow and returned as handled, so
            Hydra's sweeper goes on to the sweep's end (summary, parent run closed)."""
            from parbench.launch.interrupt import INTERRUPTS
            from parbench.launch.slurm import wait_for_file

            failure = end.failure(int(self.params["timeout_min"]))
            if failure is not None and end.state == "CANCELLED" and INTERRUPTS.signal:
                failure = ("KILLED", f"the sweep got {INTERRUPTS.signal.name}: parbench cancelled its SLURM jobs")
            if failure is None and wait_for_file(job.paths.result_pickle, RESULT_WAIT_S):
                # SLURM saw no failure: the job's own result says how the point went.
                error = job.exception()
                result = job.result() if error is None else None
                if result is not None and result.status == JobStatus.COMPLETED:
                    return result
                failure = ("FAILED", _job_error(result._return_value if result is not None else error, job))
            elif failure is None:
                failure = ("FAILED", f"the job ended ({end.state}) without a result: see {job.paths.stderr}")
            self._record(job.job_id, point, list(filter_overrides(overrides)), *failure)
            return JobReturn(overrides=overrides, status=JobStatus.COMPLETED,
                             _return_value={"status": failure[0], "failure_reason": failure[1]})

        def _record(self, job_id: str, point: tuple[str, dict[str, str]], overrides: list[str], status: str,
                    reason: str) -> None:
            from parbench.sweep import parent_run_id, record_point_failure
            from parbench.tracking.store import Store

            parent = parent_run_id(Path(str(self.config.hydra.sweep.dir)))
            store = Store(self.config.tracking.uri, self.config.tracking.experiment)
            name, choices = point
            if record_point_failure(store, parent, job_id, name, choices, overrides, status, reason) is None:
                print(f"[parbench] SLURM job {job_id} ({name}): its run had FINISHED before SLURM stopped the job "
                      f"({reason.split(':')[0]}); kept as FINISHED", flush=True)
            else:
                print(f"[parbench] SLURM job {job_id} ({name}): {status}: {reason}", flush=True)


def _job_error(error: BaseException, job) -> str:
    """The exception that ended the job (for submitit's FailedJobError, the last one in the job's
    traceback it carries), and where its log is."""
    lines = [line for line in f"{type(error).__name__}: {error}".splitlines() if line.strip()]
    cause = next((line for line in reversed(lines) if "Error" in line or "Exception" in line), lines[0])
    return f"the job raised {cause.strip()} (log: {job.paths.stderr})"
