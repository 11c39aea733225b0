"""One Hydra job, top to bottom: resolve the config -> validate it (each part checks itself) ->
plan -> launch torchrun -> record the outcome in MLflow. It never initialises CUDA, so it survives
whatever the workers do; it imports torch and mlflow only once the config is known to be valid,
so a config that cannot work is refused in about a second."""

from __future__ import annotations

import json
import sys
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from parbench.config import ConfigError, resolve
from parbench.config.dims import ParallelDims
from parbench.config.hardware import GpuInfo, detect_gpus
from parbench.config.schema import Config
from parbench.config.validate import validate_config
from parbench.fmt import format_metric, format_number
from parbench.launch.cluster import current_node, is_main_node
from parbench.launch.diagnose import memory_facts
from parbench.launch.interrupt import INTERRUPTS
from parbench.launch.torchrun import LaunchOutcome, run_torchrun, torchrun_command, worker_env
from parbench.models import MODEL_FAMILIES
from parbench.parallel.specs import STRATEGIES
from parbench.predict import is_training, predict, predictable
from parbench.predict.calibration import calibration_for
from parbench.predict.fit import fit_message
from parbench.predict.inference import predict_inference
from parbench.predict.params import param_counts
from parbench.tracking.labels import point_label, run_label
from parbench.tracking.reach import TrackingUnreachable, check_reachable
from parbench.workloads.registry import WORKLOADS, job_layout, plan_workload, typed_config


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


def validate(cfg: Config, gpus: list[GpuInfo] | None) -> ParallelDims:
    """The config groups config/ owns, the model family, the layout, then every strategy's and the
    workload's own checks; `gpus` are the local GPUs when launching here (None: planning only)."""
    validate_config(cfg, gpus)
    if cfg.model.family not in MODEL_FAMILIES:
        raise ConfigError(f"model.family={cfg.model.family!r} is unknown: use one of "
                          f"{', '.join(MODEL_FAMILIES.names())}")
    dims = ParallelDims.from_config(*job_layout(cfg))
    for name in STRATEGIES.names():
        STRATEGIES.get(name).validate(cfg, dims)
    WORKLOADS.get(cfg.workload.name).validate(cfg, dims)
    return dims


def make_plan(cfg: Config, dims: ParallelDims) -> dict:
    """What would run: layout, model size and the workload's own figures (dry_run prints it)."""
    spec = WORKLOADS.get(cfg.workload.name)
    model = {}
    if spec.uses_model:
        counts = param_counts(cfg.model)  # from the shapes: equal to a built model's (tests/predict)
        model = {"model": cfg.model.name, "params_total": counts.total, "params_active": counts.active,
                 "params_embedding": counts.embedding}
    return {
        "hardware": cfg.hardware.name, "device_type": cfg.hardware.device_type, "backend": cfg.hardware.backend,
        "nodes": cfg.hardware.nodes, "gpus_per_node": cfg.hardware.gpus_per_node,
        "world_size": dims.world_size, "mesh": dims.as_dict(), **model,
        "workload": cfg.workload.name, **plan_workload(spec, cfg, dims), **prediction_plan(cfg, dims),
    }


def prediction_plan(cfg: Config, dims: ParallelDims) -> dict:
    """The performance model's figures: a training config's step and memory and its fit check
    (each suggestion tried through the checks and the model before it is named); an inference
    config's TTFT and TPOT."""
    if not predictable(cfg):
        return {}
    try:
        cal = calibration_for(cfg.hardware, cfg.workload.dtype, cfg.calibration)
    except ConfigError as e:
        if cfg.calibration:  # the profile asked for is missing or unreadable
            raise
        return {"prediction_unavailable": str(e)}
    if not is_training(cfg):
        return {"prediction": predict_inference(cfg, dims, cal).as_dict()}
    p = predict(cfg, dims, cal)
    fit = fit_message(cfg, p, lambda c: validate(c, None), cal)
    return {"memory_estimate_per_device_gb": p.memory.as_dict(), "prediction": p.as_dict(), "fit": fit}


def prediction_lines(plan: dict) -> list[str]:
    """The prediction in words: step (and the fit check) for training, TTFT and TPOT for inference."""
    p = plan.get("prediction")
    if not p:
        return []
    if "predicted_ttft_s" in p:
        figures = (f"TTFT {format_metric('ttft_s', p['predicted_ttft_s'])}, "
                   f"TPOT {format_metric('tpot_s', p['predicted_tpot_s'])}, "
                   f"E2E {format_metric('e2e_s', p['predicted_e2e_s'])}, "
                   f"{format_number(p['predicted_output_tokens_per_s'])} output tok/s")
    else:
        figures = (f"step {format_metric('step_time_s', p['predicted_step_time_s'])}, "
                   f"{format_metric('tokens_per_s', p['predicted_tokens_per_s'])}")
    lines = [f"[parbench] predicted ({p['calibration']}): {figures}, bottleneck: {p['bottleneck']}"]
    return lines + ([f"[parbench] {plan['fit']}"] if "fit" in plan else [])


def print_plan(plan: dict) -> None:
    """dry_run: the prediction in words, then the whole plan as JSON."""
    for line in prediction_lines(plan):
        print(line, flush=True)
    print(json.dumps(plan, indent=2))


def run_job(node: DictConfig) -> dict:
    ctx = JobContext.from_hydra()
    INTERRUPTS.install()
    if INTERRUPTS.signal:  # the sweep was interrupted between two jobs
        from parbench.sweep import stop_sweep

        stop_sweep(ctx.sweep_dir)
    gpus = detect_gpus()
    try:
        cfg = resolve.resolve(typed_config(node), gpus)
        dims = validate(cfg, None if cfg.dry_run else gpus)
        ctx.name = cfg.tracking.run_name or run_label(cfg, dims, ctx.overrides,
                                                      WORKLOADS.get(cfg.workload.name).uses_model)
        plan = make_plan(cfg, dims)
    except ConfigError as e:
        return reject(e, node, ctx)
    if cfg.dry_run:
        print_plan(plan)
        return plan
    if not ctx.multirun:  # a sweep checked its store before it started
        try:
            check_reachable(cfg.tracking.uri)
        except TrackingUnreachable as e:
            print(f"parbench: {e}", file=sys.stderr, flush=True)
            sys.exit(2)
    return launch(cfg, plan, ctx)


def launch(cfg: Config, plan: dict, ctx: JobContext) -> dict:
    from parbench.sweep import parent_run_id, stop_sweep
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
    if job.run is not None and cfg.hardware.device_type == "cuda":
        record_topology(job.run, ctx.job_dir)
    print(f"[parbench] {ctx.name}: {plan['world_size']} ranks on {cfg.hardware.name} "
          f"({cfg.hardware.backend}), job dir {ctx.job_dir}", flush=True)
    log_name = LOG_FILE if node.is_main else f"worker.node{node.rank}.log"
    nproc = job_layout(cfg)[1] // cfg.hardware.nodes
    with system_metrics(job.run.run_id, job.run.store.uri, cfg.tracking) if job.run is not None else nullcontext():
        outcome = run_torchrun(torchrun_command(cfg, node, ctx.job_dir, nproc), worker_env(cfg),
                               ctx.job_dir / log_name, cfg.launch.timeout_s, cfg.launch.log_tail_lines,
                               cfg.launch.stall_timeout_s, memory_facts(cfg, plan))
    if not node.is_main:
        return {}
    metrics = job.finish(outcome, plan.get("prediction"))
    report(cfg, ctx, job.run, outcome, metrics)
    if INTERRUPTS.signal:
        stop_sweep(ctx.sweep_dir)
    if not outcome.ok and not ctx.multirun:
        sys.exit(1)
    return metrics


def record_topology(run, job_dir: Path) -> None:
    """GPU names, links and driver/CUDA/NCCL versions as tags and topology.json, before launch,
    so a run that crashes still has them."""
    from parbench.workloads.microbench.topology import collect_topology, topology_tags, write_topology

    found = collect_topology()
    run.attach(topology_tags(found), write_topology(found, job_dir))


def report(cfg: Config, ctx: JobContext, run, outcome: LaunchOutcome, metrics: dict) -> None:
    from parbench.report.summary import metrics_table

    status = outcome.status if outcome.ok else f"{outcome.status}: {outcome.reason}"
    keys = WORKLOADS.get(cfg.workload.name).summary_metrics
    table = metrics_table(metrics, keys)
    print(f"\n== {ctx.name}: {status}" + (f"\n{table}" if table else ""))
    where = run.store.where_to_look(run.run_id) if run is not None else f"not in MLflow yet: parbench sync {ctx.job_dir}"
    print(f"Job dir: {ctx.job_dir}\n{where}\n", flush=True)


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
