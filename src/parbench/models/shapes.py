"""The model's parameters from its config alone (no torch): every parameter's name and shape, as the
family's module builds it, so counts, per-stage sizes and per-shard sizes follow without a build.
tests/predict/test_predict.py checks the counts against parbench.models.build.count_params for every
conf/model/*.yaml."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from parbench.config import ConfigError
from parbench.config.schema import ModelConfig, head_width
from parbench.models import ParamCounts, counts_from_sizes

Shape = tuple[int, ...]
Named = list[tuple[str, Shape]]
FP32 = 4


def aligned(dims: tuple[int, ...]) -> bool:
    """Every dimension a multiple of 8: rows of whole 16-byte vectors at 2 bytes an element (a GEMM
    over other shapes, such as GPT-2's 50,257-token head, falls back to slower kernels)."""
    return all(d % 8 == 0 for d in dims)


def _attention(m: ModelConfig, bias: bool) -> Named:
    hd = head_width(m)
    q, kv = m.heads * hd, m.kv_heads * hd
    shapes = [("attention.wq.weight", (q, m.hidden)), ("attention.wk.weight", (kv, m.hidden)),
              ("attention.wv.weight", (kv, m.hidden)), ("attention.wo.weight", (m.hidden, q))]
    if bias or m.qkv_bias:
        shapes += [("attention.wq.bias", (q,)), ("attention.wk.bias", (kv,)), ("attention.wv.bias", (kv,))]
    if bias:
        shapes.append(("attention.wo.bias", (m.hidden,)))
    if m.qk_norm:
        shapes += [("attention.q_norm.weight", (hd,)), ("attention.k_norm.weight", (hd,))]
    return shapes


def _llama_block(m: ModelConfig) -> Named:
    if m.experts:
        ffn = [("feed_forward.router.weight", (m.experts, m.hidden)),
               ("feed_forward.experts.w1", (m.experts, m.hidden, m.ffn)),
               ("feed_forward.experts.w2", (m.experts, m.ffn, m.hidden)),
               ("feed_forward.experts.w3", (m.experts, m.hidden, m.ffn))]
    else:
        ffn = [("feed_forward.w1.weight", (m.ffn, m.hidden)), ("feed_forward.w2.weight", (m.hidden, m.ffn)),
               ("feed_forward.w3.weight", (m.ffn, m.hidden))]
    return [("attention_norm.weight", (m.hidden,)), *_attention(m, bias=False),
            ("ffn_norm.weight", (m.hidden,)), *ffn]


def _gpt2_block(m: ModelConfig) -> Named:
    norms = [(f"{n}.{p}", (m.hidden,)) for n in ("attention_norm", "ffn_norm") for p in ("weight", "bias")]
    mlp = [("feed_forward.w1.weight", (m.ffn, m.hidden)), ("feed_forward.w1.bias", (m.ffn,)),
           ("feed_forward.w2.weight", (m.hidden, m.ffn)), ("feed_forward.w2.bias", (m.hidden,))]
    return norms[:2] + _attention(m, bias=True) + norms[2:] + mlp


@dataclass(frozen=True)
class FamilyShapes:
    """What a model family holds outside its blocks, and one block's parameters."""

    block: Callable[[ModelConfig], Named]
    norm_bias: bool = False  # LayerNorm (bias) or RMSNorm
    learned_positions: bool = False  # else RoPE, applied to q and k in every layer
    gated_mlp: bool = True  # SwiGLU (two ffn-wide products, multiplied) or one ffn-wide GELU
    # fp32 buffers the model holds (RoPE's cos and sin tables), which DDP broadcasts every forward
    buffers: Callable[[ModelConfig], int] = lambda m: 0


def rope_buffers(m: ModelConfig) -> int:
    return 2 * m.max_seq_len * head_width(m) // 2


FAMILY_SHAPES: dict[str, FamilyShapes] = {
    "llama": FamilyShapes(_llama_block, buffers=rope_buffers),
    "gpt2": FamilyShapes(_gpt2_block, norm_bias=True, learned_positions=True, gated_mlp=False),
}


@dataclass(frozen=True)
class ModelShapes:
    """Parameters by place: embeddings (first stage), one block (every layer alike), head (last stage)."""

    embedding: Named
    block: Named
    head: Named
    layers: int
    buffers: int  # elements of fp32 buffers

    def named(self) -> Named:
        blocks = [(f"layers.{i}.{name}", shape) for i in range(self.layers) for name, shape in self.block]
        return self.embedding + blocks + self.head


def family_shapes(m: ModelConfig) -> FamilyShapes:
    if m.family not in FAMILY_SHAPES:
        raise ConfigError(f"model.family={m.family} has no parameter shapes in parbench.models.shapes."
                          f"FAMILY_SHAPES (known: {', '.join(FAMILY_SHAPES)}): add its block there to predict it")
    return FAMILY_SHAPES[m.family]


def model_shapes(m: ModelConfig) -> ModelShapes:
    fam = family_shapes(m)
    embedding = [("tok_embeddings.weight", (m.vocab, m.hidden))]
    if fam.learned_positions:
        embedding.append(("pos_embeddings.weight", (m.max_seq_len, m.hidden)))
    head = [("norm.weight", (m.hidden,))] + ([("norm.bias", (m.hidden,))] if fam.norm_bias else [])
    if not m.tie_embeddings:  # tied: the output head is the embedding, counted once
        head.append(("output.weight", (m.vocab, m.hidden)))
    return ModelShapes(embedding, fam.block(m), head, m.layers, fam.buffers(m))


def numel(shape: Shape) -> int:
    return math.prod(shape)


def size(named: Named) -> int:
    return sum(numel(s) for _, s in named)


def param_counts(m: ModelConfig) -> ParamCounts:
    """The same counts as parbench.models.build.count_params, from the config alone."""
    return counts_from_sizes(((name, numel(s)) for name, s in model_shapes(m).named()), m)


def dim0_shard(named: Named, ranks: int) -> int:
    """Elements one rank holds when every parameter is sharded on dim 0 over `ranks` (FSDP2's
    layout): ceil(rows / ranks) rows each, so the first ranks hold the padded share."""
    return sum(math.ceil(s[0] / ranks) * numel(s[1:]) for _, s in named)


def tp_split(named: Named, tp: int, ep: int = 1) -> Named:
    """A block's or the embeddings' parameters on one tp rank: matrices split tp ways (norms
    replicated); experts' stacked weights split ep ways."""
    return [(n, (s[0] // ep, *s[1:]) if ".experts." in n else ((s[0] // tp, *s[1:]) if len(s) > 1 else s))
            for n, s in named]
