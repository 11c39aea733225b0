"""Pieces every microbenchmark shares: nccl-tests style sizes, validation, gathering a value from
every rank, and results in the shape the worker writes (metrics, artifacts, failure)."""

from __future__ import annotations

import re
import statistics

import torch
import torch.distributed as dist

from parbench.config import ConfigError
from parbench.config.schema import Config

GB = 1e9  # bandwidths in GB/s (10^9 bytes), as nccl-tests prints them
_SIZE = re.compile(r"^\s*(\d+)\s*([KMGT]?)i?B?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def parse_size(text: str | int, key: str = "size") -> int:
    """Bytes from 1048576, '1M', '1MiB' or '1G' (binary units, as nccl-tests reads -b/-e)."""
    match = _SIZE.match(str(text))
    if not match:
        raise ConfigError(f"workload.{key}={text!r} is not a size: write bytes or a number with K, M, G "
                          "(e.g. 1M, 1G)")
    return int(match.group(1)) * _UNITS[match.group(2).upper()]


def size_sweep(begin: str | int, end: str | int, factor: int) -> list[int]:
    """begin, begin*factor, ... up to end (nccl-tests -b -e -f)."""
    lo, hi = parse_size(begin, "begin"), parse_size(end, "end")
    if lo <= 0 or hi < lo:
        raise ConfigError(f"workload.begin={begin} and workload.end={end}: need 0 < begin <= end")
    if factor < 2:
        raise ConfigError(f"workload.factor={factor} must be >= 2 (each size is the previous times factor)")
    sizes = [lo]
    while sizes[-1] * factor <= hi:
        sizes.append(sizes[-1] * factor)
    return sizes


def human_size(nbytes: int) -> str:
    for unit in ("G", "M", "K"):
        if nbytes >= _UNITS[unit] and nbytes % _UNITS[unit] == 0:
            return f"{nbytes // _UNITS[unit]}{unit}iB"
    return f"{nbytes}B"


def check_iterations(w) -> None:
    if w.iters <= 0 or w.warmup_iters < 0:
        raise ConfigError(f"workload.iters={w.iters} must be positive and workload.warmup_iters={w.warmup_iters} "
                          ">= 0")


def require_gpus(cfg: Config, what: str, instead: str) -> None:
    if cfg.hardware.device_type != "cuda":
        raise ConfigError(f"workload={cfg.workload.name} {what} and needs GPUs (hardware.device_type=cuda); "
                          f"hardware={cfg.hardware.name} has none. {instead}")


def gather_floats(value: float, device: torch.device) -> list[float]:
    """The value of every rank, in rank order (one small collective, outside any timed region)."""
    tensor = torch.tensor([value], dtype=torch.float64, device=device)
    gathered = [torch.empty_like(tensor) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, tensor)
    return [t.item() for t in gathered]


def rank_mean(value: float, device: torch.device) -> float:
    return statistics.fmean(gather_floats(value, device))


def largest(values_by_size: dict[int, float]) -> float:
    return values_by_size[max(values_by_size)]
