"""Data parallel: DistributedDataParallel over the mesh's dp dimension (when not sharded)."""

from __future__ import annotations

from torch.nn.parallel import DistributedDataParallel as DDP

from parbench.config.schema import Config
from parbench.distenv import DistEnv
from parbench.parallel.model import ParallelModel


def apply(pmodel: ParallelModel, env: DistEnv, cfg: Config) -> ParallelModel:
    group = env.mesh["dp", "fsdp", "cp"]._flatten().get_group()  # fsdp is 1 here: dp x cp
    device_ids = [env.device.index] if env.device.type == "cuda" else None
    pmodel.parts = [DDP(part, process_group=group, device_ids=device_ids) for part in pmodel.parts]
    return pmodel
