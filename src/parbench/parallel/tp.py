"""Tensor parallel, Megatron style, with DTensor `parallelize_module` on mesh["tp"]: q/k/v and the
MLP's up projections column-parallel, the attention output and down projection row-parallel, a
vocab-parallel embedding and output head, and `loss_parallel` so the logits are never gathered.

With parallel.sp=true (sequence parallel) the residual stream between blocks stays sharded on
the sequence dimension: the norms run on sequence shards (SequenceParallel), attention and the
MLP all-gather their input, and the row-parallel outputs reduce-scatter instead of all-reduce.
Attention always sees the whole (local) sequence, so RoPE positions are those of the full input.

MoE blocks: tensor parallel covers attention, embeddings and the head; the router and experts stay
replicated over tp (every tp rank runs them on the same tokens; expert parallel shards them).
"""

from __future__ import annotations

from torch import nn
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    ParallelStyle,
    PrepareModuleInput,
    PrepareModuleInputOutput,
    PrepareModuleOutput,
    RowwiseParallel,
    SequenceParallel,
    loss_parallel,
    parallelize_module,
)

from parbench.config.schema import Config
from parbench.models.moe import MoE
from parbench.distenv import DistEnv
from parbench.parallel.model import ParallelModel


def outer_plan(model: nn.Module, sp: bool) -> dict[str, ParallelStyle]:
    """Embedding (vocab-parallel, rows of the table), final norm and output head (vocab columns,
    left sharded for loss_parallel). Parts a pipeline stage lacks are None and skipped."""
    residual = Shard(1) if sp else Replicate()
    plan = {
        "tok_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=residual),
        "output": ColwiseParallel(input_layouts=residual, output_layouts=Shard(-1), use_local_output=False),
    }
    if sp:
        plan["norm"] = SequenceParallel()
        if getattr(model, "pos_embeddings", None) is not None:
            # Learned positions (GPT-2) are added to the sequence shard this rank holds.
            plan["pos_embeddings"] = PrepareModuleOutput(output_layouts=Replicate(),
                                                         desired_output_layouts=Shard(0))
    return {name: style for name, style in plan.items() if getattr(model, name, None) is not None}


def block_plan(block: nn.Module, sp: bool) -> dict[str, ParallelStyle]:
    """One transformer block (llama or GPT-2 shape)."""
    residual = Shard(1) if sp else Replicate()
    plan: dict[str, ParallelStyle] = {
        "attention.wq": ColwiseParallel(),
        "attention.wk": ColwiseParallel(),
        "attention.wv": ColwiseParallel(),
        "attention.wo": RowwiseParallel(output_layouts=residual),
    }
    if block.attention.q_norm is not None:
        # Per-head norms (Qwen3) see this rank's heads: dim 2 of [batch, seq, heads, head_dim] is
        # sharded, so their weight gradients are summed over tp.
        plan["attention.q_norm"] = SequenceParallel(sequence_dim=2, use_local_output=True)
        plan["attention.k_norm"] = SequenceParallel(sequence_dim=2, use_local_output=True)
    if isinstance(block.feed_forward, MoE):
        if sp:
            plan["feed_forward"] = PrepareModuleInputOutput(
                input_layouts=Shard(1), desired_input_layouts=Replicate(), use_local_input=True,
                output_layouts=Replicate(), desired_output_layouts=Shard(1), use_local_output=True)
    else:
        plan["feed_forward.w1"] = ColwiseParallel()
        plan["feed_forward.w2"] = RowwiseParallel(output_layouts=residual)
        if hasattr(block.feed_forward, "w3"):
            plan["feed_forward.w3"] = ColwiseParallel()
    if sp:
        plan["attention_norm"] = SequenceParallel()
        plan["ffn_norm"] = SequenceParallel()
        plan["attention"] = PrepareModuleInput(input_layouts=(Shard(1), None),
                                               desired_input_layouts=(Replicate(), None))
        if not isinstance(block.feed_forward, MoE):
            plan["feed_forward"] = PrepareModuleInput(input_layouts=(Shard(1),),
                                                      desired_input_layouts=(Replicate(),))
    return plan


def apply(pmodel: ParallelModel, env: DistEnv, cfg: Config) -> ParallelModel:
    mesh, sp = env.mesh["tp"], cfg.parallel.sp
    for part in pmodel.parts:
        parallelize_module(part, mesh, outer_plan(part, sp))
        for block in part.layers.values():
            parallelize_module(block, mesh, block_plan(block, sp))
        if cfg.model.tie_embeddings and part.tok_embeddings is not None and part.output is not None:
            # Both are sharded Shard(0) over the vocab; distributing each made two parameters.
            part.output.weight = part.tok_embeddings.weight
    # The logits stay sharded over the vocab: cross-entropy and its backward run inside loss_parallel.
    pmodel.step_contexts.append(loss_parallel)
    return pmodel


# First: the plans name the plain modules, before checkpoint, pipeline or data-parallel wrappers.
