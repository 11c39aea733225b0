"""Joining the process group torchrun set up and building the mesh of the job's parallel degrees."""

from __future__ import annotations

import os
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

from parbench.config.dims import MESH_DIMS, ParallelDims
from parbench.config.schema import Config, ParallelConfig
from parbench.distenv import DistEnv


def init_distributed(cfg: Config, timeout_s: float, parallel: ParallelConfig | None = None) -> DistEnv:
    """Join the process group torchrun set up and build the mesh (dims pp, dp, fsdp, cp, tp) of
    `parallel` (default cfg.parallel)."""
    rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    if cfg.hardware.device_type == "cuda":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    dist.init_process_group(cfg.hardware.backend, timeout=timedelta(seconds=timeout_s),
                            device_id=device if device.type == "cuda" else None)
    dims = ParallelDims.from_config(parallel or cfg.parallel, world_size)
    mesh = init_device_mesh(device.type, dims.mesh_shape(), mesh_dim_names=MESH_DIMS)
    return DistEnv(rank, local_rank, world_size, device, dims, mesh)


def single_process_env(cfg: Config) -> DistEnv:
    """This process alone, joining no process group: for an engine that runs its own (vLLM)."""
    device = torch.device("cuda", 0) if cfg.hardware.device_type == "cuda" else torch.device("cpu")
    dims = ParallelDims(pp=1, dp=1, fsdp=1, cp=1, tp=1, ep=1)
    return DistEnv(0, 0, 1, device, dims, None)
