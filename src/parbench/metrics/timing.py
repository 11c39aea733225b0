"""Step timing: the clock synchronises the device only at step edges, never per op."""

from __future__ import annotations

import functools
import statistics
import time
from typing import Callable

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


class BusyTimer:
    """Time spent inside wrapped calls between begin() and end(), against that span: the idle
    fraction. On GPU the marks are CUDA events on the current stream (no synchronisation): read
    idle_fraction() only after the device has finished the span (the step clock's closing sync)."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self._busy: list[tuple] = []
        self._span: tuple = ()

    def _mark(self):
        if not self.cuda:
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def _seconds(self, start, end) -> float:
        return start.elapsed_time(end) / 1e3 if self.cuda else end - start

    def wrap(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def timed(*args, **kwargs):
            start = self._mark()
            try:
                return fn(*args, **kwargs)
            finally:
                self._busy.append((start, self._mark()))
        return timed

    def begin(self) -> None:
        self._busy.clear()
        self._span = (self._mark(),)

    def end(self) -> None:
        self._span = (self._span[0], self._mark())

    def idle_fraction(self) -> float:
        busy = sum(self._seconds(start, end) for start, end in self._busy)
        return max(0.0, 1.0 - busy / self._seconds(*self._span))


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
