"""Mixture of experts: top-k router, SwiGLU experts, dropless or capacity-limited dispatch,
and the Switch-Transformer load-balancing loss."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from parbench.config.schema import ModelConfig
from parbench.dtypes import GROUPED_DTYPE, torch_dtype


class GroupedExperts(nn.Module):
    """E SwiGLU experts stored as stacked weights, so expert parallel can shard dim 0; in bf16 all
    experts run as one grouped GEMM per matrix (F.grouped_mm: CUTLASS's on sm90+, a loop elsewhere)."""

    def __init__(self, experts: int, hidden: int, ffn: int):
        super().__init__()
        self.w1 = nn.Parameter(torch.empty(experts, hidden, ffn))
        self.w2 = nn.Parameter(torch.empty(experts, ffn, hidden))
        self.w3 = nn.Parameter(torch.empty(experts, hidden, ffn))

    def forward(self, x: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        """x holds tokens sorted by expert, counts[e] of them for local expert e. In bf16 on sm90+ the offsets stay
        on the device: no host sync, so the host keeps queueing (and a CUDA graph can hold the step); elsewhere
        grouped_mm reads them on the host. x is cast once for w1 and w3, so their input gradients add in bf16."""
        dtype = matmul_dtype(x)
        x, w1, w2, w3 = (t.to(dtype) for t in (x, self.w1, self.w2, self.w3))
        if dtype != torch_dtype(GROUPED_DTYPE):  # one GEMM per expert
            chunks = torch.split(x, counts.tolist(), dim=0)
            weights = zip(w1.unbind(0), w3.unbind(0), w2.unbind(0))  # unbind's backward stacks the experts' gradients
            return torch.cat([swiglu(chunk, *w) for chunk, w in zip(chunks, weights)], dim=0)
        offs = counts.cumsum(0, dtype=torch.int32)
        h = F.silu(F.grouped_mm(x, w1, offs=offs)) * F.grouped_mm(x, w3, offs=offs)
        return F.grouped_mm(h, w2, offs=offs)


def swiglu(x: torch.Tensor, w1: torch.Tensor, w3: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    return (F.silu(x @ w1) * (x @ w3)) @ w2


def matmul_dtype(x: torch.Tensor) -> torch.dtype:
    """The dtype autocast runs a matmul in here (grouped_mm is not on autocast's lists)."""
    device = x.device.type
    return torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else x.dtype


class MoE(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.num_experts, self.top_k = cfg.experts, cfg.top_k
        self.capacity_factor = cfg.capacity_factor
        self.router = nn.Linear(cfg.hidden, cfg.experts, bias=False)
        self.experts = GroupedExperts(cfg.experts, cfg.hidden, cfg.ffn)
        self.aux_loss = torch.zeros(())
        # Expert parallel replaces this with an all-to-all dispatch over the ep group.
        self.dispatch_fn = local_dispatch
        # Data/expert parallel replace this with a mean over the ranks holding the step's other
        # tokens, so the load-balancing loss sees the global batch as on one device.
        self.router_stats_mean_fn = local_mean

    def init_weights(self, std: float) -> None:
        for w in (self.experts.w1, self.experts.w2, self.experts.w3):
            nn.init.trunc_normal_(w, std=std)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        tokens = x.reshape(-1, shape[-1])
        probs = F.softmax(self.router(tokens), dim=-1, dtype=torch.float32)
        weights, expert_ids = probs.topk(self.top_k, dim=-1)
        weights = (weights / weights.sum(dim=-1, keepdim=True)).type_as(x)
        # inference has no loss to balance (its kernels would only lengthen each step): aux_loss keeps the last
        # training forward's, which only the train workload reads
        if self.training:
            self.aux_loss = self.load_balancing_loss(probs, expert_ids)
        choices = self.kept_choices(expert_ids)  # (token, choice) pairs, flattened
        counts, order = group_by_expert(expert_ids.flatten()[choices], self.num_experts)
        choices = choices[order]
        expert_out = self.dispatch_fn(self.experts, tokens[choices // self.top_k], counts)
        # Back to (token, choice) order (each pair at most once: a plain scatter, no atomic adds; dropped pairs
        # stay zero), then each token's choices summed with its gates
        rows = expert_out.new_zeros(expert_ids.numel(), shape[-1]).index_copy_(0, choices, expert_out)
        return (rows.view(*weights.shape, -1) * weights.unsqueeze(-1)).sum(dim=1).view(shape)

    def kept_choices(self, expert_ids: torch.Tensor) -> torch.Tensor:
        """Indices of the flattened (token, choice) pairs that fit in their expert's capacity: all of
        them when dropless, without a boolean mask (whose length the host would wait for)."""
        flat = expert_ids.flatten()
        every = torch.arange(flat.numel(), device=flat.device)
        if self.capacity_factor <= 0:
            return every
        capacity = int(self.capacity_factor * expert_ids.shape[0] * self.top_k / self.num_experts)
        return every[places_in_experts(flat, self.num_experts)[1] < capacity]

    def load_balancing_loss(self, probs: torch.Tensor, expert_ids: torch.Tensor) -> torch.Tensor:
        """Switch loss E * sum_e f_e * P_e (f: share of routed tokens, P: mean router prob)."""
        f = F.one_hot(expert_ids, self.num_experts).float().sum(dim=(0, 1)) / expert_ids.numel()
        f, p = self.router_stats_mean_fn(torch.stack((f, probs.mean(dim=0)))).unbind(0)
        return self.num_experts * (f * p).sum()


def places_in_experts(ids: torch.Tensor, experts: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(pairs per expert, each pair's place among its expert's pairs, in their order), by one-hot prefix sums along
    each expert's row (a scan along an inner dimension: along the outer one, CUDA's took 1.26 ms at 8,192 pairs of 8
    experts on an H200, a quarter of the layer's training step; docs/results/2026-11-29_grouped31.md)."""
    one_hot = ids == torch.arange(experts, device=ids.device)[:, None]  # experts x pairs
    return one_hot.sum(1), one_hot.cumsum(1, dtype=torch.int32).gather(0, ids[None, :]).squeeze(0) - 1


def group_by_expert(ids: torch.Tensor, experts: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(pairs per expert, the order that groups the pairs by expert, each expert's in their own order): a counting
    sort, all on the device (bincount reads the largest id back to the host; argsort's radix sort took 34 µs a layer
    at 4,096 pairs on an H200, in one thread block)."""
    counts, place = places_in_experts(ids, experts)
    slot = (counts.cumsum(0) - counts)[ids] + place
    return counts, torch.empty_like(slot).scatter_(0, slot, torch.arange(ids.numel(), device=ids.device))


def local_dispatch(experts: GroupedExperts, routed: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """Run every expert on this rank (no expert parallelism)."""
    return experts(routed, counts)


def local_mean(stats: torch.Tensor) -> torch.Tensor:
    """Router statistics of this rank's tokens only (one device, or no data parallelism)."""
    return stats
