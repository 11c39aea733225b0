"""The capacity the fit check uses: on CPU the host's memory (a cgroup's limit when there is one),
shared by the ranks on the node, less the allocator margin."""

from __future__ import annotations

from pathlib import Path

import pytest

from parbench.config.host import FIT_MARGIN, device_capacity, host_memory
from parbench.config.schema import HardwareConfig

GiB = 2**30


def fake_host(tmp_path: Path, available_kb: int, cgroup: dict[str, str] | None, v1: bool = False) -> tuple[Path, Path]:
    proc, root = tmp_path / "proc", tmp_path / "cgroup"
    (proc / "self").mkdir(parents=True)
    (proc / "meminfo").write_text(f"MemTotal:       99999999 kB\nMemAvailable:   {available_kb} kB\n")
    (proc / "self" / "cgroup").write_text("4:memory:/job\n" if v1 else "0::/job\n")
    folder = root / ("memory/job" if v1 else "job")
    folder.mkdir(parents=True)
    for name, text in (cgroup or {}).items():
        (folder / name).write_text(text)
    return root, proc


def test_mem_available_without_a_cgroup_limit(tmp_path):
    root, proc = fake_host(tmp_path, 20 * 2**20, {"memory.max": "max\n"})
    found = host_memory(root, proc)
    assert found.source == "MemAvailable" and found.available_gb == pytest.approx(20 * GiB / 1e9)


@pytest.mark.parametrize("v1", [False, True])
def test_cgroup_limit_less_usage_when_smaller(tmp_path, v1):
    files = ({"memory.limit_in_bytes": str(8 * GiB), "memory.usage_in_bytes": str(3 * GiB)} if v1 else
             {"memory.max": str(8 * GiB), "memory.current": str(3 * GiB), "memory.stat": f"anon 1\ninactive_file {GiB}\n"})
    root, proc = fake_host(tmp_path, 20 * 2**20, files, v1)
    found = host_memory(root, proc)
    assert found.source.startswith("the cgroup's memory limit")
    assert found.available_gb == pytest.approx((5 if v1 else 6) * GiB / 1e9)


def test_cpu_ranks_share_the_host_and_a_gpu_uses_its_profile(monkeypatch):
    import parbench.config.host as host

    monkeypatch.setattr(host, "host_memory", lambda: host.HostMemory(24.0, "MemAvailable"))
    cpu = device_capacity(HardwareConfig(name="cpu", device_type="cpu", backend="gloo", gpus_per_node=4))
    assert cpu.per_device_gb == 6.0 and cpu.usable_gb == pytest.approx(6.0 * (1 - FIT_MARGIN))
    assert "4 CPU ranks share this host's 24.0 GB" in cpu.describe()
    gpu = device_capacity(HardwareConfig(name="h100_sxm", memory_gb=80.0, gpus_per_node=8))
    assert gpu.per_device_gb == 80.0 and "76.0 GB usable" in gpu.describe()
    assert device_capacity(HardwareConfig(name="x", gpus_per_node=1)) is None  # unknown GPU memory: not checked
