"""One training layout as the model sees it: the degrees, which strategies the table turns on, the
batch per device and micro-batch, and which link each parallel group's collectives cross."""

from __future__ import annotations

from dataclasses import dataclass

from parbench.config.batch import local_batch
from parbench.config.dims import MESH_DIMS, ParallelDims
from parbench.config.schema import Config
from parbench.dtypes import ITEMSIZE, resolve_dtype
from parbench.parallel.specs import STRATEGIES, theoretical_bubble


@dataclass(frozen=True)
class Layout:
    cfg: Config
    dims: ParallelDims
    enabled: frozenset[str]  # the strategies the table turns on for this layout

    @classmethod
    def of(cls, cfg: Config, dims: ParallelDims) -> "Layout":
        on = frozenset(n for n in STRATEGIES.names() if STRATEGIES.get(n).enabled(dims, cfg))
        return cls(cfg, dims, on)

    @property
    def dtype(self) -> str:
        return resolve_dtype(self.cfg.workload.dtype, self.cfg.hardware.device_type)

    @property
    def dtype_bytes(self) -> int:
        return ITEMSIZE[self.dtype]

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
