"""The GPU series MLflow's system-metrics monitor logs, with parbench's temperature and SM clock,
from a fake NVML (this machine has no GPU) into a real MLflow store."""

from __future__ import annotations

import time
from types import SimpleNamespace

import mlflow
import pynvml
import pytest

from parbench.config.schema import TrackingConfig
from parbench.tracking.store import Store
from parbench.tracking.system_metrics import GpuMonitor, system_metrics


@pytest.fixture
def fake_gpus(monkeypatch):
    """pynvml answering for two GPUs, as the orchestrator's monitor would see them."""
    fake = {"nvmlInit": lambda: None, "nvmlDeviceGetCount": lambda: 2, "nvmlDeviceGetHandleByIndex": lambda i: i,
            "nvmlDeviceGetMemoryInfo": lambda h: SimpleNamespace(used=40e9, total=80e9),
            "nvmlDeviceGetUtilizationRates": lambda h: SimpleNamespace(gpu=97),
            "nvmlDeviceGetPowerUsage": lambda h: 650_000, "nvmlDeviceGetEnforcedPowerLimit": lambda h: 700_000,
            "nvmlDeviceGetTemperature": lambda h, sensor: 60 + h, "nvmlDeviceGetClockInfo": lambda h, clock: 1980}
    for name, fn in fake.items():
        monkeypatch.setattr(pynvml, name, fn)


def test_gpu_system_metrics_add_temperature_and_sm_clock_to_mlflows(fake_gpus, tmp_path):
    monitor = GpuMonitor()
    monitor.collect_metrics()
    sample = monitor.aggregate_metrics()
    assert sample["gpu_1_temperature_c"] == 61 and sample["gpu_0_sm_clock_mhz"] == 1980
    assert sample["gpu_0_power_usage_watts"] == 650 and sample["gpu_1_utilization_percentage"] == 97
    # The real monitor thread logging into a real MLflow store, as around a job's torchrun.
    store = Store(f"sqlite:///{tmp_path / 'mlflow.db'}", "parbench")
    run_id = store.create_run("system metrics", {})
    with system_metrics(run_id, store.uri, TrackingConfig(system_metrics_interval_s=0.2)):
        time.sleep(1.5)
    store.finish(run_id, ok=True)
    client = mlflow.MlflowClient(store.uri)
    for name in ("gpu_0_temperature_c", "gpu_1_sm_clock_mhz", "gpu_0_power_usage_watts", "cpu_utilization_percentage"):
        assert len(client.get_metric_history(run_id, f"system/{name}")) >= 2, name
