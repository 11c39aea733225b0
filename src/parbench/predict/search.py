"""The layouts `parbench plan` tries for one model on one machine: dp x fsdp x tp x pp x cp x ep,
the pipeline schedule and its micro-batches, and activation checkpointing, at a fixed global batch
so that tokens/s compare. Each is a changed Config; the caller's checks refuse the invalid ones."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Iterator

from parbench.config.schema import Config, ParallelConfig

TP_DEGREES = (1, 2, 4, 8)  # within a node: tp's per-layer collectives need the fastest links
CP_DEGREES = (1, 2, 4)
MAX_PP = 32
AC_MODES = ("none", "selective", "full")
# (schedule, stages per rank, micro-batches as multiples of pp)
PP_SCHEDULES = (("1f1b", 1, (1, 2, 4)), ("interleaved_1f1b", 2, (1, 2, 4)), ("zero_bubble", 2, (2,)),
                ("gpipe", 1, (2,)))


@dataclass(frozen=True)
class Option:
    parallel: ParallelConfig
    activation_checkpointing: str
    global_batch_size: int

    def label(self) -> str:
        """plan_dp1_fsdp8_tp1_pp1_cp1_ep1_ac-full (a file name and a readable run label)."""
        p = self.parallel
        degrees = "_".join(f"{k}{getattr(p, k)}" for k in ("dp", "fsdp", "tp", "pp", "cp", "ep"))
        pipe = f"_{p.pp_schedule}-mb{p.pp_microbatches}" if p.pp > 1 else ""
        return f"plan_{degrees}{pipe}_ac-{self.activation_checkpointing}"

    def apply(self, cfg: Config) -> Config:
        workload = dataclasses.replace(cfg.workload, activation_checkpointing=self.activation_checkpointing,
                                       global_batch_size=self.global_batch_size)
        return dataclasses.replace(cfg, parallel=self.parallel, workload=workload)

    def preset(self) -> dict:
        """The Hydra config (`# @package _global_`) that selects this layout in a sweep."""
        keys = ("dp", "fsdp", "tp", "pp", "cp", "ep", "sp", "pp_schedule", "pp_microbatches", "pp_stages_per_rank")
        return {"parallel": {"name": self.label(), **{k: getattr(self.parallel, k) for k in keys}},
                "workload": {"activation_checkpointing": self.activation_checkpointing,
                             "global_batch_size": self.global_batch_size}}


def global_batch(cfg: Config) -> int:
    """The step's sequences every layout processes: workload.global_batch_size, else batch_size
    sequences per device."""
    w, hw = cfg.workload, cfg.hardware
    return w.global_batch_size or w.batch_size * hw.nodes * hw.gpus_per_node


def data_splits(data: int, per_node: int) -> Iterator[tuple[int, int]]:
    """(dp, fsdp): DDP, FSDP over all, and HSDP sharding within a node's share."""
    yield data, 1
    if data > 1:
        yield 1, data
    if 1 < per_node < data and data % per_node == 0:
        yield data // per_node, per_node


def pipelines(pp: int) -> Iterator[tuple[str, int, int]]:
    if pp == 1:
        yield "1f1b", 1, 4  # unused without pp
        return
    for schedule, stages, multiples in PP_SCHEDULES:
        for k in multiples:
            yield schedule, stages, k * pp


def degrees(cfg: Config) -> Iterator[tuple[int, int, int, int, int]]:
    """(tp, cp, pp, dp, fsdp) whose product is the device count."""
    world, per_node = cfg.hardware.nodes * cfg.hardware.gpus_per_node, cfg.hardware.gpus_per_node
    for tp in (t for t in TP_DEGREES if t <= per_node and world % t == 0):
        for cp in (c for c in CP_DEGREES if world % (tp * c) == 0):
            for pp in (p for p in range(1, min(MAX_PP, cfg.model.layers) + 1)
                       if world % (tp * cp * p) == 0 and cfg.model.layers % p == 0):
                for dp, fsdp in data_splits(world // (tp * cp * pp), max(1, per_node // (tp * cp))):
                    yield tp, cp, pp, dp, fsdp


def expert_degrees(cfg: Config, dp: int, fsdp: int, cp: int) -> tuple[int, ...]:
    if not cfg.model.experts:
        return (1,)
    return tuple(e for e in (1, 2, 4, 8) if cfg.model.experts % e == 0 and (dp * fsdp * cp) % e == 0)


def options(cfg: Config) -> Iterator[Option]:
    base, gbs = cfg.parallel, global_batch(cfg)
    for tp, cp, pp, dp, fsdp in degrees(cfg):
        for ep in expert_degrees(cfg, dp, fsdp, cp):
            for schedule, stages, micro in pipelines(pp):
                parallel = dataclasses.replace(
                    base, name="plan", dp=dp, fsdp=fsdp, tp=tp, pp=pp, cp=cp, ep=ep, sp=tp > 1,
                    pp_schedule=schedule, pp_microbatches=micro, pp_stages_per_rank=stages,
                    zero=dataclasses.replace(base.zero, stage=None))
                for ac in AC_MODES:
                    yield Option(parallel, ac, gbs)
