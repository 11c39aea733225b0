"""The element-wise kernels microbenchmark's config and checks; its code is
parbench.workloads.microbench.elementwise."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List

from parbench.config import ConfigError
from parbench.config.dims import ParallelDims
from parbench.config.schema import Config
from parbench.dtypes import DTYPE_NAMES
from parbench.workloads.registry import WORKLOADS, WorkloadSpec
from parbench.workloads.specs.microbench import MICROBENCH, check_iterations, parse_size

# kernel -> elements it reads and writes per element of its output: its minimum bytes' count
MOVED = {"layer_norm": 2, "rms_norm": 2, "add": 3, "gelu_tanh": 2, "swiglu": 3, "rope": 2, "copy": 2}
ELEMENTWISE_KERNELS = tuple(MOVED)
TWO_OPERANDS = ("add", "swiglu")  # the residual; the up projection
ELEMENTWISE_MODES = ("eager", "compiled")
ELEMENTWISE_HEAD = 64  # every width is a multiple of it: rope's and the layout copy's heads


@dataclass
class ElementwiseWorkload:
    name: str = "elementwise"
    kernels: List[str] = field(default_factory=lambda: list(ELEMENTWISE_KERNELS))
    widths: List[int] = field(default_factory=lambda: [128, 1024, 1600, 2048, 4096, 8192])  # a row's elements
    elements: int = 2**25  # of one call's output: its rows are elements // width (2**25: 16,384 tokens of 2,048)
    modes: List[str] = field(default_factory=lambda: list(ELEMENTWISE_MODES))
    rotate_bytes: str = "512M"  # the calls take inputs in turn through at least this many bytes
    dtype: str = "auto"  # bf16 on GPU, fp32 on CPU
    warmup_iters: int = 5
    iters: int = 20


def validate_elementwise(cfg: Config, dims: ParallelDims) -> None:
    w = cfg.workload
    for key, allowed in (("kernels", ELEMENTWISE_KERNELS), ("modes", ELEMENTWISE_MODES)):
        chosen = list(getattr(w, key))
        if not chosen or any(c not in allowed for c in chosen):
            raise ConfigError(f"workload.{key}={chosen}: choose among {', '.join(allowed)}")
    if not w.widths or any(width <= 0 or width % ELEMENTWISE_HEAD for width in w.widths):
        raise ConfigError(f"workload.widths={list(w.widths)}: give positive multiples of {ELEMENTWISE_HEAD} "
                          "(rope and the layout copy work on heads of that width), e.g. workload.widths=[1024,4096]")
    if w.elements < max(w.widths):
        raise ConfigError(f"workload.elements={w.elements} is less than a row of the widest width {max(w.widths)}: "
                          "raise workload.elements")
    if w.dtype not in DTYPE_NAMES:
        raise ConfigError(f"workload.dtype={w.dtype!r}: use auto or one of {', '.join(DTYPE_NAMES)}")
    parse_size(w.rotate_bytes, "rotate_bytes")
    check_iterations(w)
    if "compiled" in w.modes and w.warmup_iters < 1:
        raise ConfigError("workload.modes has compiled, whose kernels compile at their first call: set "
                          "workload.warmup_iters>=1 so that the compile is not timed")


def plan_elementwise(cfg: Config, dims: ParallelDims) -> dict:
    w = cfg.workload
    return {"cases": len(w.kernels) * len(w.widths) * len(w.modes), "elements": w.elements}


WORKLOADS.register("elementwise")(WorkloadSpec(
    schema=ElementwiseWorkload, validate=validate_elementwise, run=MICROBENCH + "elementwise:run",
    plan=plan_elementwise, uses_model=False, summary_metrics=("elementwise_gbps/*",),
))
