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
from parbench.launch.cluster import current_node, is_main_node
from parbench.launch.torchrun import run_torchrun, torchrun_command, worker_env
from parbench.models import MODEL_FAMILIES
from parbench.parallel.specs import STRATEGIES
from parbench.tracking.labels import point_label, run_label
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
    from parbench.models.build import build_model, count_params  # torch: only for a valid config

    spec = WORKLOADS.get(cfg.workload.name)
    model = {}
    if spec.uses_model:
        counts = count_params(build_model(cfg.model, "meta"), cfg.model)
        model = {"model": cfg.model.name, "params_total": counts.total, "params_active": counts.active,
                 "params_embedding": counts.embedding}
    return {
        "hardware": cfg.hardware.name, "device_type": cfg.hardware.device_type, "backend": cfg.hardware.backend,
        "nodes": cfg.hardware.nodes, "gpus_per_node": cfg.hardware.gpus_per_node,
        "world_size": dims.world_size, "mesh": dims.as_dict(), **model,
        "workload": cfg.workload.name, **plan_workload(spec, cfg, dims),
    }


def run_job(node: DictConfig) -> dict:
    ctx = JobContext.from_hydra()
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
        print(json.dumps(plan, indent=2))
        return plan
    return launch(cfg, plan, ctx)


def launch(cfg: Config, plan: dict, ctx: JobContext) -> dict:
    from parbench.tracking.job import LOG_FILE, JobRun  # mlflow: only once there is a run to record
    from parbench.sweep import parent_run_id
    from parbench.tracking.system_metrics import system_metrics  # psutil, NVML: only once a job launches

    node = current_node(cfg.hardware.nodes, cfg.launch.master_port)
    resolve.save(cfg, ctx.job_dir / resolve.RESOLVED_FILE)
    parent = parent_run_id(ctx.sweep_dir) if ctx.sweep_dir else None
    run = JobRun.start(cfg, plan, ctx.name, ctx.choices, ctx.overrides, parent, ctx.job_dir) if node.is_main else None
    if run is not None:
        run.attach(node.tags(), [])  # SLURM job id and rendezvous: how the sweep finds this run
    if run is not None and cfg.hardware.device_type == "cuda":
        record_topology(run, ctx.job_dir)
    print(f"[parbench] {ctx.name}: {plan['world_size']} ranks on {cfg.hardware.name} "
          f"({cfg.hardware.backend}), job dir {ctx.job_dir}", flush=True)
    log_name = LOG_FILE if node.is_main else f"worker.node{node.rank}.log"
    nproc = job_layout(cfg)[1] // cfg.hardware.nodes
    with system_metrics(run.run_id, run.store.uri, cfg.tracking) if run is not None else nullcontext():
        outcome = run_torchrun(torchrun_command(cfg, node, ctx.job_dir, nproc), worker_env(cfg, nproc),
                               ctx.job_dir / log_name, cfg.launch.timeout_s, cfg.launch.log_tail_lines)
    if run is None:
        return {}
    metrics = run.finish(outcome, ctx.job_dir)
    report(cfg, ctx, run, outcome.ok, outcome.reason, metrics)
    if not outcome.ok and not ctx.multirun:
        sys.exit(1)
    return metrics


def record_topology(run, job_dir: Path) -> None:
    """GPU names, links and driver/CUDA/NCCL versions as tags and topology.json, before launch,
    so a run that crashes still has them."""
    from parbench.workloads.microbench.topology import collect_topology, topology_tags, write_topology

    found = collect_topology()
    run.attach(topology_tags(found), write_topology(found, job_dir))


def report(cfg: Config, ctx: JobContext, run, ok: bool, reason: str, metrics: dict) -> None:
    from parbench.report.summary import metrics_table

    status = "FINISHED" if ok else f"FAILED: {reason}"
    keys = WORKLOADS.get(cfg.workload.name).summary_metrics
    table = metrics_table(metrics, keys)
    print(f"\n== {ctx.name}: {status}" + (f"\n{table}" if table else ""))
    print(f"Job dir: {ctx.job_dir}\n{run.store.where_to_look(run.run_id)}\n", flush=True)


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
