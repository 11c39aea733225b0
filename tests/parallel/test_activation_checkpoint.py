"""Activation checkpointing on an MoE block under bf16 autocast (the experts' grouped GEMM path): every mode gives the
unchecked gradients; selective recomputes element-wise work but no matmul, the experts' grouped GEMMs included, and
full recomputes them all."""

from __future__ import annotations

import collections

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from parbench.models.build import build_model
from parbench.parallel import activation_checkpoint
from parbench.parallel.model import ParallelModel
from conftest import compose

MATMULS = {"aten.mm.default", "aten.addmm.default", "aten.bmm.default", "aten._grouped_mm.default"}


class CountOps(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[str(func)] += 1
        return func(*args, **(kwargs or {}))


def backward_ops(mode: str) -> tuple[collections.Counter, list[torch.Tensor]]:
    """The aten ops one backward of tiny_moe dispatches under `mode`, and the parameters' gradients."""
    cfg = compose("model=tiny_moe", f"workload.activation_checkpointing={mode}")
    torch.manual_seed(0)
    model = build_model(cfg.model, "cpu")
    model.init_weights()
    if mode != "none":
        activation_checkpoint.apply(ParallelModel([model]), None, cfg)
    tokens = torch.randint(0, cfg.model.vocab, (2, 16))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = F.cross_entropy(model(tokens).flatten(0, 1).float(), tokens.flatten())
    with CountOps() as counted:
        loss.backward()
    return counted.ops, [p.grad for p in model.parameters()]


def matmuls(ops: collections.Counter) -> int:
    return sum(n for op, n in ops.items() if op in MATMULS)


@pytest.fixture(scope="module")
def runs():
    return {mode: backward_ops(mode) for mode in ("none", "selective", "full")}


def test_every_mode_gives_the_same_gradients(runs):
    reference = runs["none"][1]
    for mode in ("selective", "full"):
        for got, want in zip(runs[mode][1], reference):
            torch.testing.assert_close(got, want, rtol=2e-2, atol=1e-3)


def test_selective_recomputes_no_matmul_and_full_recomputes_them(runs):
    none, selective, full = (runs[mode][0] for mode in ("none", "selective", "full"))
    assert none["aten._grouped_mm.default"] > 0  # the experts ran grouped
    assert matmuls(selective) == matmuls(none)
    assert selective["aten._grouped_mm.default"] == none["aten._grouped_mm.default"]
    assert selective["aten.mul.Tensor"] > none["aten.mul.Tensor"]  # its element-wise work is recomputed
    assert full["aten._grouped_mm.default"] > none["aten._grouped_mm.default"]
    assert matmuls(full) > matmuls(none)
