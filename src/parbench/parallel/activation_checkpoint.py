"""Activation checkpointing per transformer block: `full` recomputes the whole block in
backward; `selective` saves matmul and attention outputs and recomputes the cheap ops."""

from __future__ import annotations

import torch
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

from parbench.config.schema import Config
from parbench.distenv import DistEnv
from parbench.parallel.model import ParallelModel

_SAVE_OPS = {
    torch.ops.aten.mm.default,
    torch.ops.aten.addmm.default,
    torch.ops.aten.bmm.default,
    torch.ops.aten._scaled_dot_product_efficient_attention.default,
    torch.ops.aten._scaled_dot_product_flash_attention.default,
    torch.ops.aten._scaled_dot_product_cudnn_attention.default,
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default,
}


def _save_matmuls(ctx, op, *args, **kwargs) -> CheckpointPolicy:
    return CheckpointPolicy.MUST_SAVE if op in _SAVE_OPS else CheckpointPolicy.PREFER_RECOMPUTE


def _selective_context():
    return create_selective_checkpoint_contexts(_save_matmuls)


CHECKPOINT_MODES = ("full", "selective")


def checkpointed(block: nn.Module, mode: str) -> nn.Module:
    """The block wrapped to recompute its forward in the backward, all of it or (selective) its cheap ops."""
    kwargs = {"context_fn": _selective_context} if mode == "selective" else {}
    return checkpoint_wrapper(block, preserve_rng_state=False, **kwargs)


def apply(pmodel: ParallelModel, env: DistEnv, cfg: Config) -> ParallelModel:
    for part in pmodel.parts:
        for name, block in list(part.layers.items()):
            part.layers[name] = checkpointed(block, cfg.workload.activation_checkpointing)
    return pmodel


# Before every sharding wrapper, after tp (which must see the plain modules).
