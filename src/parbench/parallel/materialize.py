"""Materialise a sharded meta-device model with exactly the weights the unsharded model gets from
the same seed, without any rank ever holding the whole model.

The unsharded model's initialisation is replayed piece by piece (a top-level module, or one block
of a ModuleDict/ModuleList such as the transformer layers), in the order it visits them: each piece
is materialised at full size on the device, initialised from the seeded RNG, and the rank copies out
what it holds (its pipeline stage's layers, its tensor-parallel shards). Pieces a rank does not
hold are drawn all the same, so the RNG stream stays where the unsharded build has it. No
communication: every rank draws the same full pieces and slices its own part."""

from __future__ import annotations

from collections import defaultdict
from typing import Callable, Iterator

import torch
from torch import nn

from parbench.models.build import to_empty_keeping_ties


def init_pieces(model: nn.Module) -> Iterator[tuple[str, nn.Module]]:
    """(name, module) of the pieces materialised one at a time: the top-level children, with a
    ModuleDict/ModuleList (the layers) split into its blocks."""
    for name, child in model.named_children():
        if isinstance(child, (nn.ModuleDict, nn.ModuleList)):
            for sub, block in child.named_children():
                yield f"{name}.{sub}", block
        else:
            yield name, child


def parameter_aliases(model: nn.Module) -> dict[str, list[str]]:
    """Each parameter name -> every name of that parameter (tied weights have several)."""
    by_param: dict[int, list[str]] = defaultdict(list)
    for name, p in model.named_parameters(remove_duplicate=False):
        by_param[id(p)].append(name)
    return {name: names for names in by_param.values() for name in names}


@torch.no_grad()
def materialize_like_unsharded(sharded: nn.Module, unsharded: nn.Module, device: torch.device,
                               init_module: Callable[[nn.Module], None],
                               local_part: Callable[[str, torch.Tensor], torch.Tensor] = lambda name, full: full,
                               ) -> None:
    """Allocate `sharded` (this rank's part, still on meta) on `device` and fill its parameters
    with what `init_module`, applied to every module of `unsharded` (the same model built whole on
    meta) in `unsharded.modules()` order, gives them; `local_part(name, full)` cuts out the part of
    a full parameter that the rank holds (its tensor-parallel slice). Buffers are allocated, not filled."""
    pieces = list(init_pieces(unsharded))
    covered = {name for prefix, piece in pieces for name, _ in piece.named_parameters(prefix=prefix)}
    outside = {name for name, _ in unsharded.named_parameters()} - covered
    if outside:
        raise ValueError(f"parameters outside the model's pieces cannot be materialised piecewise: {sorted(outside)}")
    aliases = parameter_aliases(unsharded)
    to_empty_keeping_ties(sharded, device)
    held = dict(sharded.named_parameters(remove_duplicate=False))
    for prefix, piece in pieces:
        piece.to_empty(device=device)
        for module in piece.modules():
            init_module(module)
        for name, full in piece.named_parameters(prefix=prefix, remove_duplicate=False):
            for alias in aliases[name]:
                if alias in held:
                    held[alias].copy_(local_part(alias, full))
        piece.to_empty(device="meta")  # frees the piece before the next one
