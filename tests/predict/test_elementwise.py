"""The element-wise work by kernel (predict/elementwise.py): a kernel's rate read at its row's width among the
widths of its kind, the residual stream's bytes under autocast, and a profile without rates streaming every
kernel at the memory's bandwidth."""

from __future__ import annotations

import pytest

from parbench.predict.calibration import Calibration
from parbench.predict.elementwise import elementwise_seconds, kernel_gbps, layer_traffic
from parbench.predict.layout import Layout
from parbench.prepare import validate
from conftest import compose

# H200, compiled LayerNorm (docs/results/2026-11-29_elementwise31): a row of a power of two fills the kernel's blocks
LAYER_NORM = {"1024": 3722.0, "1536": 1389.0, "2048": 2508.0, "2560": 1276.0, "4096": 2669.0}
CAL = Calibration(source="test", membw_gbps=4000.0, elementwise_gbps={"compiled": {"layer_norm": LAYER_NORM}})


def layout(*overrides: str, gpus: int = 1) -> Layout:
    cfg = compose("workload=train", "hardware=h100_sxm", f"hardware.gpus_per_node={gpus}", *overrides)
    return Layout.of(cfg, validate(cfg, None))


def test_a_row_is_read_among_the_widths_of_its_kind():
    """GPT-2 XL's 1,600 between 1,536 and 2,560 (both slow), not on the line to 2,048; beyond the table: its end."""
    assert kernel_gbps(CAL, True, "layer_norm", 1600) == pytest.approx(1389.0 + (1276.0 - 1389.0) * 64 / 1024)
    assert kernel_gbps(CAL, True, "layer_norm", 3072) == 1276.0  # past the widest of its kind
    assert kernel_gbps(CAL, True, "layer_norm", 96) == 3722.0  # below every width of its kind: along them all
    assert kernel_gbps(CAL, True, "layer_norm", 8192) == 2669.0 and kernel_gbps(CAL, True, "layer_norm", 512) == 3722.0
    assert kernel_gbps(CAL, False, "layer_norm", 1600) == 4000.0  # no eager rates: the memory's bandwidth
    assert kernel_gbps(CAL, True, "gelu_tanh", 6400) == 4000.0


def test_autocast_streams_the_residual_in_fp32_and_casts_each_norm():
    """A DDP step under bf16 autocast: norms and adds on fp32, each eager norm's output cast for its GEMM (a
    compiled norm writes bf16 itself); FSDP holds bf16 weights, so its stream is bf16; inference runs none."""
    h = 1600  # GPT-2 XL
    ddp = layout("model=gpt2_xl", "parallel=dp")
    eager, compiled = layer_traffic(ddp, False), layer_traffic(ddp, True)
    assert eager["layer_norm", h] == 2 * h * (4 + 4) and eager["cast", h] == 2 * h * (4 + 2)
    assert compiled["layer_norm", h] == 2 * h * (4 + 2) and ("cast", h) not in compiled
    llama = layer_traffic(layout("model=llama3_2_1b", "parallel=dp"), False)  # no biases: the adds alone
    assert llama["add", 2048] == 2 * 2048 * (2 * 4 + 2)  # fp32 residual and bf16 GEMM output in, fp32 out
    fsdp = layer_traffic(layout("model=gpt2_xl", "parallel=fsdp", gpus=2), False)
    assert fsdp["layer_norm", h] == 2 * h * (2 + 2) and ("cast", h) not in fsdp
    inference = layer_traffic(ddp, False, training=False)
    assert inference["layer_norm", h] == 2 * h * (2 + 2) and inference["add", h] == 2 * h * 3 * 2


def test_each_family_runs_its_own_kernels():
    llama, gpt2 = (layer_traffic(layout(f"model={m}"), True) for m in ("llama3_2_1b", "gpt2_xl"))
    assert {k for k, _ in llama} == {"rms_norm", "add", "rope", "swiglu"}
    assert {k for k, _ in gpt2} == {"layer_norm", "add", "gelu_tanh"}
    assert ("swiglu", 8192) in llama and ("rope", 2048) in llama  # the FFN's row, the q heads' row
    tp = layer_traffic(layout("model=llama3_2_1b", "parallel=tp", gpus=2), True)
    assert ("swiglu", 4096) in tp and ("rope", 1024) in tp  # each rank's share of the row


def test_a_slower_kernel_takes_its_bytes_longer():
    traffic = {("layer_norm", 1600): 1e9, ("add", 1600): 1e9}
    at_membw = elementwise_seconds(Calibration(source="test", membw_gbps=4000.0), True, traffic, 1.0)
    assert at_membw == pytest.approx(2e9 / 4e12)
    assert elementwise_seconds(CAL, True, traffic, 1.0) == pytest.approx(1e9 / (kernel_gbps(CAL, True, "layer_norm", 1600) * 1e9)
                                                                         + 1e9 / 4e12)
