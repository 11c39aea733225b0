"""Data parallel: DistributedDataParallel over the mesh's dp dimension (when not sharded)."""

from __future__ import annotations

from torch.nn.parallel import DistributedDataParallel as DDP

from parbench.config.schema import Config
from parbench.parallel import STRATEGIES, DistEnv, ParallelModel, Strategy, fsdp, zero
from parbench.parallel.dims import ParallelDims


def enabled(dims: ParallelDims, cfg: Config) -> bool:
    # Context-parallel ranks hold the same parameters too: their gradients are averaged as well.
    # Where FSDP2 runs (fsdp > 1, or dp/cp replicas of tp-sharded parameters) or the DeepSpeed
    # engine (parallel.zero.stage set), that does it instead.
    return dims.dp * dims.cp > 1 and not fsdp.enabled(dims, cfg) and not zero.enabled(dims, cfg)


def apply(pmodel: ParallelModel, env: DistEnv, cfg: Config) -> ParallelModel:
    group = env.mesh["dp", "fsdp", "cp"]._flatten().get_group()  # fsdp is 1 here: dp x cp
    device_ids = [env.device.index] if env.device.type == "cuda" else None
    pmodel.parts = [DDP(part, process_group=group, device_ids=device_ids) for part in pmodel.parts]
    return pmodel


STRATEGIES.register("dp")(Strategy(order=50, enabled=enabled, apply=apply))
