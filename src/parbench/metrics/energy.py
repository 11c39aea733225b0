"""Energy and CPU use over a run's measured window, read by every rank for itself.

GPU: NVML's total-energy counter (nvmlDeviceGetTotalEnergyConsumption, mJ since the driver
loaded) read at the start and the end of the measured steps, not integrated from sampled power;
the clocks-event reasons and NVML's power/thermal violation counters say whether clocks were
held down meanwhile. CPU: the process's CPU time over the same window (time.process_time counts
every thread of the process) against wall time; peak RSS is mem_peak_host_gb (metrics.memory).
No energy is ever reported where no counter was read.

    meter = WindowMeter.for_device(env.device)
    meter.start(); ...measured steps (meter.sample() once a step)...; meter.stop()
    gathered = all_gather(meter.reading())   ->   window_metrics(gathered, tokens) on rank 0
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import torch

from parbench.metrics.timing import device_synchronize

# NVML clocks-event reason bits (nvml.h: nvmlClocksEventReason*); the throttling ones hold clocks
# below what the load asks for. GPU idle, application clocks and display clocks are not throttling.
CLOCK_EVENT_REASONS = {0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap",
                       0x8: "hw_slowdown", 0x10: "sync_boost", 0x20: "sw_thermal_slowdown",
                       0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown",
                       0x100: "display_clock_setting"}
THROTTLE_BITS = 0x4 | 0x8 | 0x20 | 0x40 | 0x80
# NVML perf policies whose violation time (ns clocks were held down) is read: power, thermal.
VIOLATION_POLICIES = {"power": 0, "thermal": 1}


def reason_names(mask: int) -> list[str]:
    return [name for bit, name in CLOCK_EVENT_REASONS.items() if mask & bit]


class GpuCounters:
    """One GPU's NVML counters: energy (mJ), the current clocks-event reasons, violation times (ns)."""

    def __init__(self, nvml: Any, handle: Any, uuid: str):
        self.nvml, self.handle, self.uuid = nvml, handle, uuid
        self._reasons = (getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
                         or nvml.nvmlDeviceGetCurrentClocksThrottleReasons)

    def energy_mj(self) -> int:
        return int(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle))

    def reasons(self) -> int:
        try:
            return int(self._reasons(self.handle))
        except self.nvml.NVMLError:
            return 0

    def violations_ns(self) -> dict[str, int]:
        """Only the policies this GPU reports (others raise NVMLError_NotSupported)."""
        out = {}
        for name, policy in VIOLATION_POLICIES.items():
            try:
                out[name] = int(self.nvml.nvmlDeviceGetViolationStatus(self.handle, policy).violationTime)
            except self.nvml.NVMLError:
                pass
        return out


def nvml_counters(device: torch.device) -> GpuCounters:
    """This rank's GPU in NVML, found by UUID (CUDA and NVML may number GPUs differently)."""
    import pynvml

    pynvml.nvmlInit()
    uuid = str(torch.cuda.get_device_properties(device).uuid)
    uuid = uuid if uuid.startswith("GPU-") else f"GPU-{uuid}"
    try:
        handle = pynvml.nvmlDeviceGetHandleByUUID(uuid)
    except pynvml.NVMLError:  # torch's own mapping, through CUDA_VISIBLE_DEVICES
        handle = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda._get_nvml_device_index(device))
    return GpuCounters(pynvml, handle, uuid)


@dataclass
class WindowMeter:
    """Energy (GPU) and process CPU time between start() and stop(); both synchronise the device,
    so the window holds exactly the work queued inside it."""

    device: torch.device
    gpu: GpuCounters | None = None
    gpu_error: str | None = None  # why a CUDA rank has no counters
    _start: dict = field(default_factory=dict)
    _end: dict = field(default_factory=dict)
    _reasons: int = 0

    @classmethod
    def for_device(cls, device: torch.device) -> "WindowMeter":
        if device.type != "cuda":
            return cls(device)
        try:
            gpu = nvml_counters(device)
            gpu.energy_mj()  # GPUs before Volta have no energy counter: NVMLError_NotSupported
            return cls(device, gpu=gpu)
        except Exception as e:  # noqa: BLE001 - no NVML library, driver or counter: say so, measure the rest
            return cls(device, gpu_error=f"{type(e).__name__}: {e}")

    def _snapshot(self) -> dict:
        device_synchronize(self.device)
        snap = {"wall": time.perf_counter(), "cpu": time.process_time()}
        if self.gpu is not None:
            snap.update(energy_mj=self.gpu.energy_mj(), violations=self.gpu.violations_ns())
            self.sample()
        return snap

    def start(self) -> None:
        self._end, self._reasons = {}, 0
        self._start = self._snapshot()

    def stop(self) -> None:
        """End the window (a second call keeps the first end)."""
        if self._start and not self._end:
            self._end = self._snapshot()

    def sample(self) -> None:
        """Note the clocks-event reasons now (call once a step: they are not accumulated)."""
        if self.gpu is not None:
            self._reasons |= self.gpu.reasons()

    def reading(self) -> dict:
        """This rank's window, for window_metrics after a gather (empty if never started)."""
        if not self._end:
            return {}
        out = {"wall_s": self._end["wall"] - self._start["wall"], "cpu_s": self._end["cpu"] - self._start["cpu"]}
        if self.gpu is not None:
            out["gpu"] = {"uuid": self.gpu.uuid, "energy_j": (self._end["energy_mj"] - self._start["energy_mj"]) / 1e3,
                          "reasons": self._reasons,
                          "violation_s": {k: (v - self._start["violations"][k]) / 1e9
                                          for k, v in self._end["violations"].items() if k in self._start["violations"]}}
        elif self.gpu_error:
            out["gpu_error"] = self.gpu_error
        return out


def window_metrics(readings: list[dict], tokens: float) -> tuple[dict[str, float], dict[str, str]]:
    """Metrics and tags of every rank's window: cpu_util_pct (mean over ranks; 100 = one core
    busy), and with GPU counters energy_j (sum over distinct GPUs), avg_power_w (sum of each
    GPU's mean power), tokens_per_joule, gpu_throttled and the violation seconds."""
    readings = [r for r in readings if r]
    if not readings:
        return {}, {}
    metrics = {"cpu_util_pct": sum(100 * r["cpu_s"] / r["wall_s"] for r in readings) / len(readings)}
    gpus = list({r["gpu"]["uuid"]: (r["gpu"], r["wall_s"]) for r in readings if "gpu" in r}.values())
    errors = sorted({r["gpu_error"] for r in readings if "gpu_error" in r})
    if not gpus:
        return metrics, ({"energy": f"n/a: NVML's energy counter could not be read ({'; '.join(errors)})"}
                         if errors else {"energy": "n/a: no GPU (CPU run): see cpu_util_pct and mem_peak_host_gb"})
    energy = sum(g["energy_j"] for g, _ in gpus)
    reasons = 0
    for g, _ in gpus:
        reasons |= g["reasons"]
    violation = {k: sum(g["violation_s"].get(k, 0.0) for g, _ in gpus)
                 for k in VIOLATION_POLICIES if any(k in g["violation_s"] for g, _ in gpus)}
    throttled = bool(reasons & THROTTLE_BITS) or any(v > 0 for v in violation.values())
    metrics.update(energy_j=energy, avg_power_w=sum(g["energy_j"] / wall for g, wall in gpus),
                   gpu_throttled=float(throttled), **{f"gpu_{k}_violation_s": v for k, v in violation.items()})
    if energy > 0:
        metrics["tokens_per_joule"] = tokens / energy
    tags = {"gpu_throttled": str(throttled).lower(),
            "gpu_clock_event_reasons": ",".join(reason_names(reasons)) or "none",
            "energy": f"NVML total-energy counter over the measured window, {len(gpus)} GPU(s)"}
    return metrics, tags
