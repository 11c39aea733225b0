"""What every microbenchmark does on its ranks: gathering a value from every rank."""

from __future__ import annotations

import math
import statistics

import torch
import torch.distributed as dist



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


def copies_to_exceed(rotate_bytes: int, each_bytes: int) -> int:
    """How many copies of an input of each_bytes together exceed rotate_bytes (at least one): calls that
    take them in turn find none in L2 from the call before, as a model's layers find theirs."""
    return max(1, math.ceil(rotate_bytes / each_bytes))


def shape_name(shape: list[int]) -> str:
    """A shape as metric names carry it: 4096x4096x4096."""
    return "x".join(map(str, shape))
