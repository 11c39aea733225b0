"""Model families: a registry from `model.family` to the class that builds it (a "module:Class"
reference, so configs are checked without loading torch), and parameter counts by role."""

from __future__ import annotations

from dataclasses import dataclass

from parbench.registry import Registry

MODEL_FAMILIES: Registry[str] = Registry("model family", "model.family")
MODEL_FAMILIES.register("llama")("parbench.models.llama:Transformer")
MODEL_FAMILIES.register("gpt2")("parbench.models.gpt2:GPT2")


@dataclass(frozen=True)
class ParamCounts:
    total: int  # every parameter once (tied weights once)
    embedding: int  # input embeddings (token and learned position), excluded from 6N
    active: int  # parameters touched per token: MoE counts top_k of the experts
    matmul_active: int  # active parameters that multiply activations, the N of 6N
