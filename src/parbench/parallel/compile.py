"""torch.compile per transformer block and of the loss (as torchtitan does): fuses the pointwise
ops between matmuls, and the loss's fp32 cast, log-softmax and gather over the vocabulary;
compiling blocks rather than the whole model keeps the sharding wrappers outside.

A block's input may be an AsyncCollectiveTensor: under tp/sp the vocab-parallel embedding's
output is the result of an async all-reduce / reduce-scatter (DTensor.to_local() after
`redistribute(async_op=True)`). Newer torch (2.13 here; pytorch#179849, after 2.11) has
AOTAutograd unwrap such an input with `trigger_wait()`, which returns the inner tensor without
the wrapper's autograd edge: the compiled block returns no gradient for its input, and the
embedding's backward gets none (DTensor's Redistribute.backward then fails on plain zeros).
Each compiled block therefore waits on such inputs before its compiled region, keeping the
gradient edge."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.distributed._functional_collectives import AsyncCollectiveTensor
from torch.utils._pytree import tree_map_only

from parbench.config.schema import Config
from parbench.distenv import DistEnv
from parbench.parallel.model import ParallelModel


class WaitKeepingGrad(torch.autograd.Function):
    """Waits on an AsyncCollectiveTensor and returns the plain tensor it holds; the gradient
    passes through unchanged (AsyncCollectiveTensor.wait() alone detaches, pytorch#151240)."""

    @staticmethod
    def forward(ctx, x: AsyncCollectiveTensor) -> torch.Tensor:
        return x.wait()

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        return grad


def wait_async_inputs(module: nn.Module, args: tuple, kwargs: dict[str, Any]) -> tuple[tuple, dict[str, Any]]:
    """Forward pre-hook: the block's AsyncCollectiveTensor arguments, waited on."""
    return tree_map_only(AsyncCollectiveTensor, WaitKeepingGrad.apply, (args, kwargs))


def compile_block(block: nn.Module) -> nn.Module:
    compiled = torch.compile(block, fullgraph=True)
    # On the compiled wrapper, so the hook runs eagerly, outside the compiled region.
    compiled.register_forward_pre_hook(wait_async_inputs, with_kwargs=True)
    return compiled


def apply(pmodel: ParallelModel, env: DistEnv, cfg: Config) -> ParallelModel:
    for part in pmodel.parts:
        for name, block in list(part.layers.items()):
            part.layers[name] = compile_block(block)
    if env.dims.tp == 1:  # under tp the logits are DTensors in loss_parallel: left eager
        pmodel.loss_fn = torch.compile(pmodel.loss_fn)
    return pmodel


# After activation checkpointing (40) so the checkpointed block is what gets compiled,
# before the data-parallel wrappers (50, 60).
