"""This host's memory, which CPU ranks share: the capacity the fit check uses on hardware=cpu.
The cgroup's limit (a container, a SLURM job) when there is one, less what the cgroup already holds;
MemAvailable otherwise, and never more than it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from parbench.config.schema import HardwareConfig
from parbench.dtypes import GB

UNLIMITED = 2**60  # cgroup v1 writes a huge number for "no limit"


@dataclass(frozen=True)
class HostMemory:
    available_gb: float
    source: str  # how it was found, for the fit message


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None  # cgroup v2 writes "max" for no limit


def _meminfo_kb(key: str, meminfo: Path) -> int | None:
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith(f"{key}:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cgroup_dir(root: Path, self_cgroup: Path) -> Path | None:
    """This process's cgroup v2 directory (the '0::/path' line), or v1's memory controller."""
    try:
        lines = self_cgroup.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "" and (root / path.lstrip("/")).is_dir():
            return root / path.lstrip("/")
        if "memory" in controllers.split(","):
            return root / "memory" / path.lstrip("/")
    return None


def _cgroup_free_bytes(cgroup: Path) -> int | None:
    """Limit minus usage (page cache it can drop counted as free), if the cgroup sets a limit."""
    for limit_file, usage_file in (("memory.max", "memory.current"), ("memory.limit_in_bytes", "memory.usage_in_bytes")):
        limit = _read_int(cgroup / limit_file)
        if limit is not None and limit < UNLIMITED:
            usage = _read_int(cgroup / usage_file) or 0
            return max(0, limit - usage + _inactive_file(cgroup))
    return None


def _inactive_file(cgroup: Path) -> int:
    try:
        for line in (cgroup / "memory.stat").read_text().splitlines():
            key, value = line.split()[:2]
            if key in ("inactive_file", "total_inactive_file"):
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


def host_memory(root: Path = Path("/sys/fs/cgroup"), proc: Path = Path("/proc")) -> HostMemory | None:
    """What a new job on this host can use; None where neither /proc nor a cgroup says."""
    available_kb = _meminfo_kb("MemAvailable", proc / "meminfo")
    cgroup = _cgroup_dir(root, proc / "self" / "cgroup")
    free = _cgroup_free_bytes(cgroup) if cgroup is not None else None
    if free is not None and (available_kb is None or free < available_kb * 1024):
        return HostMemory(free / GB, "the cgroup's memory limit less its usage")
    if available_kb is None:
        return None
    return HostMemory(available_kb * 1024 / GB, "MemAvailable")


# Kept free of the estimate: the caching allocator's fragmentation and the runtime's own growth
# (CUDA context, NCCL buffers, glibc arenas) beyond the calibrated overhead the estimate includes.
FIT_MARGIN = 0.05


@dataclass(frozen=True)
class Capacity:
    """Memory one device (one CPU rank: its share of the host) can hold, and where the figure came from."""

    per_device_gb: float
    where: str

    @property
    def usable_gb(self) -> float:
        return self.per_device_gb * (1 - FIT_MARGIN)

    def describe(self) -> str:
        return f"{self.where}; {self.usable_gb:,.1f} GB usable after a {FIT_MARGIN:.0%} margin for the allocator"


def device_capacity(hw: HardwareConfig) -> Capacity | None:
    """The profile's memory_gb per GPU; on CPU (unless memory_gb is set) the host's available memory
    shared by the ranks on this node. None: unknown, the fit is not checked."""
    if hw.memory_gb:
        return Capacity(hw.memory_gb, f"{hw.memory_gb:,.1f} GB per device (hardware.memory_gb)")
    if hw.device_type != "cpu":
        return None
    host = host_memory()
    if host is None:
        return None
    ranks = max(1, hw.gpus_per_node)
    return Capacity(host.available_gb / ranks, f"the {ranks} CPU ranks share this host's {host.available_gb:,.1f} GB "
                                               f"({host.source}): {host.available_gb / ranks:,.1f} GB each")
