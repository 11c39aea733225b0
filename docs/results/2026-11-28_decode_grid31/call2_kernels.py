"""Issue 31, call 2: which kernels a decode attention call runs, as the attention microbenchmark times it (eager
SDPA with a bool mask, graphed) and as the engine's compiled static step runs it (LayerKVCache.attend under
torch.compile: the cache write, the mask from the position, SDPA), and without a mask; each graphed over enough
caches to miss L2, at GPT-2 XL's and the 1B Llama's decode shapes. Prints µs a call and the kernels of one call."""

import sys
from collections import defaultdict

import torch

from parbench.metrics.timing import time_graphed
from parbench.models.kv_cache import LayerKVCache, one_token_attention

DEV, DT = torch.device("cuda"), torch.bfloat16
SHAPES = [(1, 25, 25, 576, 64), (32, 25, 25, 576, 64), (24, 25, 25, 256, 64), (16, 25, 25, 384, 64),
          (25, 32, 32, 576, 64), (24, 32, 32, 576, 64), (4, 32, 8, 160, 64), (32, 32, 8, 1088, 64), (32, 32, 8, 1024, 64)]


def kernels(call, calls: int) -> dict[str, float]:
    """µs a call by kernel name, over `calls` calls."""
    for i in range(calls):
        call(i)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for i in range(calls):
            call(i)
        torch.cuda.synchronize()
    out: dict[str, float] = defaultdict(float)
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            out[e.name[:90]] += e.device_time / calls
    return dict(out)


def report(label: str, call, calls: int) -> None:
    us = time_graphed(call, calls, 20) * 1e6
    ks = kernels(call, calls)
    print(f"  {label:10s} {us:7.1f} µs a call (graphed); kernels {sum(ks.values()):6.1f} µs:", flush=True)
    for name, t in sorted(ks.items(), key=lambda kv: -kv[1]):
        print(f"      {t:7.2f}  {name}", flush=True)


@torch.compile(dynamic=None)
def static_attend(q, k_buf, v_buf, position, new):
    """LayerKVCache.attend's static path on its buffers (tensors in: one compiled function for every cache)."""
    k_buf.index_copy_(2, position, new)
    v_buf.index_copy_(2, position, new)
    visible = torch.arange(k_buf.shape[2], device=q.device) <= position
    return one_token_attention(q, k_buf, v_buf, visible[None])


def compiled_attend(q, cache: LayerKVCache, new):
    return static_attend(q, cache.k, cache.v, cache.position, new)


def main() -> None:
    for b, h, kv, p, d in SHAPES:
        nbytes = 2 * b * kv * p * d * 2
        copies = max(2, min(64, (512 << 20) // nbytes + 1))
        calls = max(copies, 32)
        print(f"== {b}x{h}x{kv}x{p}x{d}: {b * kv} blocks, {copies} caches", flush=True)
        q = torch.randn(b, h, 1, d, dtype=DT, device=DEV)
        new = torch.randn(b, kv, 1, d, dtype=DT, device=DEV)
        caches = []
        for _ in range(copies):
            c = LayerKVCache(p)
            c.allocate(b, kv, d, DT, DEV)
            c.position = torch.tensor([p - 1], device=DEV)
            caches.append(c)
        visible = torch.ones(1, p, dtype=torch.bool, device=DEV)
        report("bool mask", lambda i: one_token_attention(q, caches[i % copies].k, caches[i % copies].v, visible), calls)
        report("no mask", lambda i: one_token_attention(q, caches[i % copies].k, caches[i % copies].v), calls)
        report("compiled", lambda i: compiled_attend(q, caches[i % copies], new), calls)
        del caches
        torch.cuda.empty_cache()


if __name__ == "__main__":
    sys.exit(main())
