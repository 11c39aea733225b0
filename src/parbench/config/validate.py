"""Checks that run before anything is launched; each error names the setting to change."""

from __future__ import annotations

from parbench.config import ConfigError
from parbench.config.hardware import GpuInfo
from parbench.config.schema import Config, HardwareConfig, ModelConfig
from parbench.metrics import profile
from parbench.metrics.timing import CI_METHODS
from parbench.models import MODEL_FAMILIES
from parbench.parallel.cp import CP_ROTATE_METHODS
from parbench.parallel.dims import ParallelDims
from parbench.parallel import zero
from parbench.parallel.pp import MULTI_STAGE_SCHEDULES, SCHEDULES
from parbench.workloads import WORKLOADS, job_layout


def validate(cfg: Config, gpus: list[GpuInfo] | None) -> ParallelDims:
    """Validate the whole config; `gpus` are the local GPUs when launching here (None: planning only)."""
    validate_model(cfg.model)
    validate_hardware(cfg.hardware, gpus)
    dims = ParallelDims.from_config(*job_layout(cfg))
    validate_layout(cfg, dims)
    zero.validate(cfg, dims)  # DeepSpeed: installed, and a layout its engine runs
    validate_measurement(cfg)
    WORKLOADS.get(cfg.workload.name).validate(cfg, dims)
    return dims


def validate_model(m: ModelConfig) -> None:
    if m.family not in MODEL_FAMILIES:
        raise ConfigError(f"model.family={m.family!r} is unknown: use one of {', '.join(MODEL_FAMILIES.names())}")
    for name in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "max_seq_len"):
        if getattr(m, name) <= 0:
            raise ConfigError(f"model.{name}={getattr(m, name)} must be positive")
    if m.heads % m.kv_heads:
        raise ConfigError(f"model.heads={m.heads} is not a multiple of model.kv_heads={m.kv_heads}")
    if m.head_dim is None and m.hidden % m.heads:
        raise ConfigError(f"model.hidden={m.hidden} is not divisible by model.heads={m.heads}: set model.head_dim")
    if m.experts < 0 or (m.experts and not 0 < m.top_k <= m.experts):
        raise ConfigError(f"model.top_k={m.top_k} must be in 1..model.experts={m.experts} for an MoE model")


def validate_hardware(hw: HardwareConfig, gpus: list[GpuInfo] | None) -> None:
    if hw.nodes <= 0 or hw.gpus_per_node <= 0:
        raise ConfigError(f"hardware.nodes={hw.nodes} and hardware.gpus_per_node={hw.gpus_per_node} must be positive")
    if hw.device_type not in ("cuda", "cpu"):
        raise ConfigError(f"hardware.device_type={hw.device_type!r}: use cuda or cpu")
    if hw.device_type == "cpu" and hw.backend != "gloo":
        raise ConfigError(f"hardware.backend={hw.backend!r} cannot run on CPU: use hardware.backend=gloo")
    if gpus is None or hw.device_type != "cuda":
        return
    if not gpus:
        raise ConfigError(f"hardware={hw.name} needs NVIDIA GPUs and none are visible here: "
                          "use hardware=cpu (or hardware=auto), or run where the GPUs are")
    if hw.gpus_per_node > len(gpus):
        raise ConfigError(f"hardware.gpus_per_node={hw.gpus_per_node} but this node has {len(gpus)} GPU(s): "
                          f"set hardware.gpus_per_node<={len(gpus)}")


def validate_layout(cfg: Config, dims: ParallelDims) -> None:
    m, p = cfg.model, cfg.parallel
    if m.heads % dims.tp or m.kv_heads % dims.tp:
        raise ConfigError(f"parallel.tp={dims.tp} must divide model.heads={m.heads} and "
                          f"model.kv_heads={m.kv_heads}: pick a tp among the common divisors")
    validate_pipeline(cfg, dims)
    if dims.ep > 1 and not m.experts:
        raise ConfigError(f"parallel.ep={dims.ep} needs an MoE model (model.experts > 0), "
                          f"and model={m.name} is dense: choose e.g. model=tiny_moe")
    if m.experts and m.experts % dims.ep:
        raise ConfigError(f"model.experts={m.experts} is not divisible by parallel.ep={dims.ep}")
    if dims.ep > 1 and dims.fsdp == 1:
        raise ConfigError(f"parallel.ep={dims.ep} shards the experts' data parallelism with FSDP2, and "
                          f"parallel.fsdp=1 (DDP would average different experts together): "
                          "set parallel.fsdp=-1 parallel.dp=1 (or any fsdp > 1)")
    if p.sp and dims.tp == 1:
        raise ConfigError("parallel.sp=true needs parallel.tp > 1 (sequence parallel splits tp's norm regions)")
    if dims.tp > 1 and not m.experts and m.ffn % dims.tp:
        raise ConfigError(f"model.ffn={m.ffn} is not divisible by parallel.tp={dims.tp}: tensor parallel splits "
                          "the MLP's inner dimension evenly; pick a tp that divides it")
    if p.cp_rotate not in CP_ROTATE_METHODS:
        raise ConfigError(f"parallel.cp_rotate={p.cp_rotate!r}: use one of {', '.join(CP_ROTATE_METHODS)}")
    if dims.cp > 1 and cfg.hardware.device_type != "cuda" and p.cp_rotate != "allgather":
        raise ConfigError(f"parallel.cp_rotate={p.cp_rotate} needs CUDA (torch's context_parallel); on "
                          f"{cfg.hardware.device_type} context parallel all-gathers K/V: use parallel.cp_rotate=allgather")


def validate_measurement(cfg: Config) -> None:
    """profile.* (its own module's checks) and stats.*."""
    profile.validate(cfg)
    s = cfg.stats
    if not 0 < s.confidence < 1:
        raise ConfigError(f"stats.confidence={s.confidence} must be between 0 and 1 (e.g. 0.95)")
    if s.ci_method not in CI_METHODS:
        raise ConfigError(f"stats.ci_method={s.ci_method!r}: use one of {', '.join(CI_METHODS)}")
    if s.bootstrap_resamples < 100:
        raise ConfigError(f"stats.bootstrap_resamples={s.bootstrap_resamples}: use at least 100")


def validate_pipeline(cfg: Config, dims: ParallelDims) -> None:
    """What torch.distributed.pipelining's schedules accept, checked before launch."""
    m, p = cfg.model, cfg.parallel
    if p.pp_schedule not in SCHEDULES:
        raise ConfigError(f"parallel.pp_schedule={p.pp_schedule!r}: use one of {', '.join(SCHEDULES)}")
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
