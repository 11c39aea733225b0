"""Context parallel: every sequence is split over the cp ranks, each holding 2 of its 2*cp chunks
(rank r: chunks r and 2cp-1-r, the head-tail load balancing of torch's context_parallel), so
every rank does the same causal-attention work. The train workload slices the batch
(`held_positions`); this strategy gives the model the positions of the tokens held (RoPE,
learned positions) and makes attention span the whole sequence:

- CUDA: torch's `context_parallel` (ring attention through DTensor; parallel.cp_rotate picks how
  K/V shards travel: allgather or alltoall).
- CPU (gloo), where torch's raises NotImplementedError for SDPA: K and V are all-gathered with
  autograd-aware functional collectives (backward reduce-scatters their gradients) and each rank
  attends its queries to the whole sequence under the causal mask of the positions held.

Gradients are averaged over the cp ranks too: dp/fsdp reduce over `DistEnv.data_mesh()`.
"""

from __future__ import annotations

from contextlib import contextmanager
from functools import lru_cache, partial
from typing import Iterator

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed._functional_collectives import all_gather_tensor_autograd
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor.experimental import context_parallel
from torch.distributed.tensor.experimental._attention import set_rotate_method

from parbench.config.schema import Config
from parbench.models.llama import Attention, causal_attention
from parbench.distenv import DistEnv
from parbench.parallel.model import ParallelModel


@lru_cache(maxsize=8)
def held_positions(seq_len: int, cp: int, rank: int, device: torch.device) -> torch.Tensor:
    """Positions of cp rank `rank`'s tokens in a sequence of `seq_len`: chunks r and 2cp-1-r."""
    chunk = seq_len // (2 * cp)
    head, tail = rank * chunk, (2 * cp - 1 - rank) * chunk
    return torch.cat([torch.arange(head, head + chunk), torch.arange(tail, tail + chunk)]).to(device)


@lru_cache(maxsize=8)
def causal_mask(local_len: int, cp: int, rank: int, device: torch.device) -> torch.Tensor:
    """[local_len, cp*local_len] mask: this rank's queries against the all-gathered keys (rank-major)."""
    seq_len = local_len * cp
    keys = torch.cat([held_positions(seq_len, cp, r, device) for r in range(cp)])
    return keys[None, :] <= held_positions(seq_len, cp, rank, device)[:, None]


class AllGatherKVAttention:
    """Attention core for CPU/gloo: gather K/V over the cp group, attend with the held-chunk mask."""

    def __init__(self, mesh: DeviceMesh):
        self.mesh = mesh
        self.cp, self.rank = mesh.size(), mesh.get_local_rank()

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        # [batch, heads, seq, head_dim]; K/V are gathered before repeating grouped heads.
        k, v = (all_gather_tensor_autograd(t.contiguous(), gather_dim=2, group=self.mesh) for t in (k, v))
        mask = causal_mask(q.shape[2], self.cp, self.rank, q.device)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=k.shape[1] != q.shape[1])


def pass_positions(mesh: DeviceMesh, module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """Forward pre-hook: the model gets the positions of the tokens this rank holds."""
    local_len = args[0].shape[1]
    held = held_positions(local_len * mesh.size(), mesh.size(), mesh.get_local_rank(), args[0].device)
    return args, {**kwargs, "positions": held}


@contextmanager
def torch_context_parallel(mesh: DeviceMesh) -> Iterator[torch.Tensor]:
    """Every SDPA call inside runs torch's ring attention over `mesh`. context_parallel shards the
    buffers it is given, but the batch arrives sharded already (same layout), so it gets only a
    2*cp-long arange: its shard shows the chunks torch assumes this rank holds."""
    layout = torch.arange(2 * mesh.size(), device=mesh.device_type)
    with context_parallel(mesh, buffers=[layout], buffer_seq_dims=[0], no_restore_buffers={layout}):
        yield layout


def check_torch_layout(mesh: DeviceMesh) -> None:
    """Fail at setup, not with silently wrong attention, if torch's chunk layout differs from ours."""
    with torch_context_parallel(mesh) as layout:
        expected = held_positions(2 * mesh.size(), mesh.size(), mesh.get_local_rank(), layout.device)
        if not torch.equal(layout, expected):
            raise RuntimeError(f"torch's context_parallel holds chunks {layout.tolist()} on cp rank "
                               f"{mesh.get_local_rank()}, parbench expects {expected.tolist()}: "
                               "update parbench.parallel.cp.held_positions to torch's load balancer")


def apply(pmodel: ParallelModel, env: DistEnv, cfg: Config) -> ParallelModel:
    mesh = env.mesh["cp"]
    for part in pmodel.parts:
        part.register_forward_pre_hook(partial(pass_positions, mesh), with_kwargs=True)
    if env.device.type == "cuda":
        set_rotate_method(cfg.parallel.cp_rotate)
        check_torch_layout(mesh)
        pmodel.step_contexts.append(partial(torch_context_parallel, mesh))
        # torch's ring attention dispatches the fused SDPA kernels, with equal head counts.
        attention = partial(causal_attention, native_gqa=False)
    else:
        attention = AllGatherKVAttention(mesh)
    for part in pmodel.parts:
        for module in part.modules():
            if isinstance(module, Attention):
                module.attention_fn = attention
    return pmodel


# After tp (which must see the plain modules), before checkpointing and data-parallel wrappers.
