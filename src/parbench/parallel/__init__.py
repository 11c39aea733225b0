"""Parallel strategies: each module registers a Strategy; `parallelize` applies the enabled ones
in their `order` on one DeviceMesh built from ParallelDims."""

from __future__ import annotations

import os
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Callable, Iterator

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.tensor import DTensor

from parbench.config.schema import Config, ParallelConfig
from parbench.parallel.dims import MESH_DIMS, ParallelDims
from parbench.registry import Registry


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


def token_cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean next-token loss over [batch, seq, vocab] logits, computed in fp32. Vocab-parallel
    logits (tp, inside loss_parallel) give a replicated DTensor: its local value is the loss."""
    loss = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten())
    return loss.to_local() if isinstance(loss, DTensor) else loss


@dataclass
class ParallelModel:
    """The model after every enabled strategy. `parts` are the modules this rank holds (several
    under pipeline parallelism); `forward_backward(inputs, labels) -> loss` runs one step's
    forward and backward, and a strategy that changes how a step runs (pp) replaces it.
    `step_contexts` make the context managers (loss_parallel, context_parallel) that a step's
    forward, loss and backward run inside: whoever sets forward_backward enters `step_context()`.
    A strategy whose engine owns the optimizer (DeepSpeed) sets `backward(loss)` and
    `optimizer_step()` (the step, then zeroing the gradients); otherwise the workload builds one."""

    parts: list[nn.Module]
    forward_backward: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = token_cross_entropy
    handles_mixed_precision: bool = False
    backward: Callable[[torch.Tensor], None] = torch.Tensor.backward
    optimizer_step: Callable[[], None] | None = None
    # Measurements of the step just run, read after it (pp: bubble_pct), and figures the layout
    # fixes (pp: bubble_pct_theory); the train workload logs both.
    step_metrics: Callable[[], dict[str, float]] = dict
    metrics: dict[str, float] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    step_contexts: list[Callable[[], AbstractContextManager]] = field(default_factory=list)

    @contextmanager
    def step_context(self) -> Iterator[None]:
        with ExitStack() as stack:
            for make in self.step_contexts:
                stack.enter_context(make())
            yield

    def parameters(self):
        for part in self.parts:
            yield from part.parameters()


@dataclass(frozen=True)
class Strategy:
    """One parallelism. `order` fixes composition: the pp split first, then strategies that
    rewrite modules (tp, activation checkpointing, ep), then the dp/fsdp wrappers, each applied
    to every part."""

    order: int
    enabled: Callable[[ParallelDims, Config], bool]
    apply: Callable[[ParallelModel, DistEnv, Config], ParallelModel]


STRATEGIES: Registry[Strategy] = Registry("parallel strategy", "parallel")


def parallelize(model: nn.Module, env: DistEnv, cfg: Config) -> ParallelModel:
    """Apply every enabled strategy to the model, in order."""
    pmodel = ParallelModel(parts=[model])
    for name in sorted(STRATEGIES.names(), key=lambda n: STRATEGIES.get(n).order):
        strategy = STRATEGIES.get(name)
        if strategy.enabled(env.dims, cfg):
            pmodel = strategy.apply(pmodel, env, cfg)
    return pmodel


# Importing the strategy modules registers them.
from parbench.parallel import activation_checkpoint, compile, cp, dp, ep, fsdp, pp, tp, zero  # noqa: E402,F401
