"""One layout as the model sees it, read once: the degrees, which strategies the table turns on, the
model's parameter shapes and counts and the largest stage's share of them, what the host dispatches
per layer, the batch per device and micro-batch, and which link each parallel group's collectives cross. Everything after (costs,
communication, memory) reads these instead of walking the config again."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from parbench.config.batch import local_batch
from parbench.config.dims import MESH_DIMS, ParallelDims
from parbench.config.schema import Config
from parbench.dtypes import ITEMSIZE, resolve_dtype
from parbench.models import ParamCounts
from parbench.models.dispatch_table import FamilyDispatch, family_dispatch
from parbench.parallel.specs import STRATEGIES, theoretical_bubble
from parbench.models.shapes import (FP32, FamilyShapes, ModelShapes, Named, family_shapes, model_shapes, param_counts,
                                    size, tp_split)


@dataclass(frozen=True)
class Layout:
    cfg: Config
    dims: ParallelDims
    enabled: frozenset[str]  # the strategies the table turns on for this layout

    @classmethod
    def of(cls, cfg: Config, dims: ParallelDims) -> "Layout":
        on = frozenset(n for n in STRATEGIES.names() if STRATEGIES.get(n).enabled(dims, cfg))
        return cls(cfg, dims, on)

    @cached_property
    def shapes(self) -> ModelShapes:
        return model_shapes(self.cfg.model)

    @property
    def family(self) -> FamilyShapes:
        return family_shapes(self.cfg.model)

    @cached_property
    def counts(self) -> ParamCounts:
        return param_counts(self.cfg.model)

    @cached_property
    def dispatch(self) -> FamilyDispatch | None:
        """What the host dispatches per layer and per step for this family (None: not counted)."""
        return family_dispatch(self.cfg.model)

    @cached_property
    def block_on_rank(self) -> int:
        """Elements of one block on one tp rank."""
        return size(tp_split(self.shapes.block, self.dims.tp))

    @cached_property
    def stage(self) -> Named:
        """The parameters of the largest pipeline stage on one tp rank: its blocks plus the embeddings
        (first stage) or the norm and output head (last stage), whichever is larger."""
        d = self.dims
        ep = d.ep if "ep" in self.enabled else 1
        per_stage = self.shapes.layers // d.pp
        blocks = [(f"layers.{i}.{n}", s) for i in range(per_stage) for n, s in tp_split(self.shapes.block, d.tp, ep)]
        ends = [tp_split(self.shapes.embedding, d.tp), tp_split(self.shapes.head, d.tp)]
        if d.pp == 1:
            return ends[0] + blocks + ends[1]
        return blocks + max(ends, key=size)

    @property
    def compiled(self) -> bool:
        return bool(getattr(self.cfg.workload, "compile", False))

    @property
    def dtype(self) -> str:
        return resolve_dtype(self.cfg.workload.dtype, self.cfg.hardware.device_type)

    @property
    def dtype_bytes(self) -> int:
        return ITEMSIZE[self.dtype]

    @property
    def autocast(self) -> bool:
        """Whether a training step runs under autocast: fp32 weights and residual stream, GEMMs in the compute
        dtype (FSDP and ZeRO keep weights in it themselves)."""
        return self.dtype_bytes < FP32 and not {"fsdp", "zero"} & self.enabled

    @property
    def local_batch(self) -> int:
        return local_batch(self.cfg.workload, self.dims)

    @property
    def microbatches(self) -> int:
        return self.cfg.parallel.pp_microbatches if self.dims.pp > 1 else 1

    @property
    def stages_per_rank(self) -> int:
        return self.cfg.parallel.pp_stages_per_rank if self.dims.pp > 1 else 1

    @property
    def seq_len(self) -> int:
        return self.cfg.workload.seq_len

    @property
    def microbatch_tokens(self) -> float:
        """Tokens one device computes per micro-batch (its share of the sequence under cp)."""
        return self.local_batch / self.microbatches * self.seq_len / self.dims.cp

    @property
    def tokens_per_step(self) -> int:
        return self.local_batch * self.dims.data_parallel * self.seq_len

    @property
    def activation_checkpointing(self) -> str:
        return getattr(self.cfg.workload, "activation_checkpointing", "none")

    @property
    def host_strategies(self) -> tuple[str, ...]:
        """The HOST_STRATEGIES this layout runs (predict/calibration.py): tp or, with sequence parallel, sp; fsdp; cp."""
        tp = ("sp" if self.cfg.parallel.sp else "tp") if self.dims.tp > 1 else ""
        return tuple(s for s in (tp, "fsdp" if self.dims.fsdp > 1 else "", "cp" if self.dims.cp > 1 else "") if s)

    @property
    def bubble(self) -> float:
        p = self.cfg.parallel
        return theoretical_bubble(p.pp_schedule, self.dims.pp, p.pp_microbatches, p.pp_stages_per_rank) \
            if self.dims.pp > 1 else 0.0

    def crosses_nodes(self, *dims: str) -> bool:
        """Whether a group over these mesh dimensions spans more than one node: ranks are laid out
        with the last mesh dimension (tp) innermost."""
        stride = span = 1
        for name in reversed(MESH_DIMS):
            size = getattr(self.dims, name)
            if name in dims:
                span = stride * size
            stride *= size
        return span > self.cfg.hardware.gpus_per_node
