"""Checks of the config groups the config layer owns (model, hardware, profile, stats) before
anything is launched; strategies and workloads check their own parts (their registry entries'
`validate`). Each error names the setting to change."""

from __future__ import annotations

from parbench.config import ConfigError
from parbench.config.hardware import GpuInfo
from parbench.config.schema import CI_METHODS, KEEP_TRACES, Config, HardwareConfig, ModelConfig


def validate_config(cfg: Config, gpus: list[GpuInfo] | None) -> None:
    """`gpus` are the local GPUs when launching here (None: planning only)."""
    validate_model(cfg.model)
    validate_hardware(cfg.hardware, gpus)
    validate_measurement(cfg)
    validate_launch(cfg)


def validate_model(m: ModelConfig) -> None:
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


def validate_measurement(cfg: Config) -> None:
    """profile.* (a window of at least one traced step after the measured ones) and stats.*."""
    p, s = cfg.profile, cfg.stats
    if p.wait < 0 or p.warmup < 0 or p.active_steps < 1:
        raise ConfigError(f"profile.wait={p.wait} and profile.warmup={p.warmup} must be >= 0 and "
                          f"profile.active_steps={p.active_steps} >= 1 (or set profile.enabled=false)")
    if p.keep_traces not in KEEP_TRACES:
        raise ConfigError(f"profile.keep_traces={p.keep_traces!r}: use one of {', '.join(KEEP_TRACES)}")
    if not 0 < s.confidence < 1:
        raise ConfigError(f"stats.confidence={s.confidence} must be between 0 and 1 (e.g. 0.95)")
    if s.ci_method not in CI_METHODS:
        raise ConfigError(f"stats.ci_method={s.ci_method!r}: use one of {', '.join(CI_METHODS)}")
    if s.bootstrap_resamples < 100:
        raise ConfigError(f"stats.bootstrap_resamples={s.bootstrap_resamples}: use at least 100")


def validate_launch(cfg: Config) -> None:
    """launch.*: 0 turns a limit off; a negative one is a typo."""
    for name in ("timeout_s", "stall_timeout_s"):
        value = getattr(cfg.launch, name)
        if value < 0:
            raise ConfigError(f"launch.{name}={value} must be >= 0 seconds (0 turns this limit off)")
