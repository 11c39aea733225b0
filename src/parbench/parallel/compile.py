"""torch.compile per transformer block and of the loss (as torchtitan does): fuses the pointwise
ops between matmuls, and the loss's fp32 cast, log-softmax and gather over the vocabulary;
compiling blocks rather than the whole model keeps the sharding wrappers outside."""

from __future__ import annotations

import torch

from parbench.config.schema import Config
from parbench.parallel import STRATEGIES, DistEnv, ParallelModel, Strategy
from parbench.parallel.dims import ParallelDims


def enabled(dims: ParallelDims, cfg: Config) -> bool:
    return bool(getattr(cfg.workload, "compile", False))


def apply(pmodel: ParallelModel, env: DistEnv, cfg: Config) -> ParallelModel:
    for part in pmodel.parts:
        for name, block in list(part.layers.items()):
            part.layers[name] = torch.compile(block, fullgraph=True)
    if env.dims.tp == 1:  # under tp the logits are DTensors in loss_parallel: left eager
        pmodel.loss_fn = torch.compile(pmodel.loss_fn)
    return pmodel


# After activation checkpointing (40) so the checkpointed block is what gets compiled,
# before the data-parallel wrappers (50, 60).
STRATEGIES.register("compile")(Strategy(order=45, enabled=enabled, apply=apply))
