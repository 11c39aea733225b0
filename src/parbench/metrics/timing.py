"""Step timing: the clock synchronises the device only at step edges, never per op."""

from __future__ import annotations

import statistics
import time

import torch


def device_synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class StepClock:
    """Wall time of one step, synchronised with the device at its start and end."""

    def __init__(self, device: torch.device):
        self.device = device
        self._start = 0.0

    def start(self) -> None:
        device_synchronize(self.device)
        self._start = time.perf_counter()

    def stop(self) -> float:
        device_synchronize(self.device)
        return time.perf_counter() - self._start


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile, q in [0, 100]."""
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo, hi = int(pos), min(int(pos) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summarize(values: list[float], prefix: str) -> dict[str, float]:
    """median (as `prefix`), p10, p90, mean, stdev and count of measured values."""
    return {
        prefix: statistics.median(values),
        f"{prefix}_p10": percentile(values, 10),
        f"{prefix}_p90": percentile(values, 90),
        f"{prefix}_mean": statistics.fmean(values),
        f"{prefix}_stdev": statistics.stdev(values) if len(values) > 1 else 0.0,
        f"{prefix}_count": float(len(values)),
    }
