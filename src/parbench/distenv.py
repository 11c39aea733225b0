"""This rank's distributed identity: rank, device and the one DeviceMesh every strategy and workload uses."""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch
from torch.distributed.device_mesh import DeviceMesh

from parbench.config.dims import ParallelDims


@dataclass
class DistEnv:
    """This rank's view of the job: where it runs and the mesh it belongs to."""

    rank: int
    local_rank: int
    world_size: int
    device: torch.device
    dims: ParallelDims
    mesh: DeviceMesh | None  # None: a single process without a process group

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def data_mesh(self) -> DeviceMesh:
        """The ranks that hold the same parameters and average their gradients: (dp, fsdp), with cp
        folded into fsdp since cp ranks train on other tokens of the same sequences (torchtitan's
        dp_shard_cp). 1-D (fsdp*cp) without dp replicas, else 2-D (dp, fsdp*cp) for HSDP."""
        if self.dims.cp == 1:
            shard, shard_name = self.mesh["fsdp"], "fsdp"
        else:
            shard_name = "fsdp_cp"
            shard = self.mesh["fsdp", "cp"]._flatten(shard_name)
        return self.mesh["dp", shard_name] if self.dims.dp > 1 else shard

    def data_rank(self) -> int:
        """Index of this rank's batch among the dims.data_parallel batches of a step."""
        return self.mesh["dp"].get_local_rank() * self.dims.fsdp + self.mesh["fsdp"].get_local_rank()


def is_dtensor(tensor: object) -> bool:
    """isinstance(tensor, DTensor), without importing DTensor's modules (a second of CPU per rank)
    in a job where no strategy made one: none exists until a strategy imported them."""
    module = sys.modules.get("torch.distributed.tensor")
    return module is not None and isinstance(tensor, module.DTensor)
