"""Data parallel: DistributedDataParallel over the mesh's dp dimension (when not sharded)."""

from __future__ import annotations

from torch.nn.parallel import DistributedDataParallel as DDP

from parbench.config.schema import Config
from parbench.parallel import STRATEGIES, DistEnv, ParallelModel, Strategy
from parbench.parallel.dims import ParallelDims


def enabled(dims: ParallelDims, cfg: Config) -> bool:
    # With fsdp > 1, the dp dimension is handled by FSDP2 as HSDP (replicate x shard).
    return dims.dp > 1 and dims.fsdp == 1


def apply(pmodel: ParallelModel, env: DistEnv, cfg: Config) -> ParallelModel:
    group = env.mesh["dp"].get_group()
    device_ids = [env.device.index] if env.device.type == "cuda" else None
    pmodel.parts = [DDP(part, process_group=group, device_ids=device_ids) for part in pmodel.parts]
    return pmodel


STRATEGIES.register("dp")(Strategy(order=50, enabled=enabled, apply=apply))
