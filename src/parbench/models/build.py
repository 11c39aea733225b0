"""Building models: on the meta device for planning, or allocated and initialised from a seed."""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from parbench.config.schema import ModelConfig
from parbench.models import MODEL_FAMILIES, ParamCounts, counts_from_sizes
from parbench.registry import load_ref


def build_model(cfg: ModelConfig, device: str | torch.device = "meta") -> nn.Module:
    """Build the model; on the meta device nothing is allocated (for planning and sharded init)."""
    with torch.device(device):
        return load_ref(MODEL_FAMILIES.get(cfg.family))(cfg)


def embedding(num: int, dim: int) -> nn.Embedding:
    """nn.Embedding without its own random init (init_weights draws the weights): on the meta device,
    Embedding's normal_ runs through torch._refs, which imports torch._dynamo (1.8 s of a model
    build on CPU, several seconds on the H100 machine, before the build did anything)."""
    return nn.Embedding(num, dim, _weight=torch.empty(num, dim))


@torch.no_grad()
def init_dense(module: nn.Module, init_weight: Callable[[torch.Tensor], object]) -> bool:
    """Linear and Embedding: init_weight(weight), zero bias; RMSNorm and LayerNorm: weight 1,
    bias 0. False for any other module (left to the caller)."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        init_weight(module.weight)
    elif isinstance(module, (nn.RMSNorm, nn.LayerNorm)):
        nn.init.ones_(module.weight)
    else:
        return False
    if getattr(module, "bias", None) is not None:
        nn.init.zeros_(module.bias)
    return True


def to_empty_keeping_ties(model: nn.Module, device: str | torch.device) -> None:
    """Module.to_empty, then tie again what was tied (to_empty gives each module a new parameter)."""
    names_of: dict[int, list[str]] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        names_of.setdefault(id(p), []).append(name)
    model.to_empty(device=device)
    for first, *others in (names for names in names_of.values() if len(names) > 1):
        for name in others:
            owner, _, attr = name.rpartition(".")
            setattr(model.get_submodule(owner), attr, model.get_parameter(first))


def build_initialized(cfg: ModelConfig, seed: int, device: str | torch.device) -> nn.Module:
    """The whole model with the weights `seed` gives it: built on meta, then allocated and initialised,
    so only init_weights draws from the RNG (not the layers' constructors). Sharded builds that
    replay init_weights piece by piece (parallel.materialize) get the same weights."""
    model = build_model(cfg, "meta")
    to_empty_keeping_ties(model, device)
    torch.manual_seed(seed)
    model.init_weights()
    return model


def count_params(model: nn.Module, cfg: ModelConfig) -> ParamCounts:
    """Count parameters of a built (possibly meta) model by role."""
    return counts_from_sizes(((name, p.numel()) for name, p in model.named_parameters()), cfg)
