"""Mixture of experts: top-k router, SwiGLU experts, dropless or capacity-limited dispatch,
and the Switch-Transformer load-balancing loss."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from parbench.config.schema import ModelConfig


class GroupedExperts(nn.Module):
    """E SwiGLU experts stored as stacked weights, so expert parallel can shard dim 0."""

    def __init__(self, experts: int, hidden: int, ffn: int):
        super().__init__()
        self.w1 = nn.Parameter(torch.empty(experts, hidden, ffn))
        self.w2 = nn.Parameter(torch.empty(experts, ffn, hidden))
        self.w3 = nn.Parameter(torch.empty(experts, hidden, ffn))

    def forward(self, x: torch.Tensor, counts: list[int]) -> torch.Tensor:
        """x holds tokens sorted by expert, counts[e] of them for local expert e."""
        outs = []
        for e, chunk in enumerate(torch.split(x, counts, dim=0)):
            outs.append((F.silu(chunk @ self.w1[e]) * (chunk @ self.w3[e])) @ self.w2[e])
        return torch.cat(outs, dim=0)


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
        self.aux_loss = self.load_balancing_loss(probs, expert_ids)
        keep = self.capacity_mask(expert_ids, tokens.shape[0])
        flat_ids = expert_ids.flatten()[keep]
        order = flat_ids.argsort(stable=True)
        token_idx = torch.arange(tokens.shape[0], device=x.device).repeat_interleave(self.top_k)[keep][order]
        counts = torch.bincount(flat_ids, minlength=self.num_experts)
        expert_out = self.dispatch_fn(self.experts, tokens[token_idx], counts)
        out = torch.zeros_like(tokens)
        out.index_add_(0, token_idx, expert_out * weights.flatten()[keep][order, None])
        return out.view(shape)

    def capacity_mask(self, expert_ids: torch.Tensor, n_tokens: int) -> torch.Tensor:
        """Which (token, choice) pairs fit in their expert's capacity; all of them when dropless."""
        flat = expert_ids.flatten()
        if self.capacity_factor <= 0:
            return torch.ones_like(flat, dtype=torch.bool)
        capacity = int(self.capacity_factor * n_tokens * self.top_k / self.num_experts)
        one_hot = F.one_hot(flat, self.num_experts)
        position = (one_hot.cumsum(0) * one_hot).sum(-1) - 1
        return position < capacity

    def load_balancing_loss(self, probs: torch.Tensor, expert_ids: torch.Tensor) -> torch.Tensor:
        """Switch loss E * sum_e f_e * P_e (f: share of routed tokens, P: mean router prob)."""
        f = F.one_hot(expert_ids, self.num_experts).float().sum(dim=(0, 1)) / expert_ids.numel()
        f, p = self.router_stats_mean_fn(torch.stack((f, probs.mean(dim=0)))).unbind(0)
        return self.num_experts * (f * p).sum()


def local_dispatch(experts: GroupedExperts, routed: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """Run every expert on this rank (no expert parallelism)."""
    return experts(routed, counts.tolist())


def local_mean(stats: torch.Tensor) -> torch.Tensor:
    """Router statistics of this rank's tokens only (one device, or no data parallelism)."""
    return stats
