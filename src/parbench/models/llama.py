"""Llama-style decoder: RMSNorm, RoPE, grouped-query attention, SwiGLU MLP (or MoE), as in
Llama 2/3 (RoPE scaling), Mistral (sliding_window), Qwen2 (qkv_bias), Qwen3 (qk_norm) and
Mixtral (experts>0). Module names follow torchtitan's so the
TP/FSDP plans read the same."""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from parbench.config.schema import ModelConfig, head_width
from parbench.models.build import embedding, init_dense
from parbench.models.kv_cache import KVCache, LayerKVCache, sliding_causal_mask
from parbench.models.moe import MoE

INIT_STD = 0.02


def scaled_frequencies(inv_freq: torch.Tensor, scaling: dict[str, Any]) -> torch.Tensor:
    """RoPE frequencies under Hugging Face's rope_scaling: linear divides them all by the factor;
    llama3 (Llama 3.1) divides the low ones, keeps the high ones and blends those in between."""
    if scaling["rope_type"] == "linear":
        return inv_freq / scaling["factor"]
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    periods_in_context = scaling["original_max_position_embeddings"] * inv_freq / (2 * math.pi)
    keep = ((periods_in_context - low) / (high - low)).clamp(0, 1)  # 1: high frequency, 0: low
    return (1 - keep) * inv_freq / factor + keep * inv_freq


def rope_tables(head_dim: int, max_seq_len: int, theta: float,
                scaling: dict[str, Any] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin tables of shape [max_seq_len, head_dim // 2] for rotate-half RoPE."""
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    if scaling:
        inv_freq = scaled_frequencies(inv_freq, scaling)
    angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv_freq)
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate x [batch, seq, heads, head_dim] by position; cos/sin are [seq, head_dim // 2]."""
    x1, x2 = x.float().chunk(2, dim=-1)
    cos, sin = cos[None, :, None, :], sin[None, :, None, :]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).type_as(x)


class RMSNorm(nn.RMSNorm):
    """nn.RMSNorm in its input's dtype. Under autocast the weight stays fp32 while q and k (Qwen3's
    qk_norm) come out of a bf16 matmul: torch's fused kernel needs one dtype ("Mismatch dtype between
    input and weight ... Cannot dispatch to fused implementation") and falls back to several slower
    kernels. On the fp32 residual stream, or with bf16 parameters (FSDP's param_dtype), the cast is a no-op."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, self.normalized_shape, self.weight.to(x.dtype), self.eps)


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, native_gqa: bool = True,
                     window: int | None = None) -> torch.Tensor:
    """SDPA over [batch, heads, seq, head_dim]; k/v may carry fewer (grouped) heads, which SDPA
    takes as they are (enable_gqa: 7% faster than repeating them on an H100) or, for kernels
    that need equal head counts, repeated. `window`: each query sees that many positions (itself
    included), through an explicit mask once the sequence is longer."""
    n_rep = q.shape[1] // k.shape[1]
    if n_rep > 1 and not native_gqa:
        k, v = (t.repeat_interleave(n_rep, dim=1) for t in (k, v))
    gqa = k.shape[1] != q.shape[1]
    if window is not None and window < k.shape[2]:
        mask = sliding_causal_mask(q.shape[2], k.shape[2], window, q.device)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=gqa)
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig, bias: bool = False):
        super().__init__()
        self.head_dim = head_width(cfg)
        qkv_bias = bias or cfg.qkv_bias  # GPT-2: every projection; Qwen2: q, k and v only
        self.wq = nn.Linear(cfg.hidden, cfg.heads * self.head_dim, bias=qkv_bias)
        self.wk = nn.Linear(cfg.hidden, cfg.kv_heads * self.head_dim, bias=qkv_bias)
        self.wv = nn.Linear(cfg.hidden, cfg.kv_heads * self.head_dim, bias=qkv_bias)
        self.wo = nn.Linear(cfg.heads * self.head_dim, cfg.hidden, bias=bias)
        self.q_norm = RMSNorm(self.head_dim, eps=cfg.norm_eps) if cfg.qk_norm else None
        self.k_norm = RMSNorm(self.head_dim, eps=cfg.norm_eps) if cfg.qk_norm else None
        self.window = cfg.sliding_window
        # Swappable core (context parallel replaces it with a ring / all-gather form).
        self.attention_fn = partial(causal_attention, window=self.window) if self.window else causal_attention
        self.wqkv: nn.Linear | None = None  # q, k and v in one matmul once fuse_projections() ran

    def fuse_projections(self) -> None:
        """Replace wq/wk/wv by one Linear of their concatenated rows (under tensor parallel, this
        rank's rows): a decode step reads the same bytes in one kernel instead of three."""
        self.qkv_sizes = [w.out_features for w in (self.wq, self.wk, self.wv)]
        self.wqkv = concatenated_linear(self.wq, self.wk, self.wv)
        del self.wq, self.wk, self.wv

    @property
    def kv_heads(self) -> int:
        """The k (and v) heads this module projects to (under tensor parallel, this rank's)."""
        width = self.qkv_sizes[1] if self.wqkv is not None else self.wk.out_features
        return width // self.head_dim

    def project_qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if self.wqkv is None:
            return self.wq(x), self.wk(x), self.wv(x)
        return self.wqkv(x).split(self.qkv_sizes, dim=-1)

    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | None,
                cache: LayerKVCache | None = None) -> torch.Tensor:
        b, s, _ = x.shape
        # -1 heads: under tensor parallelism each rank holds a slice of the heads.
        q, k, v = (t.reshape(b, s, -1, self.head_dim) for t in self.project_qkv(x))
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        if rope is not None:
            q, k = apply_rope(q, *rope), apply_rope(k, *rope)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        if cache is None:
            out = self.attention_fn(q, k, v)
        else:  # decoding: attend over every cached position, this call's included
            out = cache.attend(q, k, v, self.window)
        return self.wo(out.transpose(1, 2).reshape(b, s, -1))


class FeedForward(nn.Module):
    """SwiGLU: w2(silu(w1 x) * w3 x)."""

    def __init__(self, hidden: int, ffn: int):
        super().__init__()
        self.w1 = nn.Linear(hidden, ffn, bias=False)
        self.w2 = nn.Linear(ffn, hidden, bias=False)
        self.w3 = nn.Linear(hidden, ffn, bias=False)
        self.w13: nn.Linear | None = None  # gate and up in one matmul once fuse_projections() ran

    def fuse_projections(self) -> None:
        """Replace w1/w3 by one Linear of their concatenated rows (as vLLM's gate_up_proj)."""
        self.w13 = concatenated_linear(self.w1, self.w3)
        del self.w1, self.w3

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.w13 is None:
            gate, up = self.w1(x), self.w3(x)
        else:
            gate, up = self.w13(x).chunk(2, dim=-1)
        return self.w2(F.silu(gate) * up)


def concatenated_linear(*linears: nn.Linear) -> nn.Linear:
    """One Linear whose output is the linears' outputs side by side (biased if they all are)."""
    biased = [m.bias is not None for m in linears]
    if any(biased) and not all(biased):
        raise ValueError("fusing projections needs all of them biased or none")
    weight = torch.cat([m.weight for m in linears])
    fused = nn.Linear(weight.shape[1], weight.shape[0], bias=all(biased), device="meta")
    fused.weight = nn.Parameter(weight, requires_grad=False)
    if all(biased):
        fused.bias = nn.Parameter(torch.cat([m.bias for m in linears]), requires_grad=False)
    return fused


def fuse_projections(model: nn.Module) -> nn.Module:
    """Fused q/k/v and gate/up projections in every block (for inference: the weights are
    concatenated, not shared with the unfused modules, which are dropped)."""
    for module in list(model.modules()):
        if isinstance(module, (Attention, FeedForward)):
            module.fuse_projections()
    return model


class TransformerBlock(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.attention_norm = RMSNorm(cfg.hidden, eps=cfg.norm_eps)
        self.attention = Attention(cfg)
        self.ffn_norm = RMSNorm(cfg.hidden, eps=cfg.norm_eps)
        self.feed_forward = MoE(cfg) if cfg.experts else FeedForward(cfg.hidden, cfg.ffn)

    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor],
                cache: LayerKVCache | None = None) -> torch.Tensor:
        h = x + self.attention(self.attention_norm(x), rope, cache=cache)
        return h + self.feed_forward(self.ffn_norm(h))


@torch.no_grad()
def init_module(module: nn.Module) -> None:
    """One module's share of the seeded initialisation, in the order Transformer.modules() visits
    them (an MoE initialises its experts' stacked weights, which belong to a child)."""
    if not init_dense(module, partial(nn.init.trunc_normal_, std=INIT_STD)) and isinstance(module, MoE):
        module.init_weights(INIT_STD)


class Transformer(nn.Module):
    """Embeddings -> blocks -> norm -> output head. Pipeline stages set the parts they lack to None."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.head_dim = head_width(cfg)
        self.tok_embeddings = embedding(cfg.vocab, cfg.hidden)
        # A dict keyed by layer index keeps parameter names stable when a pipeline stage drops layers.
        self.layers = nn.ModuleDict({str(i): TransformerBlock(cfg) for i in range(cfg.layers)})
        self.norm = RMSNorm(cfg.hidden, eps=cfg.norm_eps)
        self.output = nn.Linear(cfg.hidden, cfg.vocab, bias=False)
        if cfg.tie_embeddings:
            self.output.weight = self.tok_embeddings.weight
        self.register_buffer("rope_cos", torch.empty(cfg.max_seq_len, self.head_dim // 2), persistent=False)
        self.register_buffer("rope_sin", torch.empty(cfg.max_seq_len, self.head_dim // 2), persistent=False)
        if self.rope_cos.device.type != "meta":
            self.init_weights()

    @torch.no_grad()
    def init_weights(self) -> None:
        """Seeded-RNG initialisation; call again after materialising a meta-device model."""
        self.init_buffers()
        for module in self.modules():
            init_module(module)

    @torch.no_grad()
    def init_buffers(self) -> None:
        """The RoPE tables (no RNG)."""
        cos, sin = rope_tables(self.head_dim, self.cfg.max_seq_len, self.cfg.rope_theta, self.cfg.rope_scaling)
        self.rope_cos.copy_(cos)
        self.rope_sin.copy_(sin)

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor | None = None,
                cache: KVCache | None = None) -> torch.Tensor:
        """Logits (or a pipeline stage's hidden states). `positions` of the tokens held (context
        parallel holds chunks of the sequence); with a cache, `tokens` continue the cached sequence
        from position cache.length."""
        h = self.tok_embeddings(tokens) if self.tok_embeddings is not None else tokens
        if positions is None:  # (a compiled static decode step must not read cache.length: it changes)
            start = cache.length if cache is not None else 0
            # tokens, not h: under sequence parallel h holds only this rank's part of the sequence.
            positions = slice(start, start + tokens.shape[1])
        rope = (self.rope_cos[positions], self.rope_sin[positions])
        for name, layer in self.layers.items():
            h = layer(h, rope, cache=cache.layer(name) if cache is not None else None)
        h = self.norm(h) if self.norm is not None else h
        return self.output(h) if self.output is not None else h
