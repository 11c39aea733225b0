"""The workload registry: `workload.name` -> its spec (schema, checks, plan; specs/ defines them without
torch) and the code its ranks run; job_layout and typed_config for whoever launches one."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from parbench.config import ConfigError, resolve
from parbench.config.schema import Config, ParallelConfig
from parbench.dtypes import DTYPE_NAMES, GROUPED_DTYPE, resolve_dtype
from parbench.registry import Registry, load_plugins, load_ref


@dataclass(frozen=True)
class WorkloadSpec:
    schema: type  # dataclass of the workload's fields
    run: str  # "module:function" (cfg, env, reporter) -> results, loaded on every rank
    validate: Callable[..., None] = lambda cfg, dims: None  # raise ConfigError
    # (cfg, dims) -> figures for dry_run and the run's params; without torch: the orchestrator plans every point
    plan: Callable[..., dict] | None = None
    summary_metrics: tuple[str, ...] = ()  # rows of the end-of-run table; `*` matches one name segment
    uses_model: bool = True  # False: microbenchmarks, which ignore model (the plan leaves it out)
    # The degrees parbench's own torchrun job spans, when not cfg.parallel over every device:
    # all explicit, their product is the number of ranks launched (see job_layout).
    job_parallel: Callable[[Config], ParallelConfig] | None = None
    # False: the workload's engine manages torch.distributed itself (vLLM): the worker runs it in
    # a single process that joins no process group.
    joins_process_group: Callable[[Config], bool] = lambda cfg: True


class VerificationError(RuntimeError):
    """A workload's own check of its results failed (e.g. wrong collective outputs)."""


WORKLOADS: Registry[WorkloadSpec] = Registry("workload", "workload")


def check_fields(w: Any, positive: tuple[str, ...], non_negative: tuple[str, ...] = ()) -> None:
    """Refuse workload sizes and a dtype that cannot work, naming the setting to change."""
    for name in positive:
        if getattr(w, name) <= 0:
            raise ConfigError(f"workload.{name}={getattr(w, name)} must be positive")
    for name in non_negative:
        if getattr(w, name) < 0:
            raise ConfigError(f"workload.{name}={getattr(w, name)} must be >= 0")
    if w.dtype not in DTYPE_NAMES:
        raise ConfigError(f"workload.dtype={w.dtype!r}: use auto or one of {', '.join(DTYPE_NAMES)}")


def parse_workload(raw: dict) -> Any:
    """Type-check the workload node against its registered schema."""
    if "name" not in raw:
        raise ConfigError("workload.name is missing: choose a workload, e.g. workload=train")
    try:
        spec = WORKLOADS.get(raw["name"])
    except KeyError as e:
        raise ConfigError(str(e.args[0])) from None
    try:
        return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(spec.schema), raw))
    except OmegaConfBaseException as e:
        raise ConfigError(f"workload={raw['name']}: {e}".splitlines()[0]) from None


def typed_config(node: Any) -> Config:
    """The config tree type-checked against the schema, its workload against the workload's own
    (after importing the user's plugins, which may register that workload)."""
    try:
        load_plugins(list(node.get("plugins") or []))
    except ImportError as e:
        raise ConfigError(f"plugins: {e}; put the module's folder on PYTHONPATH (torchrun's ranks inherit it)") from None
    cfg = resolve.to_typed(node)
    cfg.workload = parse_workload(cfg.workload)
    return cfg


def load_config(path: Path) -> Config:
    return typed_config(OmegaConf.load(path))


def job_layout(cfg: Config) -> tuple[ParallelConfig, int]:
    """The parallel degrees of the torchrun job and its world size: cfg.parallel over every device
    of the hardware, unless the workload sets its own (inference: tp*pp ranks; vLLM: one process)."""
    spec = WORKLOADS.get(cfg.workload.name)
    devices = cfg.hardware.nodes * cfg.hardware.gpus_per_node
    if spec.job_parallel is None:
        return cfg.parallel, devices
    parallel = spec.job_parallel(cfg)
    world = parallel.pp * parallel.dp * parallel.fsdp * parallel.cp * parallel.tp
    if world > devices or world % cfg.hardware.nodes:
        raise ConfigError(f"workload={cfg.workload.name} needs {world} ranks and the hardware has {devices} "
                          f"device(s) on {cfg.hardware.nodes} node(s): raise hardware.gpus_per_node, "
                          "or lower the parallel degrees")
    return parallel, world


def all_ones(parallel: ParallelConfig) -> ParallelConfig:
    """The same config with every degree 1: a single-process job."""
    return replace(parallel, dp=1, fsdp=1, tp=1, pp=1, cp=1, ep=1, sp=False)


def run_workload(spec: WorkloadSpec, cfg: Config, env: Any, reporter: Any) -> dict:
    return load_ref(spec.run)(cfg, env, reporter)


def plan_workload(spec: WorkloadSpec, cfg: Config, dims: Any) -> dict:
    return spec.plan(cfg, dims) if spec.plan else {}


def moe_host_read(cfg: Config) -> str | None:
    """What an MoE's dispatch (models/moe.py) reads from the routing on the host, which neither a CUDA graph nor a
    full-graph compile holds, or None: dropless and in bf16 its experts run as grouped GEMMs, offsets on the device."""
    if cfg.model.capacity_factor > 0:
        return (f"capacity-limited MoE routing: the capacity limit (model.capacity_factor={cfg.model.capacity_factor}) "
                "drops tokens by a mask whose length the host reads (model.capacity_factor=0 routes dropless)")
    dtype = resolve_dtype(cfg.workload.dtype, cfg.hardware.device_type)
    return None if dtype == GROUPED_DTYPE else (f"in {dtype} the experts run one GEMM each, sized on the host (grouped_mm's "
                                         "kernel takes bf16: set workload.dtype=bf16)")
