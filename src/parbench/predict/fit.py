"""Does a config fit its devices, and if not, what would: each suggestion is a changed config that
the caller's checks accept and the model predicts to fit, named by the overrides that make it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Iterator

from omegaconf import OmegaConf

from parbench.config import ConfigError
from parbench.config.dims import ParallelDims
from parbench.config.host import Capacity, device_capacity
from parbench.config.schema import Config, ParallelConfig
from parbench.fmt import format_metric
from parbench.paths import CONF_DIR
from parbench.predict import predict
from parbench.predict.calibration import Calibration
from parbench.predict.step import Prediction

Check = Callable[[Config], ParallelDims]  # the orchestrator's validation: dims, or ConfigError
MAX_GPUS = 1024


@dataclass(frozen=True)
class Candidate:
    overrides: tuple[str, ...]
    cfg: Config


def preset(name: str) -> ParallelConfig:
    """conf/parallel/<name>.yaml as a typed ParallelConfig."""
    node = OmegaConf.merge(OmegaConf.structured(ParallelConfig), OmegaConf.load(CONF_DIR / "parallel" / f"{name}.yaml"))
    return OmegaConf.to_object(node)


def with_changes(cfg: Config, parallel: ParallelConfig | None = None, **sections: dict) -> Config:
    """A copy of cfg with another parallel layout and/or some fields of hardware/workload changed."""
    new = dataclasses.replace(cfg, parallel=parallel or cfg.parallel)
    for section, fields in sections.items():
        setattr(new, section, dataclasses.replace(getattr(cfg, section), **fields))
    return new


def offloads(parallel: ParallelConfig) -> bool:
    """Host offload: the model does not time its PCIe traffic yet, so it suggests none."""
    return parallel.zero.offload_optimizer or parallel.zero.offload_param


def checkpointing_variants(cfg: Config, change: tuple[str, ...], **sections: dict) -> Iterator[Candidate]:
    """The change as it is, then with selective and with full activation checkpointing."""
    parallel = sections.pop("parallel", None)
    current = getattr(cfg.workload, "activation_checkpointing", None)
    yield Candidate(change, with_changes(cfg, parallel, **sections))
    for mode in ("selective", "full"):
        if current is not None and current != mode:
            workload = {**sections.get("workload", {}), "activation_checkpointing": mode}
            yield Candidate((*change, f"workload.activation_checkpointing={mode}"),
                            with_changes(cfg, parallel, **{**sections, "workload": workload}))


def candidates(cfg: Config) -> Iterator[tuple[str, Candidate]]:
    """The changes worth trying, by kind: activation checkpointing, another parallel preset (with
    or without checkpointing), more GPUs (fewest first, with or without checkpointing)."""
    for c in list(checkpointing_variants(cfg, ()))[1:]:
        yield "ac", c
    for path in sorted((CONF_DIR / "parallel").glob("*.yaml")):
        layout = preset(path.stem)
        if path.stem != cfg.parallel.name and not offloads(layout):
            for c in checkpointing_variants(cfg, (f"parallel={path.stem}",), parallel=layout):
                yield "parallel", c
    hw = cfg.hardware
    if hw.device_type == "cpu":
        return  # CPU ranks share one host: more of them only split the same memory
    gpus, nodes, per_node = hw.nodes * hw.gpus_per_node, hw.nodes, hw.gpus_per_node
    while gpus < MAX_GPUS:
        if per_node < 8:
            per_node *= 2
        else:
            nodes *= 2
        gpus = nodes * per_node
        change = f"hardware.nodes={nodes}" if nodes != hw.nodes else f"hardware.gpus_per_node={per_node}"
        for c in checkpointing_variants(cfg, (change,), hardware={"nodes": nodes, "gpus_per_node": per_node}):
            yield "gpus", c


def fitting(c: Candidate, check: Check, cal: Calibration, limit_gb: float) -> Prediction | None:
    try:
        dims = check(c.cfg)
    except ConfigError:
        return None
    p = predict(c.cfg, dims, cal)
    return p if p.memory.total_gb <= limit_gb else None


def suggestions(cfg: Config, check: Check, cal: Calibration, limit_gb: float) -> list[str]:
    """Per kind of change, the fitting one with the fewest changes, fastest among those (for more
    GPUs: the fewest GPUs)."""
    best: dict[str, tuple[int, float, str]] = {}
    for kind, c in candidates(cfg):
        if kind == "gpus" and kind in best:
            break  # the fewest GPUs that fit are found; the rest come after them
        p = fitting(c, check, cal, limit_gb)
        if p is None:
            continue
        rank = (len(c.overrides), -p.tokens_per_s)
        if kind not in best or rank < best[kind][:2]:
            gpus = c.cfg.hardware.nodes * c.cfg.hardware.gpus_per_node
            label = " ".join(c.overrides)
            label = f"{gpus} GPUs ({label})" if kind == "gpus" else label
            best[kind] = (*rank, f"{label}: {format_metric('memory_gb', p.memory.total_gb)}")
    return [best[k][2] for k in ("parallel", "ac", "gpus") if k in best]


@dataclass(frozen=True)
class Fit:
    """The fit check's verdict: ok None when the capacity is unknown (nothing checked)."""

    ok: bool | None
    message: str


CPU_ADVICE = ("a smaller model (e.g. model=tiny), fewer ranks (hardware.gpus_per_node=1), or plan it for GPUs "
              "without launching: dry_run=true hardware=h100_sxm")


def check_fit(cfg: Config, prediction: Prediction, check: Check, cal: Calibration) -> Fit:
    """Does the predicted memory per device fit its capacity less the allocator margin; if not, what would."""
    need = format_metric("memory_gb", prediction.memory.total_gb)
    overhead = (f" (with {format_metric('memory_gb', prediction.memory.overhead_gb)} runtime overhead)"
                if prediction.memory.overhead_gb else "")
    cap: Capacity | None = device_capacity(cfg.hardware)
    if cap is None:
        return Fit(None, f"needs {need} per device; hardware={cfg.hardware.name} gives no memory_gb, so the fit "
                         "is not checked")
    if prediction.memory.total_gb <= cap.usable_gb:
        return Fit(True, f"fits: needs {need} per device{overhead}; {cap.describe()}")
    tries = suggestions(cfg, check, cal, cap.usable_gb)
    if cfg.hardware.device_type == "cpu":
        tries.append(CPU_ADVICE)
    advice = ("; try " + ", or ".join(tries) if tries
              else "; nothing the model tried fits (more GPUs, sharding, checkpointing)")
    return Fit(False, f"does not fit: needs {need} per device{overhead}; {cap.describe()}{advice}")
