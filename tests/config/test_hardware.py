"""hardware=auto picks the profile of the detected GPU; an unknown GPU needs its peak."""

from __future__ import annotations

import pytest
from conftest import compose

from parbench.config import ConfigError
from parbench.config.hardware import GpuInfo, load_profiles, match_profile


@pytest.mark.parametrize("gpu, profile", [
    ("NVIDIA H100 80GB HBM3", "h100_sxm"), ("NVIDIA H100 PCIe", "h100_pcie"), ("NVIDIA H200", "h200"),
    ("NVIDIA A100-SXM4-80GB", "a100_80g"), ("NVIDIA A100-SXM4-40GB", "a100_40g"),
    ("NVIDIA A100 80GB PCIe", "a100_80g"), ("NVIDIA A40", "a40"), ("Tesla T4", "t4"),
    ("NVIDIA GeForce RTX 3080", "rtx3080"), ("NVIDIA RTX A4000", None), ("NVIDIA B200", None),
])
def test_gpu_names_select_profiles(gpu, profile):
    found = match_profile(gpu, load_profiles())
    assert (found.name if found else None) == profile


def test_auto_on_gpus_uses_profile_peak_bf16_and_all_gpus():
    cfg = compose("hardware=auto", gpus=[GpuInfo("NVIDIA H200", 143771)] * 2)
    assert cfg.hardware.name == "h200" and cfg.hardware.gpus_per_node == 2
    assert cfg.hardware.backend == "nccl" and cfg.hardware.peak_tflops["bf16"] == 989
    assert cfg.workload.dtype == "bf16"


def test_auto_respects_gpus_per_node_override():
    cfg = compose("hardware=auto", "hardware.gpus_per_node=1", gpus=[GpuInfo("NVIDIA H200", 143771)] * 2)
    assert cfg.hardware.gpus_per_node == 1


def test_auto_without_gpus_is_cpu_gloo_fp32():
    cfg = compose("hardware=auto", gpus=[])
    assert (cfg.hardware.name, cfg.hardware.backend, cfg.workload.dtype) == ("cpu", "gloo", "fp32")


def test_unknown_gpu_is_an_error_unless_peak_given():
    gpus = [GpuInfo("NVIDIA B200", 183000)]
    with pytest.raises(ConfigError, match="unknown GPU 'NVIDIA B200'.*hardware.peak_tflops"):
        compose("hardware=auto", gpus=gpus)
    cfg = compose("hardware=auto", "+hardware.peak_tflops={bf16:2250}", gpus=gpus)
    assert cfg.hardware.peak_tflops == {"bf16": 2250} and cfg.hardware.gpus_per_node == 1
