"""Every point of a sweep through the job's own checks (resolve -> validate -> plan, the fit check
included) before the first one launches: a sweep with a point that cannot work is refused whole, in
seconds, unless invalid_points=record asks to run the others and record those as FAILED runs."""

from __future__ import annotations

import sys
from collections import defaultdict
from dataclasses import dataclass

from hydra import compose
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig

from parbench.config import ConfigError
from parbench.config.hardware import GpuInfo, detect_gpus
from parbench.fmt import plural
from parbench.prepare import prepare

INVALID_POINTS = ("refuse", "record")
LOCAL_LAUNCHER = "BasicLauncher"


@dataclass(frozen=True)
class Refused:
    point: str  # the overrides that differ between points
    reason: str


def sweep_points(task_overrides: list[str]) -> list[list[str]]:
    """Each job's overrides, as Hydra's basic sweeper will expand the command line's lists."""
    parsed = OverridesParser.create().parse_overrides(task_overrides)
    return [job for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]


def swept_keys(jobs: list[list[str]]) -> set[str]:
    """The keys whose value differs between points: what names a point."""
    values: dict[str, set[str]] = defaultdict(set)
    for job in jobs:
        for override in job:
            key, _, value = override.partition("=")
            values[key].add(value)
    return {key for key, seen in values.items() if len(seen) > 1}


def point_name(job: list[str], swept: set[str]) -> str:
    return " ".join(o for o in job if o.split("=", 1)[0] in swept) or "defaults"


def check_point(config_name: str, job: list[str], gpus: list[GpuInfo], local: bool) -> str | None:
    """The reason the point cannot run, or None. Off this host (SLURM) hardware=auto points are
    resolved on their node, so they are checked there."""
    node = compose(config_name, overrides=job)
    if not local and node.hardware.name == "auto":
        return None
    try:
        prepare(node, gpus if local else [], validate_gpus=local)
    except ConfigError as e:
        return str(e)
    return None


def launched_here(config: DictConfig) -> bool:
    """Hydra's basic launcher runs the points in this process (a cluster launcher submits them)."""
    return LOCAL_LAUNCHER in str(config.hydra.launcher.get("_target_", ""))


def refused_points(config: DictConfig) -> list[Refused]:
    jobs = sweep_points(list(config.hydra.overrides.task))
    swept = swept_keys(jobs)
    local = launched_here(config)
    gpus = detect_gpus() if local else []
    found = ((point_name(job, swept), check_point(config.hydra.job.config_name, job, gpus, local)) for job in jobs)
    return [Refused(point, reason) for point, reason in found if reason]


def check_sweep(config: DictConfig) -> None:
    """Refuse the sweep (exit 2, nothing launched) if a point cannot run and invalid_points=refuse."""
    if config.get("invalid_points", "refuse") not in INVALID_POINTS:
        print(f"parbench: invalid config: invalid_points={config.invalid_points!r}: use refuse or record",
              file=sys.stderr, flush=True)
        sys.exit(2)
    refused = refused_points(config)
    if not refused or config.invalid_points == "record":
        return
    for r in refused:
        print(f"parbench: invalid config ({r.point}): {r.reason}", file=sys.stderr)
    print(f"parbench: {plural(len(refused), 'point')} of this sweep cannot run, so nothing was launched: change or "
          "drop them (or add invalid_points=record to run the others and record these as FAILED runs)",
          file=sys.stderr, flush=True)
    sys.exit(2)
