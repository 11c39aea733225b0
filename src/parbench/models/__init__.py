"""Model families: a registry from `model.family` to a builder taking a ModelConfig."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from parbench.config.schema import ModelConfig
from parbench.registry import Registry

MODEL_FAMILIES: Registry = Registry("model family", "model.family")


def build_model(cfg: ModelConfig, device: str | torch.device = "meta") -> nn.Module:
    """Build the model; on the meta device nothing is allocated (for planning and sharded init)."""
    with torch.device(device):
        return MODEL_FAMILIES.get(cfg.family)(cfg)


@dataclass(frozen=True)
class ParamCounts:
    total: int  # every parameter once (tied weights once)
    embedding: int  # input embeddings (token and learned position), excluded from 6N
    active: int  # parameters touched per token: MoE counts top_k of the experts
    matmul_active: int  # active parameters that multiply activations, the N of 6N


def count_params(model: nn.Module, cfg: ModelConfig) -> ParamCounts:
    """Count parameters of a built (possibly meta) model by role."""
    total = embedding = expert = 0
    for name, p in model.named_parameters():  # tied weights are yielded once
        n = p.numel()
        total += n
        if name.endswith("embeddings.weight"):
            embedding += n
        elif ".experts." in name:
            expert += n
    active = total - expert + (expert * cfg.top_k // cfg.experts if cfg.experts else 0)
    # A tied output head still multiplies every token by the vocab matrix.
    tied_head = cfg.vocab * cfg.hidden if cfg.tie_embeddings else 0
    return ParamCounts(total, embedding, active, active - embedding + tied_head)


# Importing the family modules registers them.
from parbench.models import gpt2, llama  # noqa: E402,F401
