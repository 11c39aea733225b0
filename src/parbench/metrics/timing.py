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


class DeviceInterval:
    """Elapsed time between start() and stop(): CUDA events on the current stream on a GPU (read
    after a synchronize), wall time on CPU, where the ops it brackets are synchronous."""

    def __init__(self, device: torch.device):
        self.device = device
        if device.type == "cuda":
            self._events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        self._times = [0.0, 0.0]

    def start(self) -> None:
        self._mark(0)

    def stop(self) -> None:
        self._mark(1)

    def _mark(self, i: int) -> None:
        if self.device.type == "cuda":
            self._events[i].record()
        else:
            self._times[i] = time.perf_counter()

    def seconds(self) -> float:
        """Only valid once the device has finished the bracketed work (after a synchronize)."""
        if self.device.type == "cuda":
            return self._events[0].elapsed_time(self._events[1]) / 1e3
        return self._times[1] - self._times[0]


def time_each(fn, iters: int, device: torch.device, warmup: int = 0) -> list[float]:
    """Seconds of each of `iters` calls fn(i) after `warmup` calls, with no device sync between
    calls: every call is bracketed by its own pair of events, read after one final synchronize."""
    for i in range(warmup):
        fn(i)
    intervals = [DeviceInterval(device) for _ in range(iters)]
    device_synchronize(device)
    for i, interval in enumerate(intervals):
        interval.start()
        fn(warmup + i)
        interval.stop()
    device_synchronize(device)
    return [interval.seconds() for interval in intervals]


def time_batch(fn, iters: int, device: torch.device, warmup: int = 0) -> float:
    """Mean seconds per call over `iters` back-to-back calls fn(i) between one pair of events
    (nccl-tests' scheme: launch gaps between calls are hidden by the queue)."""
    for i in range(warmup):
        fn(i)
    device_synchronize(device)
    interval = DeviceInterval(device)
    interval.start()
    for i in range(iters):
        fn(warmup + i)
    interval.stop()
    device_synchronize(device)
    return interval.seconds() / iters
