"""Pipeline parallel with torch.distributed.pipelining. The model is split by layers into
pp * pp_stages_per_rank stages; this rank's stages become ParallelModel.parts, so every later
strategy (tp, activation checkpointing, dp/fsdp) wraps each part, and the schedule is built at
the first step from the final, wrapped parts (PipelineStage must hold the DDP/FSDP module)."""

from __future__ import annotations

import copy

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.pipelining import (
    PipelineStage,
    Schedule1F1B,
    ScheduleGPipe,
    ScheduleInterleaved1F1B,
    ScheduleInterleavedZeroBubble,
)

from parbench.config.schema import Config
from parbench.metrics.timing import BusyTimer
from parbench.models.moe import MoE
from parbench.distenv import DistEnv
from parbench.parallel.model import ParallelModel
from parbench.parallel.specs import MULTI_STAGE_SCHEDULES

SCHEDULES = {
    "gpipe": ScheduleGPipe,
    "1f1b": Schedule1F1B,
    "interleaved_1f1b": ScheduleInterleaved1F1B,
    "zero_bubble": ScheduleInterleavedZeroBubble,
}
# Modules only the first / last stage runs (absent ones are skipped: gpt2 has pos_embeddings).
FIRST_STAGE_MODULES = ("tok_embeddings", "pos_embeddings")
LAST_STAGE_MODULES = ("norm", "output")


def stage_indices(pp_rank: int, pp: int, stages_per_rank: int) -> list[int]:
    """Looped placement: rank r holds stages r, r + pp, r + 2pp, ... (what the interleaved schedules expect)."""
    return [pp_rank + i * pp for i in range(stages_per_rank)]


def split_stage(model: nn.Module, stage: int, num_stages: int) -> nn.Module:
    """A shell of `model` running only stage `stage`'s layers; parameters are shared, not copied."""
    names = list(model.layers.keys())
    per_stage = len(names) // num_stages
    # Deep-copying with the children memoised copies the shell (and its buffers) only.
    part = copy.deepcopy(model, memo={id(child): child for child in model.children()})
    part.layers = nn.ModuleDict({n: model.layers[n] for n in names[stage * per_stage:(stage + 1) * per_stage]})
    dropped = (FIRST_STAGE_MODULES if stage > 0 else ()) + (LAST_STAGE_MODULES if stage < num_stages - 1 else ())
    for name in dropped:
        if hasattr(part, name):
            setattr(part, name, None)
    return part


def theoretical_bubble(schedule: str, pp: int, microbatches: int, stages_per_rank: int) -> float:
    """Idle fraction of an ideal pipeline with equal stage times: (p-1)/(v*m+p-1), v=1 for gpipe/1f1b.
    zero_bubble splits backward into input (B) and weight (W) passes that fill the warm-up and
    cool-down; with F=B=W the remaining bubble is (p-1)/(3*v*m+p-1) (ZB-H1, Qi et al. 2024)."""
    v = stages_per_rank if schedule in MULTI_STAGE_SCHEDULES else 1
    work = v * microbatches * (3 if schedule == "zero_bubble" else 1)
    return (pp - 1) / (work + pp - 1)


class _AuxLossInBackward(torch.autograd.Function):
    """Identity on x whose backward also seeds aux's gradient with coef: a stage's MoE
    load-balancing loss trains although only the last stage computes the loss."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, aux: torch.Tensor, coef: float) -> torch.Tensor:
        ctx.save_for_backward(aux)
        ctx.coef = coef
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (aux,) = ctx.saved_tensors
        return grad, torch.full_like(aux, ctx.coef), None


def attach_aux_losses(part: nn.Module, coef: float) -> None:
    """Make every MoE layer of `part` add coef * its load-balancing loss to the backward."""
    def hook(module: MoE, args, output: torch.Tensor) -> torch.Tensor:
        return _AuxLossInBackward.apply(output, module.aux_loss, coef)

    for module in part.modules():
        if isinstance(module, MoE):
            module.register_forward_hook(hook)


class PipelineRunner:
    """forward_backward for pp: one schedule.step over the microbatches; returns the mean
    microbatch loss, broadcast from the last stage to the whole pp group so every rank reports it."""

    def __init__(self, pmodel: ParallelModel, env: DistEnv, cfg: Config, stage_ids: list[int]):
        self.pmodel, self.env, self.cfg = pmodel, env, cfg
        self.stage_ids = stage_ids
        self.num_stages = env.dims.pp * len(stage_ids)
        self.group = env.mesh["pp"].get_group()
        last_stage_pp_rank = (self.num_stages - 1) % env.dims.pp
        self.last_stage_rank = dist.get_global_rank(self.group, last_stage_pp_rank)
        self.holds_first, self.holds_last = 0 in stage_ids, self.num_stages - 1 in stage_ids
        self.timer = BusyTimer(env.device)
        self.schedule = None

    def build_schedule(self):
        """PipelineStages over the final (wrapped) parts; their actions are timed for the bubble."""
        stages = [PipelineStage(part, i, self.num_stages, self.env.device, group=self.group)
                  for part, i in zip(self.pmodel.parts, self.stage_ids)]
        for stage in stages:
            for action in ("forward_one_chunk", "backward_one_chunk", "backward_weight_one_chunk"):
                setattr(stage, action, self.timer.wrap(getattr(stage, action)))
        name = self.cfg.parallel.pp_schedule
        schedule_cls = SCHEDULES[name]
        return schedule_cls(stages if name in MULTI_STAGE_SCHEDULES else stages[0],
                            n_microbatches=self.cfg.parallel.pp_microbatches,
                            loss_fn=self.timer.wrap(self.pmodel.loss_fn))

    def __call__(self, inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        if self.schedule is None:
            self.schedule = self.build_schedule()
        losses: list[torch.Tensor] = []
        self.timer.begin()
        with self.pmodel.step_context():  # loss_parallel under tp: the last stage's loss and backward
            self.schedule.step(*([inputs] if self.holds_first else []),
                               target=labels if self.holds_last else None, losses=losses, return_outputs=False)
        self.timer.end()
        loss = (torch.stack(losses).mean().detach() if self.holds_last
                else torch.zeros((), device=self.env.device))
        dist.broadcast(loss, src=self.last_stage_rank, group=self.group)
        return loss

    def step_metrics(self) -> dict[str, float]:
        """This rank's measured bubble: % of the schedule's span its stages did no compute."""
        return {"bubble_pct": 100.0 * self.timer.idle_fraction()}


def apply(pmodel: ParallelModel, env: DistEnv, cfg: Config) -> ParallelModel:
    (model,) = pmodel.parts
    p = cfg.parallel
    stage_ids = stage_indices(env.mesh["pp"].get_local_rank(), env.dims.pp, p.pp_stages_per_rank)
    num_stages = env.dims.pp * p.pp_stages_per_rank
    pmodel.parts = [split_stage(model, i, num_stages) for i in stage_ids]
    if cfg.model.experts and cfg.model.aux_loss_coef:
        for part in pmodel.parts:
            attach_aux_losses(part, cfg.model.aux_loss_coef)
    runner = PipelineRunner(pmodel, env, cfg, stage_ids)
    pmodel.forward_backward = runner
    pmodel.step_metrics = runner.step_metrics
    pmodel.metrics["bubble_pct_theory"] = 100.0 * theoretical_bubble(
        p.pp_schedule, env.dims.pp, p.pp_microbatches, p.pp_stages_per_rank)
    return pmodel


# First: every other strategy applies to each stage part.
