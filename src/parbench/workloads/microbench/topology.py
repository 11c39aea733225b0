"""What the GPUs of this node are and how they connect: names, PCI bus ids, the link between each
pair (NV<n> = n NVLinks, else the PCIe path as `nvidia-smi topo -m` names it: PIX, PXB, PHB, NODE,
SYS), driver, CUDA and NCCL versions. From NVML (pynvml / nvidia-ml-py) when importable, else
nvidia-smi. The orchestrator records it (tags + topology.json) for every GPU run; workload=topology
only prints it. Nothing here initialises CUDA."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from parbench.config.schema import Config
from parbench.distenv import DistEnv
from parbench.workloads.reporting import StepReporter

TOPOLOGY_FILE, TOPO_MATRIX_FILE = "topology.json", "topology.txt"
# nvmlGpuTopologyLevel_t values -> the labels of `nvidia-smi topo -m`
PCIE_LEVELS = {0: "X", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # nvidia-smi underlines the header, even into a pipe
_BUS_ID = re.compile(r"([0-9a-f]+):([0-9a-f]+):([0-9a-f]+)\.([0-9a-f]+)", re.IGNORECASE)


@dataclass
class Topology:
    source: str  # nvml | nvidia-smi
    gpus: list[dict] = field(default_factory=list)  # index, name, pci_bus_id, memory_mib
    links: list[list[str]] = field(default_factory=list)  # links[i][j]: X, NV18, PIX, ..., SYS
    driver_version: str = ""
    cuda_driver_version: str = ""  # the newest CUDA the driver supports
    cuda_runtime_version: str = field(default_factory=lambda: str(torch.version.cuda))
    nccl_version: str = ""
    topo_matrix: str = ""  # `nvidia-smi topo -m` as printed (CPU/NUMA affinity, NICs)


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def bus_key(bus_id) -> tuple[int, ...] | None:
    """PCI domain, bus, device, function: NVML writes the domain with 8 or 4 digits."""
    match = _BUS_ID.search(_text(bus_id))
    return tuple(int(part, 16) for part in match.groups()) if match else None


def _run(*cmd: str) -> str:
    if not shutil.which(cmd[0]):
        return ""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def nccl_version() -> str:
    try:
        return ".".join(map(str, torch.cuda.nccl.version()))
    except (AttributeError, RuntimeError):
        return ""


def nvlink_counts(nvml, handles: list) -> tuple[list[list[int]], list[int]]:
    """Active NVLinks from each GPU to each other GPU, and to NVSwitches (remote is not a GPU)."""
    by_bus = {bus_key(nvml.nvmlDeviceGetPciInfo(h).busId): i for i, h in enumerate(handles)}
    direct = [[0] * len(handles) for _ in handles]
    to_switch = [0] * len(handles)
    for i, handle in enumerate(handles):
        for link in range(nvml.NVML_NVLINK_MAX_LINKS):
            try:
                if nvml.nvmlDeviceGetNvLinkState(handle, link) != nvml.NVML_FEATURE_ENABLED:
                    continue
                remote = by_bus.get(bus_key(nvml.nvmlDeviceGetNvLinkRemotePciInfo(handle, link).busId))
            except nvml.NVMLError:  # no NVLink on this GPU, or past its last link
                continue
            if remote is None:
                to_switch[i] += 1
            else:
                direct[i][remote] += 1
    return direct, to_switch


def from_nvml(nvml) -> Topology:
    nvml.nvmlInit()
    try:
        handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
        gpus = [{"index": i, "name": _text(nvml.nvmlDeviceGetName(h)),
                 "pci_bus_id": _text(nvml.nvmlDeviceGetPciInfo(h).busId),
                 "memory_mib": nvml.nvmlDeviceGetMemoryInfo(h).total // 2**20} for i, h in enumerate(handles)]
        direct, to_switch = nvlink_counts(nvml, handles)
        links = []
        for i, a in enumerate(handles):
            row = []
            for j, b in enumerate(handles):
                nvlinks = direct[i][j] + min(to_switch[i], to_switch[j])  # NVSwitch: all-to-all
                if i == j:
                    row.append("X")
                elif nvlinks:
                    row.append(f"NV{nvlinks}")
                else:
                    row.append(PCIE_LEVELS.get(int(nvml.nvmlDeviceGetTopologyCommonAncestor(a, b)), "?"))
            links.append(row)
        cuda = nvml.nvmlSystemGetCudaDriverVersion()
        return Topology("nvml", gpus, links, _text(nvml.nvmlSystemGetDriverVersion()),
                        f"{cuda // 1000}.{cuda % 1000 // 10}")
    finally:
        nvml.nvmlShutdown()


def parse_topo_matrix(text: str) -> list[list[str]]:
    """The GPU x GPU block of `nvidia-smi topo -m` (tab-separated; NIC and affinity columns dropped)."""
    lines = [line for line in _ANSI.sub("", text).splitlines() if line.strip()]
    header = next((line for line in lines if re.search(r"\tGPU\d+", line)), None)
    if header is None:
        return []
    columns = [c.strip() for c in header.split("\t")]
    gpu_columns = [k for k, c in enumerate(columns) if re.fullmatch(r"GPU\d+", c)]
    rows = []
    for line in lines:
        cells = [c.strip() for c in line.split("\t")]
        if re.fullmatch(r"GPU\d+", cells[0]):
            rows.append([cells[k] for k in gpu_columns])
    return rows


def from_nvidia_smi() -> Topology:
    query = _run("nvidia-smi", "--query-gpu=index,name,pci.bus_id,memory.total,driver_version",
                 "--format=csv,noheader,nounits")
    rows = [[c.strip() for c in line.split(",")] for line in query.strip().splitlines() if line.count(",") >= 4]
    gpus = [{"index": int(r[0]), "name": r[1], "pci_bus_id": r[2],
             "memory_mib": int(r[3]) if r[3].isdigit() else None} for r in rows if r[0].isdigit()]
    header = re.search(r"CUDA Version:\s*([\d.]+)", _run("nvidia-smi"))
    topo = _run("nvidia-smi", "topo", "-m")
    return Topology("nvidia-smi", gpus, parse_topo_matrix(topo), rows[0][4] if rows else "",
                    header.group(1) if header else "", topo_matrix=topo)


def collect_topology() -> Topology:
    """NVML when pynvml imports and answers, else nvidia-smi; an empty Topology when neither works."""
    try:
        import pynvml

        topology = from_nvml(pynvml)
        topology.topo_matrix = _run("nvidia-smi", "topo", "-m")
    except Exception:  # noqa: BLE001 - no pynvml, no driver, or an NVML call this driver lacks
        topology = from_nvidia_smi()
    topology.nccl_version = nccl_version()
    return topology


def topology_tags(t: Topology) -> dict[str, str]:
    names = Counter(g["name"] for g in t.gpus)
    pairs = [f"{i}-{j}:{t.links[i][j]}" for i in range(len(t.links)) for j in range(i + 1, len(t.links))]
    return {"topology_source": t.source if t.gpus else "unavailable", "gpu_count": str(len(t.gpus)),
            "gpu_names": ", ".join(f"{n} x{c}" for n, c in names.items()), "gpu_links": " ".join(pairs),
            "driver_version": t.driver_version, "cuda_driver_version": t.cuda_driver_version,
            "cuda_version": t.cuda_runtime_version, "nccl_version": t.nccl_version}


def write_topology(t: Topology, job_dir: Path) -> list[Path]:
    """topology.json always; topology.txt (nvidia-smi topo -m as printed) when there is one."""
    files = [job_dir / TOPOLOGY_FILE]
    files[0].write_text(json.dumps(asdict(t), indent=2))
    if t.topo_matrix:
        files.append(job_dir / TOPO_MATRIX_FILE)
        files[1].write_text(t.topo_matrix)
    return files


def format_links(t: Topology) -> str:
    labels = [f"GPU{g['index']}" for g in t.gpus]
    lines = ["\t".join(["", *labels])]
    lines += ["\t".join([label, *row]) for label, row in zip(labels, t.links)]
    return "\n".join(lines)


def run(cfg: Config, env: DistEnv, reporter: StepReporter) -> dict:
    """Rank 0 prints what the orchestrator also records for every GPU run, plus NVLink counts as metrics."""
    if not env.is_main:
        return {"metrics": {}}
    t = collect_topology()
    print(json.dumps(topology_tags(t), indent=2) + "\n" + format_links(t), flush=True)
    metrics = {"gpu_count": float(len(t.gpus))}
    metrics.update({f"nvlinks/gpu{i}_gpu{j}": float(link[2:]) if link.startswith("NV") else 0.0
                    for i, row in enumerate(t.links) for j, link in enumerate(row) if i < j})
    return {"metrics": metrics}
