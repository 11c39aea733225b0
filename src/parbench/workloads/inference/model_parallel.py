"""One model replica sharded for decoding: Megatron-style tensor parallel inside a stage, and a
pipeline of stages, each a contiguous run of layers, passing hidden states with point-to-point
send/recv.

Tensor parallel holds plain local weight shards and calls the collectives itself (one all_reduce
after each attention and MLP, as vLLM's ColumnParallelLinear/RowParallelLinear do). DTensor's
parallelize_module (what training uses) costs Python dispatch on every sharded op: measured on CPU,
a 2-layer decode step took 118 ms under inference_mode and 25 ms under no_grad, against a few ms
without DTensor, and a 32-layer decode step is that times 16: the tp=2 run would measure DTensor's
overhead, not tensor parallelism.

A decode step's tokens go in on the first stage; the last stage samples the next tokens and
broadcasts them over the pipeline group, so every rank (rank 0 included) holds them."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from parbench.config.schema import ModelConfig
from parbench.models.build import build_model
from parbench.models.kv_cache import KVCache
from parbench.models.llama import FeedForward, Transformer, init_module
from parbench.models.moe import MoE
from parbench.distenv import DistEnv
from parbench.parallel.materialize import materialize_like_unsharded
from parbench.workloads.inference.decode_step import DecodeOptions, StaticDecodeStep, compile_blocks, mark_lengths_dynamic
from parbench.workloads.inference.prefill_graph import PrefillGraph


class VocabParallelEmbedding(nn.Embedding):
    """Rows [start, start + vocab/tp) of the table; a token outside them gives zeros here, and the
    all_reduce over the tp group adds in the one rank's row that holds it."""

    shard_dim = 0

    def __init__(self, vocab: int, hidden: int, group: dist.ProcessGroup):
        size = group.size()
        super().__init__(vocab // size, hidden, _weight=torch.empty(vocab // size, hidden, device="meta"))  # no init: see build.embedding
        self.start, self.group = group.rank() * (vocab // size), group

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        local = tokens - self.start
        outside = (local < 0) | (local >= self.num_embeddings)
        h = F.embedding(local.masked_fill(outside, 0), self.weight).masked_fill(outside[..., None], 0)
        dist.all_reduce(h, group=self.group)
        return h


class ColumnParallelLinear(nn.Linear):
    """A slice of the output features; `gather`: all_gather the slices (the head, so that sampling
    sees the whole vocabulary)."""

    shard_dim = 0

    def __init__(self, linear: nn.Linear, group: dist.ProcessGroup, gather: bool = False):
        super().__init__(linear.in_features, linear.out_features // group.size(), bias=linear.bias is not None,
                         device="meta")
        self.group, self.gather = group, gather

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = super().forward(x)
        if not self.gather:
            return out
        parts = [torch.empty_like(out) for _ in range(self.group.size())]
        dist.all_gather(parts, out.contiguous(), group=self.group)
        return torch.cat(parts, dim=-1)


class RowParallelLinear(nn.Linear):
    """A slice of the input features (those the column-parallel layer before it produced); the
    all_reduce over the tp group sums the slices' partial outputs, then the (whole) bias is added once."""

    shard_dim = 1

    def __init__(self, linear: nn.Linear, group: dist.ProcessGroup):
        super().__init__(linear.in_features // group.size(), linear.out_features, bias=linear.bias is not None,
                         device="meta")
        self.group = group

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.linear(x, self.weight)
        dist.all_reduce(out, group=self.group)
        return out if self.bias is None else out + self.bias


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
        if hasattr(model, "pos_embeddings"):  # GPT-2's learned positions
            model.pos_embeddings = None
    if stage < stages - 1:
        model.norm, model.output = None, None
    return model


def tensor_parallel(model: Transformer, group: dist.ProcessGroup) -> Transformer:
    """Swap the (meta) modules for their tensor-parallel shards: q/k/v and w1/w3 split by output
    columns (and their biases), wo and w2 by input rows (one all_reduce per attention and per MLP),
    the embedding by vocab rows, the head by vocab columns with the logits gathered. MoE experts
    and GPT-2's learned positions stay replicated."""
    if model.tok_embeddings is not None:
        model.tok_embeddings = VocabParallelEmbedding(model.cfg.vocab, model.cfg.hidden, group)
    if model.output is not None:
        model.output = ColumnParallelLinear(model.output, group, gather=True)
    for block in model.layers.values():
        attention = block.attention
        attention.wq, attention.wk, attention.wv = (ColumnParallelLinear(w, group)
                                                    for w in (attention.wq, attention.wk, attention.wv))
        attention.wo = RowParallelLinear(attention.wo, group)
        mlp = block.feed_forward
        if not isinstance(mlp, MoE):  # SwiGLU (w1, w3, w2) or GPT-2's GELU MLP (w1, w2)
            mlp.w1 = ColumnParallelLinear(mlp.w1, group)
            if isinstance(mlp, FeedForward):
                mlp.w3 = ColumnParallelLinear(mlp.w3, group)
            mlp.w2 = RowParallelLinear(mlp.w2, group)
    return model


def tensor_parallel_slicer(model: nn.Module, tp: int, tp_rank: int):
    """(parameter name, full tensor) -> this rank's part: its slice along the module's shard_dim
    (a row-parallel layer's bias, which has no such dim, whole)."""
    def local_part(name: str, full: torch.Tensor) -> torch.Tensor:
        dim = getattr(model.get_submodule(name.rpartition(".")[0]), "shard_dim", None)
        return full if dim is None or dim >= full.dim() else full.chunk(tp, dim=dim)[tp_rank]
    return local_part


def to_inference_dtype(model: Transformer, dtype: torch.dtype) -> Transformer:
    """Weights in `dtype`; the RoPE tables (GPT-2 has none) stay fp32, as in vLLM and Hugging Face."""
    rope = {name: buffer for name, buffer in model.named_buffers(recurse=False) if name.startswith("rope_")}
    model.to(dtype)
    for name, buffer in rope.items():
        setattr(model, name, buffer)
    return model


def shard_model(model: Transformer, env: DistEnv, dtype: torch.dtype) -> Transformer:
    """This rank's stage of the model, its layers tensor-parallel over the tp mesh."""
    model = split_stage(model, env.mesh["pp"].get_local_rank(), env.dims.pp)
    if env.dims.tp > 1:
        tensor_parallel(model, env.mesh["tp"].get_group())
    # After the tp swap: its shard modules are created in the default dtype.
    return to_inference_dtype(model, dtype).eval()


def build_shard(model_cfg: ModelConfig, seed: int, env: DistEnv, dtype: torch.dtype) -> Transformer:
    """This rank's shard of the model with the weights the whole model gets from `seed` (so every
    layout decodes the same tokens): sharded on the meta device, then materialised one layer at a
    time, so no rank ever holds the whole model, and no collective runs while building."""
    model = shard_model(build_model(model_cfg, "meta"), env, dtype)
    local_part = tensor_parallel_slicer(model, env.dims.tp, env.mesh["tp"].get_local_rank())
    torch.manual_seed(seed)
    materialize_like_unsharded(model, build_model(model_cfg, "meta"), env.device, init_module, local_part)
    model.init_buffers()
    return model


class PipelinedDecoder:
    """Runs one forward of the sharded model over the pipeline and returns the sampled tokens."""

    def __init__(self, model: Transformer, env: DistEnv, dtype: torch.dtype, options: DecodeOptions = DecodeOptions()):
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
        self.static: StaticDecodeStep | None = None
        self.prefill: PrefillGraph | None = None
        self.compiling = False
        self.use(options)

    def step(self, tokens: torch.Tensor, cache: KVCache | None, sample) -> torch.Tensor:
        """tokens [batch, seq] (the same on every rank) -> next tokens [batch] on every rank:
        a one-token step after the prefill through the static path, and a prefill as a CUDA graph,
        when options ask for them."""
        batch, seq = tokens.shape
        hidden_shape = (batch, seq, self.hidden)  # what every stage but the last sends on
        if self.stage == 0:
            x = tokens
        else:
            x = torch.empty(hidden_shape, dtype=self.dtype, device=tokens.device)
            dist.recv(x, src=self.ranks[self.stage - 1], group=self.group)
        if self.static is not None and cache is not None and seq == 1 and cache.length > 0:
            out = self.static(x, cache, sample)
        else:
            if self.compiling and cache is not None:
                mark_lengths_dynamic(cache)
            graphed = self.prefill is not None and PrefillGraph.covers(x, cache)
            out = (self.prefill if graphed else self.compute)(x, cache, sample)
        if self.stage < self.stages - 1:
            self.check_sent(out, hidden_shape)
            dist.send(out.contiguous(), dst=self.ranks[self.stage + 1], group=self.group)
            next_tokens = torch.empty(batch, dtype=torch.long, device=tokens.device)
        else:
            next_tokens = out
        if self.stages > 1:
            dist.broadcast(next_tokens, src=self.ranks[-1], group=self.group)
        return next_tokens

    def compute(self, x: torch.Tensor, cache: KVCache | None, sample,
                positions: torch.Tensor | None = None) -> torch.Tensor:
        """This stage's part of one forward: the hidden states it sends on, or on the last stage
        the sampled tokens."""
        h = self.model(x, positions=positions, cache=cache)
        if self.stage < self.stages - 1:
            return h
        return sample(self.head(self.norm(h[:, -1:]))[:, -1])

    def kv_cache(self, batch: int, max_len: int) -> KVCache:
        """A KV cache for this stage's layers, its buffers allocated now (not inside a compiled step)."""
        cache = KVCache(list(self.model.layers.keys()), max_len)
        device = next(self.model.parameters()).device
        for name, block in self.model.layers.items():
            attention = block.attention
            cache.layer(name).allocate(batch, attention.kv_heads, attention.head_dim, self.dtype, device)
        return cache

    def use(self, options: DecodeOptions) -> None:
        """Decode with `options` from now on: one-token steps of this stage's compute through the
        static-shape path, or eagerly; its blocks compiled or not (fusing the projections is the
        model's part: fuse_projections)."""
        self.release_graph()
        self.static = StaticDecodeStep(self.compute, options.graph) if options.static else None
        self.prefill = PrefillGraph(self.compute) if options.prefill_graph else None
        self.compile(options.compile)

    def compile(self, on: bool) -> None:
        """This stage's transformer blocks compiled (prefill and decode steps) or eager."""
        compile_blocks(self.model.layers.values(), on)
        self.compiling = on

    def release_graph(self) -> None:
        """Free the decode and prefill graphs, if captured (before the process group is destroyed)."""
        for step in (self.static, self.prefill):
            if step is not None:
                step.release()

    @contextmanager
    def launching_op_by_op(self) -> Iterator[None]:
        """Prefill and decode eagerly (no compiled code, no CUDA graph) inside the block."""
        static, prefill, compiling = self.static, self.prefill, self.compiling
        self.static = self.prefill = None
        self.compile(False)
        try:
            yield
        finally:
            self.static, self.prefill = static, prefill
            self.compile(compiling)

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
        return sum(p.nbytes for p in params)
