"""Activation checkpointing per transformer block: `full` recomputes the whole block in
backward; `selective` saves matmul (an MoE's grouped GEMMs among them) and attention outputs and recomputes the
cheap ops."""

from __future__ import annotations

import torch
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
from torch.utils.checkpoint import SAC_IGNORED_OPS, CheckpointPolicy, create_selective_checkpoint_contexts

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


# Ops selective checkpointing runs in the forward and the replay alike, without counting them: the profiler's ranges,
# which FSDP2's hooks open a different number of times in a replay when a module inside the block is sharded apart (an
# MoE's experts under ep), so that torch's replay by each op's count fails ("profiler._record_function_enter_new.default
# invocation index 3 encountered during backward but not found in storage"; pytorch/torchtitan#3427). The policy
# recomputes them anyway.
_UNCOUNTED_OPS = {overload for op in (torch.ops.profiler._record_function_enter, torch.ops.profiler._record_function_enter_new,
                                      torch.ops.profiler._record_function_exit)
                  for overload in (getattr(op, name) for name in op.overloads())}


def _selective_context():
    return create_selective_checkpoint_contexts(_save_matmuls)


def apply(pmodel: ParallelModel, env: DistEnv, cfg: Config) -> ParallelModel:
    mode = cfg.workload.activation_checkpointing
    kwargs = {}
    if mode == "selective":  # the ops left uncounted once here: the context is made anew for every block's every call
        SAC_IGNORED_OPS.update(_UNCOUNTED_OPS)
        kwargs = {"context_fn": _selective_context}
    for part in pmodel.parts:
        for name, block in list(part.layers.items()):
            part.layers[name] = checkpoint_wrapper(block, preserve_rng_state=False, **kwargs)
    return pmodel


# Before every sharding wrapper, after tp (which must see the plain modules).
