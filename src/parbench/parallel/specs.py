"""The strategies as the orchestrator sees them, without loading torch: when each applies, in which
order, what it checks in a config, and where its code is (`apply`, loaded on the ranks).

Order fixes composition: the pp split first, then strategies that rewrite modules (tp,
activation checkpointing, ep, compile), then the dp/fsdp/DeepSpeed wrappers, each applied to
every part. To add a strategy: a module with `apply(pmodel, env, cfg) -> pmodel`, one entry in
the table at the bottom, and a YAML in conf/parallel/ (docs/contributing.md)."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Callable

from parbench.config import ConfigError
from parbench.config.dims import ParallelDims
from parbench.config.schema import Config
from parbench.registry import Registry

PP_SCHEDULES = ("gpipe", "1f1b", "interleaved_1f1b", "zero_bubble")
MULTI_STAGE_SCHEDULES = ("interleaved_1f1b", "zero_bubble")
CP_ROTATE_METHODS = ("allgather", "alltoall")
ZERO_STAGES = (0, 1, 2, 3)
ZERO_OPTIMIZERS = ("adamw", "sgd")
DEEPSPEED_INSTALL_HINT = "pip install -e '.[deepspeed]'"


@dataclass(frozen=True)
class Strategy:
    order: int
    enabled: Callable[[ParallelDims, Config], bool]
    apply: str  # "module:function" (pmodel, env, cfg) -> pmodel, loaded on the ranks
    validate: Callable[[Config, ParallelDims], None] = lambda cfg, dims: None  # raise ConfigError


STRATEGIES: Registry[Strategy] = Registry("parallel strategy", "parallel")


def deepspeed_installed() -> bool:
    return importlib.util.find_spec("deepspeed") is not None


def require_deepspeed(what: str) -> None:
    """Refuse, before anything is launched, a config that needs DeepSpeed where it is not installed."""
    if not deepspeed_installed():
        raise ConfigError(f"{what} needs DeepSpeed, which is not installed here: {DEEPSPEED_INSTALL_HINT} "
                          "(or pip install deepspeed), or choose a torch-native strategy such as parallel=fsdp")


def validate_tp(cfg: Config, dims: ParallelDims) -> None:
    m = cfg.model
    if m.heads % dims.tp or m.kv_heads % dims.tp:
        raise ConfigError(f"parallel.tp={dims.tp} must divide model.heads={m.heads} and "
                          f"model.kv_heads={m.kv_heads}: pick a tp among the common divisors")
    if cfg.parallel.sp and dims.tp == 1:
        raise ConfigError("parallel.sp=true needs parallel.tp > 1 (sequence parallel splits tp's norm regions)")
    if dims.tp > 1 and not m.experts and m.ffn % dims.tp:
        raise ConfigError(f"model.ffn={m.ffn} is not divisible by parallel.tp={dims.tp}: tensor parallel splits "
                          "the MLP's inner dimension evenly; pick a tp that divides it")


def validate_ep(cfg: Config, dims: ParallelDims) -> None:
    m = cfg.model
    if dims.ep > 1 and not m.experts:
        raise ConfigError(f"parallel.ep={dims.ep} needs an MoE model (model.experts > 0), "
                          f"and model={m.name} is dense: choose e.g. model=tiny_moe")
    if m.experts and m.experts % dims.ep:
        raise ConfigError(f"model.experts={m.experts} is not divisible by parallel.ep={dims.ep}")
    if dims.ep > 1 and dims.fsdp == 1:
        raise ConfigError(f"parallel.ep={dims.ep} shards the experts' data parallelism with FSDP2, and "
                          f"parallel.fsdp=1 (DDP would average different experts together): "
                          "set parallel.fsdp=-1 parallel.dp=1 (or any fsdp > 1)")


def validate_cp(cfg: Config, dims: ParallelDims) -> None:
    p, window, seq = cfg.parallel, cfg.model.sliding_window, getattr(cfg.workload, "seq_len", 0)
    if dims.cp > 1 and window and window < seq:
        raise ConfigError(f"parallel.cp={dims.cp} splits the sequence for full causal attention, and "
                          f"model.sliding_window={window} is shorter than workload.seq_len={seq}: "
                          f"set parallel.cp=1, or workload.seq_len<={window}")
    if p.cp_rotate not in CP_ROTATE_METHODS:
        raise ConfigError(f"parallel.cp_rotate={p.cp_rotate!r}: use one of {', '.join(CP_ROTATE_METHODS)}")
    if dims.cp > 1 and cfg.hardware.device_type != "cuda" and p.cp_rotate != "allgather":
        raise ConfigError(f"parallel.cp_rotate={p.cp_rotate} needs CUDA (torch's context_parallel); on "
                          f"{cfg.hardware.device_type} context parallel all-gathers K/V: use parallel.cp_rotate=allgather")


def validate_pp(cfg: Config, dims: ParallelDims) -> None:
    """What torch.distributed.pipelining's schedules accept, checked before launch."""
    m, p = cfg.model, cfg.parallel
    if p.pp_schedule not in PP_SCHEDULES:
        raise ConfigError(f"parallel.pp_schedule={p.pp_schedule!r}: use one of {', '.join(PP_SCHEDULES)}")
    if p.pp_microbatches <= 0 or p.pp_stages_per_rank <= 0:
        raise ConfigError(f"parallel.pp_microbatches={p.pp_microbatches} and parallel.pp_stages_per_rank="
                          f"{p.pp_stages_per_rank} must be positive")
    stages = dims.pp * p.pp_stages_per_rank
    if m.layers % stages:
        raise ConfigError(f"model.layers={m.layers} is not divisible by the {stages} pipeline stages "
                          f"(parallel.pp={dims.pp} x parallel.pp_stages_per_rank={p.pp_stages_per_rank})")
    if dims.pp == 1:
        return
    if m.tie_embeddings:
        raise ConfigError(f"model.tie_embeddings=true ties the first stage's embedding to the last stage's "
                          f"output head, which pipeline parallel (parallel.pp={dims.pp}) puts on other ranks: "
                          "set model.tie_embeddings=false")
    if p.pp_schedule not in MULTI_STAGE_SCHEDULES and p.pp_stages_per_rank > 1:
        raise ConfigError(f"parallel.pp_schedule={p.pp_schedule} runs one stage per rank: set "
                          f"parallel.pp_stages_per_rank=1 or use {' or '.join(MULTI_STAGE_SCHEDULES)}")
    if p.pp_schedule == "interleaved_1f1b" and p.pp_stages_per_rank < 2:
        raise ConfigError("parallel.pp_schedule=interleaved_1f1b interleaves several stages per rank: "
                          "set parallel.pp_stages_per_rank>=2 (or use pp_schedule=1f1b)")
    if p.pp_schedule == "1f1b" and p.pp_microbatches < dims.pp:
        raise ConfigError(f"parallel.pp_schedule=1f1b needs parallel.pp_microbatches >= parallel.pp={dims.pp} "
                          f"(got {p.pp_microbatches}): raise pp_microbatches")
    rounds = max(1, p.pp_microbatches // dims.pp)
    if p.pp_schedule in MULTI_STAGE_SCHEDULES and p.pp_microbatches % rounds:
        raise ConfigError(f"parallel.pp_schedule={p.pp_schedule} runs microbatches in rounds of parallel.pp="
                          f"{dims.pp}: parallel.pp_microbatches={p.pp_microbatches} must be a multiple of "
                          f"{rounds} (e.g. {rounds * dims.pp})")


def theoretical_bubble(schedule: str, pp: int, microbatches: int, stages_per_rank: int) -> float:
    """Idle fraction of an ideal pipeline with equal stage times: (p-1)/(v*m+p-1), v=1 for gpipe/1f1b.
    zero_bubble splits backward into input (B) and weight (W) passes that fill the warm-up and
    cool-down; with F=B=W the remaining bubble is (p-1)/(3*v*m+p-1) (ZB-H1, Qi et al. 2024)."""
    v = stages_per_rank if schedule in MULTI_STAGE_SCHEDULES else 1
    work = v * microbatches * (3 if schedule == "zero_bubble" else 1)
    return (pp - 1) / (work + pp - 1)


def validate_zero(cfg: Config, dims: ParallelDims) -> None:
    """What the DeepSpeed engine supports as parbench wires it: data parallel over every rank."""
    z, name = cfg.parallel.zero, f"parallel={cfg.parallel.name}"
    if z.stage is None:
        return
    require_deepspeed(name)
    if z.stage not in ZERO_STAGES:
        raise ConfigError(f"parallel.zero.stage={z.stage}: use one of {', '.join(map(str, ZERO_STAGES))} "
                          "(or null for the torch-native strategies)")
    others = {k: v for k, v in dims.as_dict().items() if k != "dp" and v != 1}
    if others:
        raise ConfigError(f"{name} shards over every rank as data parallel, and the layout also has "
                          f"{', '.join(f'parallel.{k}={v}' for k, v in others.items())}: set those to 1 "
                          "(parallel.dp=-1), or use the torch-native strategies for 2D/3D layouts")
    if z.offload_param and z.stage != 3:
        raise ConfigError(f"parallel.zero.offload_param=true needs parallel.zero.stage=3 (got {z.stage}): "
                          "only ZeRO-3 partitions parameters; use parallel=zero3_offload")
    if z.offload_optimizer and z.stage == 0:
        raise ConfigError("parallel.zero.offload_optimizer=true needs parallel.zero.stage>=1 "
                          "(stage 0 keeps no partitioned optimizer to offload)")
    if z.communication_data_type not in (None, "fp32", "bf16", "fp16"):
        raise ConfigError(f"parallel.zero.communication_data_type={z.communication_data_type!r}: "
                          "use null, fp32, bf16 or fp16")
    w = cfg.workload
    if w.name != "train":
        raise ConfigError(f"{name} applies to workload=train (got workload={w.name}): use another parallel "
                          "layout, e.g. parallel=dp")
    if w.optimizer not in ZERO_OPTIMIZERS:
        raise ConfigError(f"workload.optimizer={w.optimizer!r} with {name}: use one of {', '.join(ZERO_OPTIMIZERS)}")
    if w.compile:
        raise ConfigError(f"workload.compile=true with {name}: DeepSpeed compiles through its own "
                          "engine.compile(), which parbench does not drive; set workload.compile=false")
    if w.init == "meta":
        raise ConfigError(f"workload.init=meta with {name}: deepspeed.initialize partitions materialised "
                          "weights; use workload.init=auto (or full)")


def fsdp_enabled(dims: ParallelDims, cfg: Config) -> bool:
    # DDP cannot hold DTensor parameters: under tp, dp (and cp) replicas go through FSDP2 too, as
    # HSDP whose shard groups may have one rank (torchtitan makes the same choice).
    return dims.fsdp > 1 or (dims.tp > 1 and dims.dp * dims.cp > 1)


def zero_enabled(dims: ParallelDims, cfg: Config) -> bool:
    return cfg.parallel.zero.stage is not None


def dp_enabled(dims: ParallelDims, cfg: Config) -> bool:
    # Context-parallel ranks hold the same parameters too: their gradients are averaged as well.
    # Where FSDP2 or the DeepSpeed engine runs, that does it instead.
    return dims.dp * dims.cp > 1 and not fsdp_enabled(dims, cfg) and not zero_enabled(dims, cfg)


def ep_enabled(dims: ParallelDims, cfg: Config) -> bool:
    return bool(cfg.model.experts) and dims.dp * dims.fsdp * dims.cp > 1


def _code(module: str) -> str:
    return f"parbench.parallel.{module}:apply"


STRATEGIES.register("pp")(Strategy(5, lambda dims, cfg: dims.pp > 1, _code("pp"), validate_pp))
STRATEGIES.register("tp")(Strategy(10, lambda dims, cfg: dims.tp > 1, _code("tp"), validate_tp))
STRATEGIES.register("cp")(Strategy(20, lambda dims, cfg: dims.cp > 1, _code("cp"), validate_cp))
STRATEGIES.register("activation_checkpointing")(Strategy(
    40, lambda dims, cfg: getattr(cfg.workload, "activation_checkpointing", "none") != "none",
    _code("activation_checkpoint")))
STRATEGIES.register("ep")(Strategy(45, ep_enabled, _code("ep"), validate_ep))
STRATEGIES.register("compile")(Strategy(
    45, lambda dims, cfg: bool(getattr(cfg.workload, "compile", False)), _code("compile")))
STRATEGIES.register("dp")(Strategy(50, dp_enabled, _code("dp")))
STRATEGIES.register("fsdp")(Strategy(60, fsdp_enabled, _code("fsdp")))
STRATEGIES.register("zero")(Strategy(70, zero_enabled, _code("zero"), validate_zero))
