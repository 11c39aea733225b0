"""How many device kernels one prefill runs, as the engine runs it (a replayed CUDA graph's kernels are its nodes):
between kernels a GPU idles about a microsecond, and a short element-wise kernel takes two whatever its bytes, so
a short prefill's time follows its count (H200, 4 x 128 tokens: GPT-2 XL 12.25 kernels a layer, the 1B Llama 16.0;
docs/results/2026-11-29_short_kernels31.md). `parbench calibrate` prices a replayed prefill per kernel from it."""

from __future__ import annotations

import torch
from torch.profiler import ProfilerActivity, profile

from parbench.models.kv_cache import KVCache
from parbench.workloads.inference.model_parallel import PipelinedDecoder


@torch.no_grad()
def prefill_kernels(decoder: PipelinedDecoder, cache: KVCache, prompts: torch.Tensor, sample) -> int:
    """Device operations (kernels, memsets, copies) this rank runs in one prefill of `prompts`, from a CUDA-only
    profile (no CPU ops recorded: nothing is added to what the prefill launches)."""
    cache.reset()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        decoder.step(prompts, cache, sample)
        torch.cuda.synchronize()
    return sum(1 for event in prof.events() if event.device_type == torch.autograd.DeviceType.CUDA)
