"""Step timing: CUDA events around each step, read a step late so the host can run ahead
(no synchronise per step, never per op); statistics of the measured steps with a confidence interval of the median."""

from __future__ import annotations

import collections
import contextlib
import functools
import math
import random
import statistics
import sys
import time
from typing import Callable, Iterator

import torch


# The range StepClock records around each timed step; trace analysis measures inside it.
STEP_RANGE = "parbench.step"


def device_synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class StepClock:
    """Step times without synchronising between steps: the host runs ahead and queues the next
    step while the device finishes this one, as a real training loop does, so a synchronise
    at every step would add device idle time that training does not have (5-8% on an H100).
    Each step is a `parbench.step` profiler range (trace analysis measures inside it) bracketed
    by a DeviceInterval; read() returns the oldest unread step's time, waiting for that step
    only, so reading step i after queueing step i+1 keeps the device busy."""

    def __init__(self, device: torch.device):
        self.device = device
        self._unread: collections.deque[tuple[DeviceInterval, float]] = collections.deque()
        # Steps a loop may leave unread: on CPU ops are synchronous, nothing is gained by lagging.
        self.lag = 1 if device.type == "cuda" else 0

    @contextlib.contextmanager
    def step(self) -> Iterator[None]:
        interval = DeviceInterval(self.device)
        with torch.profiler.record_function(STEP_RANGE):
            interval.start()
            queued_from = time.perf_counter()
            yield
            host_s = time.perf_counter() - queued_from
            interval.stop()
        self._unread.append((interval, host_s))

    def read(self) -> tuple[float, float]:
        """(the step's seconds on the device, the host's seconds to dispatch it). A GPU step whose
        dispatch takes as long as the step is host-bound; a device-bound one's dispatch ends up
        waiting for room in the launch queue, so it only bounds the host's cost from above."""
        interval, host_s = self._unread.popleft()
        return interval.seconds(wait=True), host_s


class BusyTimer:
    """Time spent inside wrapped calls between begin() and end(), against that span: the idle
    fraction, from DeviceIntervals (CUDA events on the current stream: no synchronisation).
    Spans queue up: idle_fraction() reads the oldest unread one, once the device has finished
    it (StepClock.read() of the same step waits for that)."""

    def __init__(self, device: torch.device):
        self.device = device
        self._busy: list[DeviceInterval] = []
        self._span: DeviceInterval | None = None
        self._spans: collections.deque[tuple[list[DeviceInterval], DeviceInterval]] = collections.deque()

    def _started(self) -> DeviceInterval:
        interval = DeviceInterval(self.device)
        interval.start()
        return interval

    def wrap(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def timed(*args, **kwargs):
            interval = self._started()
            try:
                return fn(*args, **kwargs)
            finally:
                interval.stop()
                self._busy.append(interval)
        return timed

    def begin(self) -> None:
        self._busy = []
        self._span = self._started()

    def end(self) -> None:
        self._span.stop()
        self._spans.append((self._busy, self._span))

    def idle_fraction(self) -> float:
        busy, span = self._spans.popleft()
        return max(0.0, 1.0 - sum(i.seconds() for i in busy) / span.seconds())


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

    def reached(self) -> bool:
        """Whether the device has already run past start() (never on CPU, where nothing is queued)."""
        return self.device.type == "cuda" and self._events[0].query()

    def seconds(self, wait: bool = False) -> float:
        """Valid once the device has finished the bracketed work: after a synchronize, or
        with wait=True, which waits for that work only."""
        if self.device.type == "cuda":
            if wait:
                self._events[1].synchronize()
            return self._events[0].elapsed_time(self._events[1]) / 1e3
        return self._times[1] - self._times[0]


# GPU clock cycles the device idles per call queued behind it (about 100 us at H100 clocks): more
# than a fast host takes to launch one call from Python; a slower host gets longer holds (time_each).
HOLD_CYCLES_PER_CALL = 200_000
HOLD_TRIES = 4  # each try holds 4x longer: up to 64x HOLD_CYCLES_PER_CALL a call


def calls_time_each_makes(iters: int, warmup: int) -> int:
    """How many distinct call indices time_each may pass fn: what a benchmark rotating its inputs needs."""
    return warmup + HOLD_TRIES * iters


def hold_device(device: torch.device, calls: int, cycles_per_call: int = HOLD_CYCLES_PER_CALL) -> None:
    """Keep a GPU busy while the host queues `calls` calls behind it, so that each call's events
    bracket its kernels and not the host's launch: a 1024^3 bf16 GEMM takes a few microseconds on an
    H100, less than its launch, and timed as launched it measured 59 TFLOP/s (2026-11-25). More calls
    than CUDA's launch queue holds end the hold early whatever its length."""
    if device.type == "cuda":
        with torch.cuda.device(device):
            torch.cuda._sleep(cycles_per_call * calls)


def time_each(fn, iters: int, device: torch.device, warmup: int = 0) -> list[float]:
    """Seconds of each of `iters` calls fn(i) after `warmup` calls, with no device sync between
    calls: every call is bracketed by its own pair of events, queued while the device is held
    (hold_device), read after one final synchronize. Where the GPU reached the first call before the
    host had queued the last, the later calls would be timed as launched (a host slower than the hold
    per call: 240 µs for a 35 µs decode attention on one H100 host, 2026-11-27): timed again under a
    longer hold, the indices going on (fn(i) of a rotating benchmark takes inputs the earlier try did
    not warm), and said so if no hold was long enough."""
    for i in range(warmup):
        fn(i)
    cycles, first = HOLD_CYCLES_PER_CALL, warmup
    for _ in range(HOLD_TRIES):
        intervals = [DeviceInterval(device) for _ in range(iters)]
        device_synchronize(device)
        hold_device(device, iters, cycles)
        for i, interval in enumerate(intervals):
            interval.start()
            fn(first + i)
            interval.stop()
        held = not intervals[0].reached()
        device_synchronize(device)
        if held:
            break
        cycles, first = cycles * 4, first + iters
    else:
        print(f"[parbench] warning: the GPU ran ahead of the queued calls under a hold of {cycles // 4:,} cycles a "
              "call (a slow host, or more calls than CUDA's launch queue holds): their times include the "
              "launches", file=sys.stderr, flush=True)
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


def time_graphed(fn, calls: int, replays: int) -> float:
    """Mean seconds per call of `calls` calls fn(i) captured in one CUDA graph and replayed `replays`
    times, as an engine replays its decode step: back to back with a graph's launch gaps between
    kernels, no events between them. fn runs once per index outside the capture first (cuBLAS picks
    its kernels and workspace there)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for i in range(calls):
            fn(i)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(calls):
            fn(i)
    graph.replay()  # the first replay uploads the graph
    device = torch.device("cuda", torch.cuda.current_device())
    seconds = time_batch(lambda _: graph.replay(), replays, device)
    del graph
    return seconds / calls
