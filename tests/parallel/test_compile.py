"""workload.compile: torch.compile of every block and of the loss computes what eager does."""

from __future__ import annotations

import pytest
import torch
from test_tp_cp import TRAIN, single_process_losses
from torch import nn
from torch.distributed._functional_collectives import AsyncCollectiveTensor

from parbench.parallel.compile import compile_block


@pytest.fixture(scope="module")
def eager_reference(tmp_path_factory) -> list[float]:
    return single_process_losses(tmp_path_factory.mktemp("eager"))


class AsyncCollectiveOutput(torch.autograd.Function):
    """Stands for a collective inside an autograd.Function (DTensor's Redistribute): its output is
    an AsyncCollectiveTensor that requires grad through the Function while the tensor it wraps
    does not, as DTensor.to_local() returns after `redistribute(async_op=True)`."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> AsyncCollectiveTensor:
        return AsyncCollectiveTensor(x.clone())

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        return grad


def input_gradient(block: nn.Module) -> torch.Tensor:
    source = torch.linspace(-1, 1, 16).view(2, 8).requires_grad_()
    x = AsyncCollectiveOutput.apply(source)
    assert isinstance(x, AsyncCollectiveTensor) and x.requires_grad and not x.elem.requires_grad
    block(x).square().sum().backward()
    return source.grad


class Residual(nn.Module):
    """x + linear(x): the input's gradient has a direct path, as in a transformer block."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.linear(x)


def test_compiled_block_passes_the_gradient_to_an_async_collective_input():
    torch.manual_seed(0)
    block = Residual()
    expected = input_gradient(block)
    # Without the wait before the compiled region, torch 2.13's AOTAutograd drops this edge: zeros.
    torch.testing.assert_close(input_gradient(compile_block(block)), expected)


@pytest.mark.slow
def test_compiled_fsdp_matches_eager_single_process(cli, eager_reference):
    # The reference's 4 sequences per step, 2 on each fsdp rank.
    cli.run(*TRAIN, "parallel=fsdp", "workload.global_batch_size=4", "workload.compile=true")
    # Inductor fuses and reorders fp32 reductions: equal to rounding, not bit for bit.
    assert cli.losses() == pytest.approx(eager_reference, rel=1e-4)


@pytest.mark.slow
def test_compiled_tp_and_sp_match_eager_single_process(cli, eager_reference):
    """The first compiled block's input is the vocab-parallel embedding's async all-reduce (tp)
    or reduce-scatter (sp) result: its gradient must reach the embedding."""
    cli.run(*TRAIN, "parallel=tp,sp", "workload.compile=true", multirun=True)
    for job in (0, 1):
        assert cli.losses(job) == pytest.approx(eager_reference, rel=1e-4)


@pytest.mark.slow
def test_compiled_dropless_moe_in_bf16_matches_eager(cli):
    """In bf16 the MoE's experts run as grouped GEMMs with offsets on the device, so the full-graph block compile
    traces its dispatch (models/moe.py); eager and compiled steps see the same losses, to bf16's rounding."""
    cli.run("model=tiny_moe", "workload.dtype=bf16", "workload.steps=4", "workload.warmup_steps=1",
            "profile.enabled=false", "hardware.gpus_per_node=1", "workload.compile=false,true", multirun=True)
    eager, compiled = cli.losses(0), cli.losses(1)
    assert len(eager) == 5 and compiled == pytest.approx(eager, rel=1e-2)
