"""Workloads: a registry from `workload.name` to its schema, validation, plan and per-rank run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from parbench.config import ConfigError
from parbench.registry import Registry


@dataclass(frozen=True)
class WorkloadSpec:
    schema: type  # dataclass of the workload's fields
    run: Callable[..., dict]  # (cfg, env, reporter) -> results, on every rank
    validate: Callable[..., None] = lambda cfg, dims: None  # raise ConfigError
    plan: Callable[..., dict] = lambda cfg, dims: {}  # figures for dry_run
    summary_metrics: tuple[str, ...] = ()  # rows of the end-of-run table; `*` matches one name segment
    uses_model: bool = True  # False: microbenchmarks, which ignore model (the plan leaves it out)


class VerificationError(RuntimeError):
    """A workload's own check of its results failed (e.g. wrong collective outputs)."""


WORKLOADS: Registry[WorkloadSpec] = Registry("workload", "workload")


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


# Importing the workload modules registers them.
from parbench.workloads import microbench, train  # noqa: E402,F401
