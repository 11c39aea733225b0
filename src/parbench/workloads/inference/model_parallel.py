"""One model replica sharded for decoding: DTensor tensor parallel inside a stage, and a pipeline of
stages, each a contiguous run of layers, passing hidden states with point-to-point send/recv.

A decode step's tokens go in on the first stage; the last stage samples the next tokens and
broadcasts them over the pipeline group, so every rank (rank 0 included) holds them."""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.tensor import Replicate
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

from parbench.config.schema import ModelConfig
from parbench.models import build_model
from parbench.models.kv_cache import KVCache
from parbench.models.llama import FeedForward, Transformer, init_module
from parbench.parallel import DistEnv
from parbench.parallel.materialize import materialize_like_unsharded


def split_stage(model: Transformer, stage: int, stages: int) -> Transformer:
    """Keep this stage's contiguous layers; embeddings on the first stage, norm and head on the last."""
    names = list(model.layers.keys())
    per_stage = len(names) // stages
    keep = set(names[stage * per_stage:(stage + 1) * per_stage])
    for name in names:
        if name not in keep:
            del model.layers[name]
    if stage > 0:
        model.tok_embeddings = None
    if stage < stages - 1:
        model.norm, model.output = None, None
    return model


def tensor_parallel_plan(model: Transformer) -> dict:
    """Megatron-style: q/k/v and w1/w3 split by output columns, wo and w2 by input rows (one
    all_reduce per attention and per MLP); the embedding split by vocab rows, the head by vocab
    columns with the logits gathered, so sampling sees the full vocabulary."""
    plan = {}
    if model.tok_embeddings is not None:
        plan["tok_embeddings"] = RowwiseParallel(input_layouts=Replicate())
    if model.output is not None:
        plan["output"] = ColwiseParallel(output_layouts=Replicate())
    for name, block in model.layers.items():
        prefix = f"layers.{name}"
        plan.update({f"{prefix}.attention.{w}": ColwiseParallel() for w in ("wq", "wk", "wv")})
        plan[f"{prefix}.attention.wo"] = RowwiseParallel()
        if isinstance(block.feed_forward, FeedForward):  # MoE experts stay replicated here
            plan.update({f"{prefix}.feed_forward.{w}": ColwiseParallel() for w in ("w1", "w3")})
            plan[f"{prefix}.feed_forward.w2"] = RowwiseParallel()
    return plan


def to_inference_dtype(model: Transformer, dtype: torch.dtype) -> Transformer:
    """Weights in `dtype`; the RoPE tables stay fp32, as in vLLM and Hugging Face."""
    rope = (model.rope_cos, model.rope_sin)
    model.to(dtype)
    model.rope_cos, model.rope_sin = rope
    return model


def shard_model(model: Transformer, env: DistEnv, dtype: torch.dtype) -> Transformer:
    """This rank's stage of the model, its layers tensor-parallel over the tp mesh."""
    model = split_stage(model, env.mesh["pp"].get_local_rank(), env.dims.pp)
    model = to_inference_dtype(model, dtype).eval()
    if env.dims.tp > 1:
        # src_data_rank=None: every rank holds the same weights, so each slices its own (no scatter).
        parallelize_module(model, env.mesh["tp"], tensor_parallel_plan(model), src_data_rank=None)
    return model


def build_shard(model_cfg: ModelConfig, seed: int, env: DistEnv, dtype: torch.dtype) -> Transformer:
    """This rank's shard of the model with the weights the whole model gets from `seed` (so every
    layout decodes the same tokens): sharded on the meta device, then materialised one layer at a
    time, so no rank ever holds the whole model, and no collective runs while building."""
    model = shard_model(build_model(model_cfg, "meta"), env, dtype)
    torch.manual_seed(seed)
    materialize_like_unsharded(model, build_model(model_cfg, "meta"), env.device, init_module)
    model.init_buffers()
    return model


class PipelinedDecoder:
    """Runs one forward of the sharded model over the pipeline and returns the sampled tokens."""

    def __init__(self, model: Transformer, env: DistEnv, dtype: torch.dtype):
        self.model, self.hidden, self.dtype = model, model.cfg.hidden, dtype
        self.device_type = env.device.type
        # The head runs on the last position only, as in vLLM: a prefill would otherwise
        # materialise batch x input_len x vocab logits. The model then returns hidden states.
        self.norm, self.head = model.norm, model.output
        model.norm, model.output = None, None
        pp = env.mesh["pp"]
        self.group = pp.get_group()
        self.stage, self.stages = pp.get_local_rank(), env.dims.pp
        self.ranks = [dist.get_global_rank(self.group, i) for i in range(self.stages)]

    def step(self, tokens: torch.Tensor, cache: KVCache, sample) -> torch.Tensor:
        """tokens [batch, seq] (the same on every rank) -> next tokens [batch] on every rank."""
        batch, seq = tokens.shape
        hidden_shape = (batch, seq, self.hidden)  # what every stage but the last sends on
        if self.stage == 0:
            h = self.model(tokens, cache=cache)
        else:
            received = torch.empty(hidden_shape, dtype=self.dtype, device=tokens.device)
            dist.recv(received, src=self.ranks[self.stage - 1], group=self.group)
            h = self.model(received, cache=cache)
        if self.stage < self.stages - 1:
            self.check_sent(h, hidden_shape)
            dist.send(h.contiguous(), dst=self.ranks[self.stage + 1], group=self.group)
            next_tokens = torch.empty(batch, dtype=torch.long, device=tokens.device)
        else:
            next_tokens = sample(self.head(self.norm(h[:, -1:]))[:, -1])
        if self.stages > 1:
            dist.broadcast(next_tokens, src=self.ranks[-1], group=self.group)
        return next_tokens

    def check_sent(self, h: torch.Tensor, shape: tuple[int, ...]) -> None:
        """The next stage receives `shape` in self.dtype: NCCL would hang or corrupt on anything else."""
        if tuple(h.shape) != shape or h.dtype != self.dtype or h.device.type != self.device_type:
            raise RuntimeError(f"pipeline stage {self.stage} would send hidden states {tuple(h.shape)} {h.dtype} on "
                               f"{h.device.type} where stage {self.stage + 1} receives {shape} {self.dtype} on "
                               f"{self.device_type}: every stage must compute in workload.dtype")

    def modules(self) -> list[nn.Module]:
        """Every module this rank runs (the stage, and the final norm and head on the last stage)."""
        return [m for m in (self.model, self.norm, self.head) if m is not None]

    def weight_bytes(self) -> int:
        """Bytes of this rank's own parameters (its shards, under tensor parallel; tied ones once)."""
        params = {id(p): p for m in self.modules() for p in m.parameters()}.values()
        return sum(getattr(p, "_local_tensor", p).nbytes for p in params)
