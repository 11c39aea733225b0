"""Step timing: the clock synchronises the device only at step edges, never per op;
statistics of the measured steps with a confidence interval of the median."""

from __future__ import annotations

import math
import random
import statistics
import time

import torch

# The range StepClock records around each timed step; trace analysis measures inside it.
STEP_RANGE = "parbench.step"
CI_METHODS = ("order", "bootstrap")


def device_synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class StepClock:
    """Wall time of one step, synchronised with the device at its start and end. The step is
    also a `parbench.step` profiler range (a no-op costing microseconds when not profiling),
    so trace analysis looks at exactly the time this clock measures."""

    def __init__(self, device: torch.device):
        self.device = device
        self._start = 0.0
        self._range: torch.profiler.record_function | None = None

    def start(self) -> None:
        device_synchronize(self.device)
        self._range = torch.profiler.record_function(STEP_RANGE)
        self._range.__enter__()
        self._start = time.perf_counter()

    def stop(self) -> float:
        device_synchronize(self.device)
        elapsed = time.perf_counter() - self._start
        self._range.__exit__(None, None, None)
        return elapsed


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile, q in [0, 100]."""
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo, hi = int(pos), min(int(pos) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def median_ci_order(values: list[float], confidence: float) -> tuple[float, float, float]:
    """Distribution-free CI of the median: [x_(k), x_(n+1-k)] of the sorted values, with the
    largest k whose binomial coverage 1 - 2 P(Bin(n, 1/2) < k) still reaches `confidence`.
    Returns (low, high, achieved coverage); too few values give [min, max] and its coverage."""
    ordered, n = sorted(values), len(values)
    k = 1
    while k + 1 <= (n + 1) // 2 and order_statistic_coverage(n, k + 1) >= confidence:
        k += 1
    return ordered[k - 1], ordered[n - k], order_statistic_coverage(n, k)


def order_statistic_coverage(n: int, k: int) -> float:
    """P(x_(k) <= median < x_(n+1-k)) for n independent values: 1 - 2 P(Bin(n, 1/2) < k)."""
    return 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2**n


def median_ci_bootstrap(values: list[float], confidence: float, resamples: int,
                        seed: int = 0) -> tuple[float, float, float]:
    """Percentile-bootstrap CI of the median (seeded: the same values give the same interval)."""
    rng = random.Random(seed)
    medians = [statistics.median(rng.choices(values, k=len(values))) for _ in range(resamples)]
    tail = 100 * (1 - confidence) / 2
    return percentile(medians, tail), percentile(medians, 100 - tail), confidence


def median_ci(values: list[float], confidence: float = 0.95, method: str = "order",
              resamples: int = 2000) -> tuple[float, float, float]:
    if method == "bootstrap":
        return median_ci_bootstrap(values, confidence, resamples)
    return median_ci_order(values, confidence)


def summarize(values: list[float], prefix: str, confidence: float = 0.95, method: str = "order",
              resamples: int = 2000) -> dict[str, float]:
    """median (as `prefix`), p10, p90, mean, stdev, count, and the median's confidence interval
    (`_ci_low`, `_ci_high`, `_ci_level`: the coverage actually achieved)."""
    low, high, level = median_ci(values, confidence, method, resamples)
    return {
        prefix: statistics.median(values),
        f"{prefix}_p10": percentile(values, 10),
        f"{prefix}_p90": percentile(values, 90),
        f"{prefix}_mean": statistics.fmean(values),
        f"{prefix}_stdev": statistics.stdev(values) if len(values) > 1 else 0.0,
        f"{prefix}_count": float(len(values)),
        f"{prefix}_ci_low": low,
        f"{prefix}_ci_high": high,
        f"{prefix}_ci_level": level,
    }
