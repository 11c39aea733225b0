"""Checks that run before anything is launched; each error names the setting to change."""

from __future__ import annotations

from parbench.config import ConfigError
from parbench.config.hardware import GpuInfo
from parbench.config.schema import Config, HardwareConfig, ModelConfig
from parbench.models import MODEL_FAMILIES
from parbench.parallel.dims import ParallelDims
from parbench.workloads import WORKLOADS, job_layout

PP_SCHEDULES = ("gpipe", "1f1b", "interleaved_1f1b", "zero_bubble")


def validate(cfg: Config, gpus: list[GpuInfo] | None) -> ParallelDims:
    """Validate the whole config; `gpus` are the local GPUs when launching here (None: planning only)."""
    validate_model(cfg.model)
    validate_hardware(cfg.hardware, gpus)
    dims = ParallelDims.from_config(*job_layout(cfg))
    validate_layout(cfg, dims)
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
    stages = dims.pp * p.pp_stages_per_rank
    if m.layers % stages:
        raise ConfigError(f"model.layers={m.layers} is not divisible by the {stages} pipeline stages "
                          f"(parallel.pp={dims.pp} x parallel.pp_stages_per_rank={p.pp_stages_per_rank})")
    if p.pp_schedule not in PP_SCHEDULES:
        raise ConfigError(f"parallel.pp_schedule={p.pp_schedule!r}: use one of {', '.join(PP_SCHEDULES)}")
    if p.pp_microbatches <= 0:
        raise ConfigError(f"parallel.pp_microbatches={p.pp_microbatches} must be positive")
    if dims.ep > 1 and not m.experts:
        raise ConfigError(f"parallel.ep={dims.ep} needs an MoE model (model.experts > 0), "
                          f"and model={m.name} is dense: choose e.g. model=tiny_moe")
    if m.experts and m.experts % dims.ep:
        raise ConfigError(f"model.experts={m.experts} is not divisible by parallel.ep={dims.ep}")
    if p.sp and dims.tp == 1:
        raise ConfigError("parallel.sp=true needs parallel.tp > 1 (sequence parallel splits tp's norm regions)")
    dtype = getattr(cfg.workload, "dtype", None)
    if dtype and dtype not in cfg.hardware.peak_tflops:
        raise ConfigError(f"hardware={cfg.hardware.name} has no {dtype} peak for MFU: set "
                          f"hardware.peak_tflops.{dtype}=<dense TFLOP/s per device> or choose another workload.dtype")
