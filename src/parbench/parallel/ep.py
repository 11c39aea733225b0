"""MoE across ranks. Every data-parallel MoE run averages the router statistics of the
load-balancing loss over the ranks holding the step's other tokens (so it sees the global batch,
as on one device). With parallel.ep > 1, expert parallel: each ep rank keeps E/ep of the stacked
experts, and routed tokens travel to their expert's rank and back by all-to-all with uneven
splits (functional collectives, autograd-correct). Under FSDP the expert weights are sharded over
the remaining data-parallel ranks (edp) while the rest of the model is sharded over fsdp.

The ep group is carved out of the dp*fsdp*cp ranks. The main mesh's dims stay as they are; a
second DeviceMesh over the same ranks, (pp, tp, edp, ep), regroups the dp*fsdp*cp ranks of each
(pp, tp) coordinate as edp x ep with ep innermost (adjacent ranks, the fastest links)."""

from __future__ import annotations

from typing import Callable

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import fully_shard

from parbench.config.schema import Config
from parbench.models.moe import MoE, GroupedExperts
from parbench.distenv import DistEnv
from parbench.parallel.model import ParallelModel
from parbench.config.dims import ParallelDims
from parbench.parallel.fsdp import mixed_precision_policy

# torch 2.13 renamed all_gather_tensor_autograd (kept, deprecated); torch 2.11 has only the old name.
_all_gather_autograd = getattr(funcol, "all_gather_single_autograd", None) or funcol.all_gather_tensor_autograd


def token_ranks(dims: ParallelDims) -> int:
    """How many ranks see different tokens of a step (data and context parallel)."""
    return dims.dp * dims.fsdp * dims.cp


def expert_mesh(env: DistEnv) -> DeviceMesh:
    """(pp, tp, edp, ep) over the main mesh's ranks: dp*fsdp*cp regrouped as edp x ep."""
    d = env.dims
    ranks = env.mesh.mesh.permute(0, 4, 1, 2, 3).reshape(d.pp, d.tp, token_ranks(d) // d.ep, d.ep)
    return DeviceMesh(env.device.type, ranks, mesh_dim_names=("pp", "tp", "edp", "ep"))


def token_group_mean(group: dist.ProcessGroup) -> Callable[[torch.Tensor], torch.Tensor]:
    """Mean over the group's ranks. The all-gather's backward (reduce-scatter, sum) hands each
    rank the gradient every rank's copy of the loss sends it; data-parallel averaging then gives
    the single-device gradient."""
    def mean(stats: torch.Tensor) -> torch.Tensor:
        gathered = _all_gather_autograd(stats.unsqueeze(0), 0, group)
        return gathered.mean(dim=0)
    return mean


def expert_parallel_dispatch(group: dist.ProcessGroup, ep: int):
    """MoE.dispatch_fn over an ep group: routed tokens (sorted by global expert, `counts` per
    expert; rank j owns experts [j*E/ep, (j+1)*E/ep)) go to their expert's rank, run there, come back."""
    def dispatch(experts: GroupedExperts, routed: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        send_counts = counts.view(ep, -1)  # [destination rank, its local expert]
        recv_counts = torch.empty_like(send_counts)
        dist.all_to_all_single(recv_counts, send_counts, group=group)  # [source rank, my local expert]
        send_splits, recv_splits = send_counts.sum(1).tolist(), recv_counts.sum(1).tolist()
        received = funcol.all_to_all_single_autograd(routed, recv_splits, send_splits, group)
        # Received rows come grouped by source rank, then local expert: regroup by expert.
        local_experts = recv_counts.shape[1]
        expert_of_row = torch.arange(local_experts, device=routed.device).repeat(ep).repeat_interleave(
            recv_counts.flatten())
        by_expert = expert_of_row.argsort(stable=True)
        out = experts(received[by_expert], recv_counts.sum(0))
        back = out[by_expert.argsort()]
        return funcol.all_to_all_single_autograd(back, send_splits, recv_splits, group)
    return dispatch


def keep_local_experts(experts: GroupedExperts, ep_rank: int, ep: int) -> None:
    """Replace the stacked [E, ...] weights by this rank's E/ep slice (works on meta too)."""
    for name, weight in list(experts.named_parameters(recurse=False)):
        local = weight.detach().chunk(ep, dim=0)[ep_rank].clone()
        setattr(experts, name, nn.Parameter(local))


def moe_layers(pmodel: ParallelModel) -> list[MoE]:
    return [m for part in pmodel.parts for m in part.modules() if isinstance(m, MoE)]


def apply(pmodel: ParallelModel, env: DistEnv, cfg: Config) -> ParallelModel:
    d = env.dims
    mesh = expert_mesh(env)
    stats_mean = token_group_mean(mesh["edp", "ep"]._flatten("tokens").get_group())
    for moe in moe_layers(pmodel):
        moe.router_stats_mean_fn = stats_mean
    if d.ep == 1:
        return pmodel
    ep_group = mesh["ep"].get_group()
    for moe in moe_layers(pmodel):
        keep_local_experts(moe.experts, mesh["ep"].get_local_rank(), d.ep)
        moe.dispatch_fn = expert_parallel_dispatch(ep_group, d.ep)
        if d.fsdp > 1:
            fully_shard(moe.experts, mesh=mesh["edp"], mp_policy=mixed_precision_policy(cfg),
                        reshard_after_forward=cfg.parallel.fsdp_reshard_after_forward)
            # An expert's gradient already sums its ep group's tokens; dividing the edp sum by all
            # token ranks (not by edp) gives the mean over the global batch, as for the dense weights.
            moe.experts.set_gradient_divide_factor(float(token_ranks(d)))
            if env.device.type == "cpu" and mesh["edp"].size() > 1:
                # gloo has no PREMUL_SUM: reduce by sum, then scale. Not on one rank: FSDP's
                # one-rank path applies the factor itself and would apply it twice (torch 2.13).
                moe.experts.set_force_sum_reduction_for_comms(True)
    return pmodel


# After tp and activation checkpointing rewrite the blocks, before the dp/fsdp wrappers.
