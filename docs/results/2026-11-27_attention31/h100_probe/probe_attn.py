"""Probe (not shipped): a decode step's attention per kind timed three ways beside the engine's kernels."""
import statistics, sys, torch
from parbench.models.kv_cache import one_token_attention
from parbench.metrics.timing import time_each, time_graphed
dev = torch.device("cuda")
ENGINE = {  # per-layer engine attention kernel µs (inference_kernels, H100 2026-11-27)
    (32, 32, 8, 1088, 64): 48.4, (1, 32, 8, 4160, 64): 68.4, (1, 32, 8, 576, 64): 12.6,
    (32, 32, 8, 576, 128): 35.7, (1, 32, 8, 576, 128): 15.8,
    (16, 32, 32, 1088, 128): 99.6, (2, 32, 32, 1088, 128): 20.2, (1, 32, 32, 576, 128): 10.5,
    (32, 25, 25, 576, 64): 49.9, (8, 25, 25, 576, 64): 15.0, (1, 25, 25, 576, 64): 7.6}
for shape, engine in ENGINE.items():
    b, h, kvh, pos, d = shape
    n = max(4, int(2e9 // (2 * b * kvh * pos * d * 2)))
    n = min(n, 40)
    q = torch.randn(b, h, 1, d, dtype=torch.bfloat16, device=dev)
    caches = [[torch.randn(b, kvh, pos, d, dtype=torch.bfloat16, device=dev) for _ in range(2)] for _ in range(n)]
    vis = torch.ones(1, pos, dtype=torch.bool, device=dev)
    eager = lambda i: one_token_attention(q, *caches[i % n], vis)
    t_each = statistics.median(time_each(eager, 50, dev, warmup=5))
    t_graph = time_graphed(eager, n, 20)
    comp = torch.compile(one_token_attention, dynamic=False)
    cfn = lambda i: comp(q, *caches[i % n], vis)
    for i in range(3): cfn(i)
    t_cgraph = time_graphed(cfn, n, 20)
    print(f"{'x'.join(map(str, shape)):>20}: engine {engine:6.1f}  each {t_each*1e6:6.1f}  graphed {t_graph*1e6:6.1f}  compiled+graphed {t_cgraph*1e6:6.1f} µs", flush=True)
    del caches
    torch.cuda.empty_cache()
