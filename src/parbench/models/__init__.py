"""Model families: a registry from `model.family` to the class that builds it (a "module:Class"
reference, so configs are checked without loading torch), and parameter counts by role."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from parbench.config.schema import ModelConfig, head_width
from parbench.registry import Registry

MODEL_FAMILIES: Registry[str] = Registry("model family", "model.family")
MODEL_FAMILIES.register("llama")("parbench.models.llama:Transformer")
MODEL_FAMILIES.register("gpt2")("parbench.models.gpt2:GPT2")


def describe(cfg: ModelConfig) -> str:
    """The architecture in one line (dry_run's plan, `parbench plan`), e.g. `llama: 32 layers, hidden
    4096, 32 heads (8 KV) x 128, ffn 14336, vocab 128256, rope 500000 llama3 x8, untied head`."""
    head_dim = head_width(cfg)
    parts = [f"{cfg.layers} layers", f"hidden {cfg.hidden}", f"{cfg.heads} heads ({cfg.kv_heads} KV) x {head_dim}",
             f"ffn {cfg.ffn}" + (f" x {cfg.experts} experts, top {cfg.top_k}" if cfg.experts else ""),
             f"vocab {cfg.vocab}", f"max_seq_len {cfg.max_seq_len}"]
    if cfg.family != "gpt2":
        scaling = cfg.rope_scaling or {}
        parts.append(f"rope {cfg.rope_theta:g}" + (f" {scaling['rope_type']} x{scaling['factor']:g}" if scaling else ""))
    parts += [label for on, label in ((cfg.qkv_bias, "qkv bias"), (cfg.qk_norm, "qk norm"),
                                      (cfg.sliding_window, f"sliding window {cfg.sliding_window}")) if on]
    parts.append("tied head" if cfg.tie_embeddings else "untied head")
    return f"{cfg.family}: " + ", ".join(parts)


def block_structure(cfg: ModelConfig) -> str:
    """What decides the kernels a block runs, whatever its widths: the family and the options that add or
    remove ops (grouped KV heads, q/k norms, q/k/v biases, experts, a sliding window), e.g. `llama/gqa/qk_norm`
    (Qwen3), `gpt2/mha`."""
    options = [("gqa" if cfg.kv_heads < cfg.heads else "mha"), *(label for on, label in (
        (cfg.qk_norm, "qk_norm"), (cfg.qkv_bias, "qkv_bias"), (cfg.experts, "moe"), (cfg.sliding_window, "window")) if on)]
    return "/".join([cfg.family, *options])


@dataclass(frozen=True)
class ParamCounts:
    total: int  # every parameter once (tied weights once)
    embedding: int  # input embeddings (token and learned position), excluded from 6N
    active: int  # parameters touched per token: MoE counts top_k of the experts
    matmul_active: int  # active parameters that multiply activations, the N of 6N


def counts_from_sizes(named_sizes: Iterable[tuple[str, int]], cfg: ModelConfig) -> ParamCounts:
    """Parameter counts by role from (name, numel) pairs, each parameter once (tied weights once):
    of a built model (build.count_params) or of the shapes parbench.models.shapes derives without torch."""
    total = embedding = expert = 0
    for name, n in named_sizes:
        total += n
        if name.endswith("embeddings.weight"):
            embedding += n
        elif ".experts." in name:
            expert += n
    active = total - expert + (expert * cfg.top_k // cfg.experts if cfg.experts else 0)
    # A tied output head still multiplies every token by the vocab matrix.
    tied_head = cfg.vocab * cfg.hidden if cfg.tie_embeddings else 0
    return ParamCounts(total, embedding, active, active - embedding + tied_head)
