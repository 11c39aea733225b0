"""Short run names made of what defines a point (`llama2_7b fsdp2 tp2 seq4096 mbs2`), not the
override string (which stays a tag): whatever a sweep varies shows in each child's name."""

from __future__ import annotations

from parbench.config.batch import local_batch
from parbench.config.dims import MESH_DIMS, ParallelDims
from parbench.config.schema import Config

# Overrides the base label already shows (by value), or that do not define the experiment.
SHOWN = {"model", "parallel", "workload", "hardware", "workload.seq_len", "workload.batch_size", "workload.global_batch_size",
         "workload.input_len", "workload.output_len", "workload.engine", "hardware.gpus_per_node",
         *(f"parallel.{d}" for d in (*MESH_DIMS, "ep", "sp"))}
NOT_DEFINING = ("tracking.", "launch.", "hydra.", "dry_run", "debug.")
PLAIN_PARALLEL = "dp"  # the default parallel config: a single process under it is just `1 rank`
# Groups whose fields are named without the group (`steps=6`); others keep their key (`profile.enabled=false`).
SHORT_GROUPS = ("workload", "model", "parallel")


def point_label(choices: dict[str, str], override_dirname: str) -> str:
    """A point's name before its config is known valid (an invalid one, or a cluster job that died
    before it ran): its workload and Hydra's override_dirname."""
    label = override_dirname or f"parallel={choices.get('parallel')},model={choices.get('model')}"
    return f"{choices.get('workload', 'job')} {label}"


def layout_label(cfg: Config, dims: ParallelDims) -> str:
    """The degrees above 1 (`fsdp2 tp2`), sp, the DeepSpeed stage; `1 rank` for a single process,
    with the parallel config where it is not the plain one (`1 rank fsdp`): a sweep over
    parallel=dp,fsdp and hardware.gpus_per_node=1,2 has two single-process points."""
    parts = [f"{name}{size}" for name, size in dims.as_dict().items() if size > 1]
    if cfg.parallel.sp:
        parts.append("sp")
    if cfg.parallel.zero.stage is not None:
        parts.append(f"zero{cfg.parallel.zero.stage}")
    if not parts and cfg.parallel.name != PLAIN_PARALLEL:
        parts = ["1 rank", cfg.parallel.name]
    return " ".join(parts) or "1 rank"


def workload_label(cfg: Config, dims: ParallelDims) -> str:
    w = cfg.workload
    if w.name == "train":
        return f"seq{w.seq_len} mbs{local_batch(w, dims)}"
    if w.name == "inference":
        engine = "" if w.engine == "native" else f" {w.engine}"
        return f"inference{engine} in{w.input_len} out{w.output_len} bs{w.batch_size}"
    return w.name


def run_label(cfg: Config, dims: ParallelDims, overrides: list[str], uses_model: bool) -> str:
    """model, layout, workload, then every other override that defines the point: a workload, model
    or parallel field by its own name (`steps=6`), any other by its full key (`profile.enabled=false`)."""
    parts = [cfg.model.name] if uses_model else []
    parts += [layout_label(cfg, dims), workload_label(cfg, dims)]
    for override in overrides:
        key, _, value = override.lstrip("+~").partition("=")
        if key not in SHOWN and not key.startswith(NOT_DEFINING):
            parts.append(f"{short_key(key)}={value}")
    return " ".join(parts)


def short_key(key: str) -> str:
    group, _, field = key.partition(".")
    return field if group in SHORT_GROUPS and field else key
