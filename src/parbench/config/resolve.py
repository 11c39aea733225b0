"""From a composed config to the typed, fully resolved Config a job runs with, and back to YAML."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from parbench.config import ConfigError
from parbench.config.hardware import GpuInfo, resolve_hardware
from parbench.config.schema import Config, ModelConfig
from parbench.dtypes import resolve_dtype

RESOLVED_FILE = "resolved.yaml"


def to_typed(node: DictConfig | dict) -> Config:
    """Type-check a config tree against the schema; the workload stays a dict, which its own schema
    types (parbench.workloads.typed_config)."""
    try:
        return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(Config), node))
    except OmegaConfBaseException as e:
        raise ConfigError(str(e).splitlines()[0]) from None


def resolve(cfg: Config, gpus: list[GpuInfo]) -> Config:
    """The typed config with hardware=auto, gpus_per_node=-1, dtype=auto and an unset seq_len made concrete."""
    cfg.hardware = resolve_hardware(cfg.hardware, gpus)
    if getattr(cfg.workload, "seq_len", 0) is None:
        cfg.workload.seq_len = default_seq_len(cfg.model)
    if hasattr(cfg.workload, "dtype"):
        cfg.workload.dtype = resolve_dtype(cfg.workload.dtype, cfg.hardware.device_type)
    return cfg


def default_seq_len(model: ModelConfig) -> int:
    """The preset's training sequence length, else the model's context up to 4096 tokens."""
    return model.default_seq_len or min(model.max_seq_len, 4096)


def as_dict(cfg: Config) -> dict[str, Any]:
    return dataclasses.asdict(cfg)


def save(cfg: Config, path: Path) -> None:
    path.write_text(OmegaConf.to_yaml(OmegaConf.create(as_dict(cfg))))


def flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """{'model': {'hidden': 64}} -> {'model.hidden': '64'} for MLflow params."""
    flat: dict[str, str] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(flatten(value, name + "."))
        else:
            flat[name] = str(value)
    return flat
