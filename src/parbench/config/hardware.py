"""Hardware profiles: detect local GPUs (without initialising CUDA) and resolve hardware=auto."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, fields, replace
from pathlib import Path

from parbench.config import ConfigError
from parbench.config.schema import HardwareConfig, load_presets
from parbench.paths import CONF_DIR


@dataclass(frozen=True)
class GpuInfo:
    name: str
    memory_mib: int


def detect_gpus() -> list[GpuInfo]:
    """Local NVIDIA GPUs via nvidia-smi; the orchestrator never initialises CUDA itself."""
    if not shutil.which("nvidia-smi"):
        return []
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    gpus = [GpuInfo(name.strip(), int(float(mem))) for name, mem in
            (line.rsplit(",", 1) for line in out.strip().splitlines() if "," in line)]
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        gpus = gpus[: len([v for v in visible.split(",") if v.strip()])]
    return gpus


def load_profiles(conf_dir: Path = CONF_DIR) -> dict[str, HardwareConfig]:
    """Every conf/hardware/*.yaml except auto, as typed profiles."""
    return load_presets("hardware", HardwareConfig, skip="auto", conf_dir=conf_dir)


def match_profile(gpu_name: str, profiles: dict[str, HardwareConfig]) -> HardwareConfig | None:
    """The profile whose longest `match` substring occurs in the GPU name."""
    best, best_len = None, 0
    for profile in profiles.values():
        for pattern in profile.match:
            if pattern.lower() in gpu_name.lower() and len(pattern) > best_len:
                best, best_len = profile, len(pattern)
    return best


def resolve_hardware(requested: HardwareConfig, gpus: list[GpuInfo]) -> HardwareConfig:
    """Turn hardware=auto into a concrete profile; fill gpus_per_node=-1 from the detected count."""
    hw = requested
    if requested.name == "auto":
        hw = _auto_profile(requested, gpus)
    if hw.gpus_per_node == -1:
        if hw.device_type == "cpu":
            hw = replace(hw, gpus_per_node=2)
        elif not gpus:
            raise ConfigError(f"hardware={hw.name} with gpus_per_node=-1 needs visible GPUs, and none were "
                              "found: set hardware.gpus_per_node=N for the machine you plan for")
        else:
            hw = replace(hw, gpus_per_node=len(gpus))
    return hw


def _auto_profile(requested: HardwareConfig, gpus: list[GpuInfo]) -> HardwareConfig:
    profiles = load_profiles()
    if not gpus:
        base = profiles["cpu"]
    else:
        base = match_profile(gpus[0].name, profiles)
        if base is None:
            if not requested.peak_tflops:
                raise ConfigError(
                    f"unknown GPU {gpus[0].name!r}: no conf/hardware profile matches it. Pass its dense peak, "
                    "e.g. hardware.peak_tflops={bf16:989,fp32:67}, or add conf/hardware/<name>.yaml "
                    "with a `match` entry")
            base = HardwareConfig(name=gpus[0].name, memory_gb=gpus[0].memory_mib / 1024)
    # Fields the user set on hardware=auto (non-default) override the detected profile.
    defaults = HardwareConfig(name="auto", device_type="auto", backend="auto")
    overrides = {f.name: getattr(requested, f.name) for f in fields(HardwareConfig)
                 if f.name != "name" and getattr(requested, f.name) != getattr(defaults, f.name)}
    return replace(base, **overrides)


def require_peak(hw: HardwareConfig, dtype: str) -> float:
    """The dense peak TFLOP/s per device for dtype, which MFU and fraction-of-peak figures divide by."""
    if dtype not in hw.peak_tflops:
        raise ConfigError(f"hardware={hw.name} has no {dtype} peak: set hardware.peak_tflops.{dtype}=<dense "
                          "TFLOP/s per device> or choose another workload.dtype")
    return hw.peak_tflops[dtype]
