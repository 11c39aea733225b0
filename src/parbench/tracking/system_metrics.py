"""Time series of the machine while a job's workers run, as MLflow system metrics (`system/*`,
plotted in the run's "System metrics" tab): MLflow's SystemMetricsMonitor samples CPU, memory,
disk, network and, through nvidia-ml-py (NVML), each GPU's utilisation, memory and power; the
GPU monitor here adds the temperature and SM clock MLflow does not sample. It runs in the
orchestrator, which only talks to NVML and never initialises CUDA."""

from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Iterator

from mlflow.system_metrics.metrics.gpu_monitor import GPUMonitor
from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

from parbench.config.schema import TrackingConfig


class GpuMonitor(GPUMonitor):
    """MLflow's GPU monitor plus gpu_<i>_temperature_c and gpu_<i>_sm_clock_mhz."""

    def collect_metrics(self) -> None:
        import pynvml  # GPUMonitor() succeeded, so nvidia-ml-py is there and NVML is initialised

        super().collect_metrics()
        for i, handle in enumerate(self.gpu_handles):
            try:
                self._metrics[f"gpu_{i}_temperature_c"].append(
                    pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU))
                self._metrics[f"gpu_{i}_sm_clock_mhz"].append(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))
            except pynvml.NVMLError:  # a GPU without the sensor keeps MLflow's own series
                pass


class RoundedMonitor(SystemMetricsMonitor):
    """MLflow's monitor, its averages rounded to 4 significant digits: the run's metric list shows
    289.4, not 289.40631699999994."""

    def publish_metrics(self, metrics: dict[str, float]) -> None:
        super().publish_metrics({k: float(f"{v:.4g}") for k, v in metrics.items()})


@contextmanager
def system_metrics(run_id: str, tracking_uri: str, cfg: TrackingConfig) -> Iterator[None]:
    """Sample every `cfg.system_metrics_interval_s` while the block runs (nothing when
    tracking.system_metrics=false); the last samples are flushed on exit."""
    if not cfg.system_metrics:
        yield
        return
    # Its INFO lines (started, stopped, "skip logging GPU metrics" on CPU) would fill every job's console.
    logging.getLogger("mlflow.system_metrics").setLevel(logging.WARNING)
    monitor = RoundedMonitor(run_id, sampling_interval=cfg.system_metrics_interval_s,
                             tracking_uri=tracking_uri)
    monitor.monitors = [GpuMonitor() if isinstance(m, GPUMonitor) else m for m in monitor.monitors]
    monitor.start()
    try:
        yield
    finally:
        monitor.finish()
