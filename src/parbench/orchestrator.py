"""One Hydra job, top to bottom: resolve the config -> validate it (each part checks itself) ->
plan (parbench.prepare) -> launch torchrun -> record the outcome in MLflow. It never initialises CUDA, so it survives
whatever the workers do; it imports torch and mlflow only once the config is known to be valid,
so a config that cannot work is refused in about a second."""

from __future__ import annotations

import sys
import threading
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from parbench.config import ConfigError, resolve
from parbench.config.hardware import detect_gpus
from parbench.config.schema import Config
from parbench.fmt import plural
from parbench.launch.cluster import current_node, is_main_node
from parbench.launch.diagnose import memory_facts
from parbench.launch.interrupt import INTERRUPTS
from parbench.launch.prestart import PRESTARTED
from parbench.launch.torchrun import LaunchOutcome, run_torchrun, torchrun_command, worker_env
from parbench.prepare import prepare, print_plan
from parbench.tracking.labels import point_label, run_label
from parbench.tracking.reach import TrackingUnreachable, check_reachable
from parbench.workloads.registry import WORKLOADS, job_layout

# A measurement this far from a calibrated prediction (the most the model misses on the machine it was calibrated on,
# docs/plan.md) says the machine is not the profile's: on the CI machine the same CPU runs 30 % slower GEMMs and a
# 2.6x slower gloo latency from one day to the next (docs/results/2026-11-29_short_kernels31.md).
FAR_OFF_PCT = 25.0
# A time whose dispatch is this share of it moves with the host, which may dispatch faster or slower than the
# profile's (H100 hosts: up to 1.8x apart, docs/results/2026-12-07_host_probe31.md).
HOST_SHARE = 0.5
TIMES = ("step_time", "ttft", "tpot")  # the predicted times a run measures (predicted_<time>_error_pct)
INFERENCE_PHASES = {"ttft": ("prefill", "prefill (TTFT)"), "tpot": ("decode", "decode step (TPOT)")}


@dataclass
class JobContext:
    """What Hydra knows about this job; `name` becomes the short label once the config is valid."""

    job_dir: Path
    multirun: bool
    sweep_dir: Path | None
    name: str
    overrides: list[str]
    choices: dict[str, str]

    @classmethod
    def from_hydra(cls) -> "JobContext":
        hc = HydraConfig.get()
        multirun = hc.mode == RunMode.MULTIRUN
        choices = {k: str(v) for k, v in hc.runtime.choices.items() if not k.startswith("hydra")}
        return cls(Path(hc.runtime.output_dir), multirun, Path(hc.sweep.dir) if multirun else None,
                   point_label(choices, hc.job.override_dirname), list(hc.overrides.task), choices)


def run_job(node: DictConfig) -> dict:
    ctx = JobContext.from_hydra()
    INTERRUPTS.install()
    if INTERRUPTS.signal:  # the sweep was interrupted between two jobs
        from parbench.sweep import stop_sweep

        stop_sweep(ctx.sweep_dir)
    if not ctx.multirun and not node.dry_run:  # first, it is cheap (a sweep checked its store before it started)
        try:
            check_reachable(node.tracking.uri)
        except TrackingUnreachable as e:
            print(f"parbench: {e}", file=sys.stderr, flush=True)
            sys.exit(2)
    gpus = detect_gpus()
    try:
        cfg, dims, plan = prepare(node, gpus)
        ctx.name = cfg.tracking.run_name or run_label(cfg, dims, ctx.overrides,
                                                      WORKLOADS.get(cfg.workload.name).uses_model)
    except ConfigError as e:
        return reject(e, node, ctx)
    if not cfg.dry_run and cfg.launch.prestart:
        PRESTARTED.start()  # a no-op where the sweep started it already
    if cfg.dry_run:
        if node.workload.get("seq_len", 0) is None:
            print(f"[parbench] seq {cfg.workload.seq_len}: model={cfg.model.name}'s default sequence length "
                  "(workload.seq_len=N plans another)", flush=True)
        print_plan(plan)
        return plan
    return launch(cfg, plan, ctx)


def launch(cfg: Config, plan: dict, ctx: JobContext) -> dict:
    from parbench.sweep import opened_here, parent_run_id, stop_sweep
    from parbench.tracking.job import LOG_FILE  # mlflow: only once there is a run to record
    from parbench.tracking.pending import TrackedJob
    from parbench.tracking.system_metrics import system_metrics  # psutil, NVML: only once a job launches

    node = current_node(cfg.hardware.nodes, cfg.launch.master_port)
    resolve.save(cfg, ctx.job_dir / resolve.RESOLVED_FILE)
    parent = parent_run_id(ctx.sweep_dir) if ctx.sweep_dir else None
    job = TrackedJob.open(cfg, plan, ctx.name, ctx.choices, ctx.overrides, parent, ctx.job_dir,
                          main=node.is_main, reap=not ctx.multirun)
    if job.skipped_by:
        print(f"[parbench] {ctx.name}: skipped, run {job.skipped_by} already FINISHED with this config "
              "(resume=false runs it again)", flush=True)
        return {}
    if job.run is not None:
        job.run.attach(node.tags(), [])  # SLURM job id and rendezvous: how the sweep finds this run
    # Beside torchrun's start, not before it: collecting imports torch (seconds where the bytecode is not kept).
    topology = threading.Thread(target=record_topology, args=(job.run, ctx.job_dir), daemon=True)
    if job.run is not None and cfg.hardware.device_type == "cuda":
        topology.start()
    print(f"[parbench] {ctx.name}: {plural(plan['world_size'], 'rank')} on {cfg.hardware.name} "
          f"({cfg.hardware.backend}), job dir {ctx.job_dir}", flush=True)
    log_name = LOG_FILE if node.is_main else f"worker.node{node.rank}.log"
    nproc = job_layout(cfg)[1] // cfg.hardware.nodes
    # The next point's torchrun, started once this one's steps are done (a sweep's end stops it).
    prestart_next = PRESTARTED.start if parent and cfg.launch.prestart and opened_here(ctx.sweep_dir) else None
    with system_metrics(job.run.run_id, job.run.store.uri, cfg.tracking) if job.run is not None else nullcontext():
        outcome = run_torchrun(torchrun_command(cfg, node, ctx.job_dir, nproc), worker_env(cfg),
                               ctx.job_dir / log_name, cfg.launch.timeout_s, cfg.launch.log_tail_lines,
                               cfg.launch.stall_timeout_s, memory_facts(cfg, plan), prestart_next)
    if prestart_next:
        prestart_next()  # no-op if started already; a failed point printed no last step
    if topology.is_alive():
        topology.join()
    if not node.is_main:
        return {}
    metrics = job.finish(outcome, plan.get("prediction"))
    report(cfg, ctx, job.run, outcome, metrics, plan.get("prediction"))
    if INTERRUPTS.signal:
        stop_sweep(ctx.sweep_dir)
    if not outcome.ok and not ctx.multirun:
        sys.exit(1)
    return metrics


def record_topology(run, job_dir: Path) -> None:
    """GPU names, links and driver/CUDA/NCCL versions as tags and topology.json, while the job
    starts, so a run that crashes still has them."""
    from parbench.workloads.microbench.topology import collect_topology, topology_tags, write_topology

    found = collect_topology()
    run.attach(topology_tags(found), write_topology(found, job_dir))


def prediction_source(cfg: Config, prediction: dict | None, metrics: dict | None = None) -> str:
    """Under the table: where the predicted_* figures come from; spec figures say how to measure them, and so
    does a profile not of this machine when the run's measurement is far off it (metrics' predicted_*_error_pct)."""
    if not prediction:
        return ""
    source, calibrate = prediction["calibration"], f"parbench calibrate hardware={cfg.hardware.name}"
    if source.startswith("spec"):
        return f"\n  predicted_* from {source} (uncalibrated: `{calibrate}` measures them)"
    far = far_off(metrics or {})
    reason = far_off_reason(cfg, calibrate, prediction, far[0]) if far else None
    advice = f"\n  the prediction is {far[1]:+.0f} % off this run's measurement: {reason}" if reason else ""
    return f"\n  predicted_* from {source}{advice}"


def far_off_reason(cfg: Config, calibrate: str, prediction: dict, time: str) -> str | None:
    """Why the predicted `time` (one of TIMES) may be far off: an inference run of a block no calibration run had (the
    profile counts the kernels of those it ran), else a profile of another machine (on a GPU, of another host where
    the host's dispatch is much of that time: `--host` measures that alone); None for this machine's own profile."""
    from parbench.models import block_structure
    from parbench.predict.profiles import calibration_for

    structure = block_structure(cfg.model)
    counted = calibration_for(cfg.hardware, cfg.workload.dtype, cfg.calibration).prefill_kernels_per_layer
    if cfg.workload.name == "inference" and counted and structure not in counted:
        return (f"no calibration run had this model's block ({structure}; they ran {', '.join(sorted(counted))}), "
                "so the model's figures for its kernels are extrapolated")
    if own_profile(cfg):
        return None
    share, what = host_share(prediction, time)
    if share >= HOST_SHARE and cfg.hardware.device_type == "cuda":
        return (f"the host's dispatch is {100 * share:.0f} % of the predicted {what}, and one host of a GPU can take 1.8x "
                f"another's time to dispatch; `{calibrate} --host` measures this host's dispatch in minutes "
                "(its host runs only), and later runs use it")
    return f"the profile was measured on another machine or day; `{calibrate}` measures this one, and later runs use it"


def host_share(prediction: dict, time: str) -> tuple[float, str]:
    """The host's whole dispatch, hidden or not, as a share of the predicted `time` (one of TIMES): a training step, a
    prefill (TTFT) or a decode step (TPOT); and that time's name."""
    if time == "step_time":
        return prediction.get("host_dispatch_s", 0.0) / prediction["predicted_step_time_s"], "step"
    phase, what = INFERENCE_PHASES[time]
    part = prediction.get(phase, {})
    return (part.get("host_dispatch_s", 0.0) / part["seconds"] if part.get("seconds") else 0.0), what


def far_off(metrics: dict) -> tuple[str, float] | None:
    """The predicted time (one of TIMES) whose error is the largest beyond FAR_OFF_PCT, and that error (positive
    where the model predicted more), else None: a machine shows in its times, not in its memory."""
    errors = [(name, metrics[f"predicted_{name}_error_pct"])
              for name in TIMES if f"predicted_{name}_error_pct" in metrics]
    worst = max(errors, key=lambda e: abs(e[1]), default=None)
    return worst if worst and abs(worst[1]) > FAR_OFF_PCT else None


def own_profile(cfg: Config) -> bool:
    """Whether the prediction used a profile the user named or measured on this machine (`parbench calibrate`)."""
    from parbench.predict.calibration_file import user_calibration_dir

    return bool(cfg.calibration) or (user_calibration_dir() / f"{cfg.hardware.name}.yaml").exists()


def report(cfg: Config, ctx: JobContext, run, outcome: LaunchOutcome, metrics: dict,
           prediction: dict | None = None) -> None:
    from parbench.report.summary import metrics_table

    status = outcome.status if outcome.ok else f"{outcome.status}: {outcome.reason}"
    keys = WORKLOADS.get(cfg.workload.name).summary_metrics
    table = metrics_table(metrics, keys)
    print(f"\n== {ctx.name}: {status}" + (f"\n{table}{prediction_source(cfg, prediction, metrics)}" if table else ""))
    where = run.store.where_to_look(run.run_id) if run is not None else f"not in MLflow yet: parbench sync {ctx.job_dir}"
    log_hint = "" if outcome.ok else " (worker.log there: the ranks' whole output, tracebacks included)"
    print(f"Job dir: {ctx.job_dir}{log_hint}\n{where}\n", flush=True)


def reject(error: ConfigError, node: DictConfig, ctx: JobContext) -> dict:
    """An invalid config: a clear message; in a sweep a FAILED run records it and the sweep goes on."""
    print(f"parbench: invalid config ({ctx.name}): {error}", file=sys.stderr, flush=True)
    if not ctx.multirun:
        sys.exit(2)
    if not is_main_node():  # every node of a multi-node job gets here; node 0 records it
        return {}
    from parbench.tracking.store import Store
    from parbench.sweep import parent_run_id

    store = Store(node.tracking.uri, node.tracking.experiment)
    run_id = store.create_run(ctx.name, {"status": "FAILED", "failure_reason": f"invalid config: {error}",
                                         **{f"choice.{k}": v for k, v in ctx.choices.items()}},
                              parent_run_id(ctx.sweep_dir))
    store.finish(run_id, ok=False)
    return {}
