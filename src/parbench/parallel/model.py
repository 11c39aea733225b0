"""The model after the strategies: its parts on this rank and how a step runs; `parallelize` applies
every enabled strategy of the table in parbench.parallel.specs, in order."""

from __future__ import annotations

from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator

import torch
import torch.nn.functional as F
from torch import nn

from parbench.config.schema import Config
from parbench.distenv import DistEnv, is_dtensor
from parbench.parallel.specs import STRATEGIES
from parbench.registry import load_ref


def token_cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean next-token loss over [batch, seq, vocab] logits, computed in fp32. Vocab-parallel
    logits (tp, inside loss_parallel) give a replicated DTensor: its local value is the loss."""
    loss = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten())
    return loss.to_local() if is_dtensor(loss) else loss


@dataclass
class ParallelModel:
    """The model after every enabled strategy. `parts` are the modules this rank holds (several
    under pipeline parallelism); `forward_backward(inputs, labels) -> loss` runs one step's
    forward and backward, and a strategy that changes how a step runs (pp) replaces it.
    `step_contexts` make the context managers (loss_parallel, context_parallel) that a step's
    forward, loss and backward run inside: whoever sets forward_backward enters `step_context()`.
    A strategy whose engine owns the optimizer (DeepSpeed) sets `backward(loss)` and
    `optimizer_step()` (the step, then zeroing the gradients); otherwise the workload builds one."""

    parts: list[nn.Module]
    forward_backward: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = token_cross_entropy
    handles_mixed_precision: bool = False
    backward: Callable[[torch.Tensor], None] = torch.Tensor.backward
    optimizer_step: Callable[[], None] | None = None
    # Measurements of the step just run, read after it (pp: bubble_pct), and figures the layout
    # fixes (pp: bubble_pct_theory); the train workload logs both.
    step_metrics: Callable[[], dict[str, float]] = dict
    metrics: dict[str, float] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    step_contexts: list[Callable[[], AbstractContextManager]] = field(default_factory=list)

    @contextmanager
    def step_context(self) -> Iterator[None]:
        with ExitStack() as stack:
            for make in self.step_contexts:
                stack.enter_context(make())
            yield

    def parameters(self):
        for part in self.parts:
            yield from part.parameters()


def parallelize(model: nn.Module, env: DistEnv, cfg: Config) -> ParallelModel:
    """Apply every enabled strategy to the model, in order."""
    pmodel = ParallelModel(parts=[model])
    for name in sorted(STRATEGIES.names(), key=lambda n: STRATEGIES.get(n).order):
        strategy = STRATEGIES.get(name)
        if strategy.enabled(env.dims, cfg):
            pmodel = load_ref(strategy.apply)(pmodel, env, cfg)
    return pmodel
