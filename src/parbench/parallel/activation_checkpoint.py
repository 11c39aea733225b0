"""Activation checkpointing per transformer block: `full` recomputes the whole block in
backward; `selective` saves matmul (an MoE's grouped GEMMs among them) and attention outputs and recomputes the
cheap ops."""

from __future__ import annotations

import torch
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

from parbench.config.schema import Config
from parbench.distenv import DistEnv
from parbench.parallel.model import ParallelModel

_SAVE_OPS = {
    torch.ops.aten.mm.default,
    torch.ops.aten.addmm.default,
    torch.ops.aten.bmm.default,
    torch.ops.aten._grouped_mm.default,
    torch.ops.aten._scaled_dot_product_efficient_attention.default,
    torch.ops.aten._scaled_dot_product_flash_attention.default,
    torch.ops.aten._scaled_dot_product_cudnn_attention.default,
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default,
}


def _save_matmuls(ctx, op, *args, **kwargs) -> CheckpointPolicy:
    return CheckpointPolicy.MUST_SAVE if op in _SAVE_OPS else CheckpointPolicy.PREFER_RECOMPUTE


def _selective_context():
    return create_selective_checkpoint_contexts(_save_matmuls)


def apply(pmodel: ParallelModel, env: DistEnv, cfg: Config) -> ParallelModel:
    mode = cfg.workload.activation_checkpointing
    kwargs = {"context_fn": _selective_context} if mode == "selective" else {}
    for part in pmodel.parts:
        for name, block in list(part.layers.items()):
            part.layers[name] = checkpoint_wrapper(block, preserve_rng_state=False, **kwargs)
    return pmodel


# Before every sharding wrapper, after tp (which must see the plain modules).
