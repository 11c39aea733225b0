"""Energy from NVML's counters (a fake NVML: this machine has no GPU) and CPU use over a window."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
import torch

from parbench.metrics.energy import GpuCounters, WindowMeter, window_metrics


class FakeNvml:
    """NVML's counters of one GPU, each read returning the next scripted value."""

    class NVMLError(Exception):
        pass

    def __init__(self, energy_mj: list[int], reasons: list[int], power_violation_ns: list[int] | None):
        self._energy, self._reasons = iter(energy_mj), iter(reasons)
        self._violation = iter(power_violation_ns) if power_violation_ns is not None else None

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        return next(self._energy)

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        return next(self._reasons)

    def nvmlDeviceGetViolationStatus(self, handle, policy):
        if self._violation is None or policy != 0:  # thermal, or no violation counters at all
            raise self.NVMLError("Not Supported")
        return SimpleNamespace(referenceTime=0, violationTime=next(self._violation))


def measured_window(nvml: FakeNvml, uuid: str) -> dict:
    """start, two sampled steps, stop: the reading a rank gathers."""
    meter = WindowMeter(torch.device("cpu"), gpu=GpuCounters(nvml, handle=object(), uuid=uuid))
    meter.start()
    meter.sample()
    meter.sample()
    meter.stop()
    meter.stop()  # a second stop keeps the first end (reads no counter: the fake would run dry)
    return meter.reading()


def test_energy_is_the_counter_difference_summed_over_distinct_gpus():
    # Reasons read at start, at each sampled step, at stop: idle, then a software power cap once.
    a = measured_window(FakeNvml([1_000_000, 1_450_000], [0x1, 0x0, 0x4, 0x0], [10_000_000_000, 12_500_000_000]), "GPU-a")
    b = measured_window(FakeNvml([2_000_000, 2_400_000], [0x0] * 4, None), "GPU-b")
    assert a["gpu"]["energy_j"] == pytest.approx(450.0) and b["gpu"]["energy_j"] == pytest.approx(400.0)
    assert a["gpu"]["violation_s"] == {"power": pytest.approx(2.5)} and b["gpu"]["violation_s"] == {}
    a["wall_s"], b["wall_s"] = 2.0, 4.0
    twice_a = {**a, "cpu_s": 0.0}  # a second rank reading the same GPU counts once
    metrics, tags = window_metrics([a, b, twice_a], tokens=8_500)
    assert metrics["energy_j"] == pytest.approx(850.0)
    assert metrics["avg_power_w"] == pytest.approx(450 / 2 + 400 / 4)
    assert metrics["tokens_per_joule"] == pytest.approx(10.0)
    assert metrics["gpu_throttled"] == 1.0 and metrics["gpu_power_violation_s"] == pytest.approx(2.5)
    assert tags["gpu_throttled"] == "true" and tags["gpu_clock_event_reasons"] == "gpu_idle,sw_power_cap"


def test_idle_reason_alone_is_not_throttling():
    reading = measured_window(FakeNvml([5, 3_005], [0x1] * 4, [7, 7]), "GPU-c")
    metrics, tags = window_metrics([reading], tokens=300)
    assert metrics["energy_j"] == pytest.approx(3.0) and metrics["tokens_per_joule"] == pytest.approx(100.0)
    assert metrics["gpu_throttled"] == 0.0 and tags["gpu_throttled"] == "false"


def test_cpu_window_reports_cpu_use_and_no_energy():
    meter = WindowMeter.for_device(torch.device("cpu"))
    meter.start()
    end = time.process_time() + 0.05
    while time.process_time() < end:  # busy: about one core
        pass
    meter.stop()
    metrics, tags = window_metrics([meter.reading()], tokens=1_000)
    assert 5 < metrics["cpu_util_pct"] <= 150  # one busy thread; less where other processes share the cores
    assert not {"energy_j", "avg_power_w", "tokens_per_joule"} & set(metrics)
    assert tags["energy"].startswith("n/a: no GPU")


def test_unreadable_counter_is_reported_not_invented():
    reading = {"wall_s": 1.0, "cpu_s": 0.5, "gpu_error": "NVMLError_LibraryNotFound: NVML Shared Library Not Found"}
    metrics, tags = window_metrics([reading], tokens=10)
    assert metrics == {"cpu_util_pct": 50.0}
    assert "could not be read" in tags["energy"] and "LibraryNotFound" in tags["energy"]
