"""Fully sharded data parallel: FSDP2 `fully_shard` per transformer block, then the root, on
`DistEnv.data_mesh()`: fsdp (x cp) ranks shard, and with parallel.dp > 1 as well the 2-D mesh
(dp, fsdp) makes it HSDP. Tensor-parallel DTensor parameters are sharded again over that mesh (2D)."""

from __future__ import annotations

import torch
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

from parbench.config.schema import Config
from parbench.distenv import DistEnv
from parbench.parallel.model import ParallelModel
from parbench.dtypes import torch_dtype


def mixed_precision_policy(cfg: Config) -> MixedPrecisionPolicy:
    """Compute in the workload's dtype, reduce gradients in fp32."""
    return MixedPrecisionPolicy(param_dtype=torch_dtype(cfg.workload.dtype), reduce_dtype=torch.float32)


def apply(pmodel: ParallelModel, env: DistEnv, cfg: Config) -> ParallelModel:
    mesh = env.data_mesh()
    policy = mixed_precision_policy(cfg)
    reshard = cfg.parallel.fsdp_reshard_after_forward
    for part in pmodel.parts:
        layers = list(part.layers.values())
        for i, block in enumerate(layers):
            # The last block's parameters are needed again at once by backward: keep them.
            fully_shard(block, mesh=mesh, mp_policy=policy,
                        reshard_after_forward=reshard and i < len(layers) - 1)
        fully_shard(part, mesh=mesh, mp_policy=policy, reshard_after_forward=reshard)
    pmodel.handles_mixed_precision = True
    return pmodel
