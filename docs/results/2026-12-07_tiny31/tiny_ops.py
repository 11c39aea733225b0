"""Issue 31, 2026-12-07: the kernels of a tiny model's replayed prefill, each timed two ways: in a CUDA graph of 40
calls (as the engine replays its prefill) and by events around single calls under a hold (as the calibration's matmul
and attention runs time theirs). Prints one JSON line per op.
    python docs/results/2026-12-07_tiny31/tiny_ops.py > ops.jsonl"""

import json
import statistics

import torch
import torch.nn.functional as F

from parbench.metrics.timing import time_each, time_graphed

DEV, DT = torch.device("cuda"), torch.bfloat16


def both(name: str, make, **shape) -> None:
    """`make()` -> (fn, inputs); fn(i) runs one call on a rotating set of inputs."""
    fn = make()
    graphed = time_graphed(fn, 40, 20)
    single = statistics.median(time_each(fn, 40, DEV, warmup=5))
    print(json.dumps({"op": name, **shape, "graph_us": graphed * 1e6, "events_us": single * 1e6}), flush=True)


def gemm(rows: int, k: int, n: int):
    sets = [(torch.randn(rows, k, dtype=DT, device=DEV), torch.randn(n, k, dtype=DT, device=DEV)) for _ in range(8)]
    return lambda i: F.linear(*sets[i % 8])


def attention(batch: int, seq: int, heads: int, kv_heads: int, head_dim: int):
    q = [torch.randn(batch, heads, seq, head_dim, dtype=DT, device=DEV) for _ in range(4)]
    kv = [torch.randn(batch, kv_heads, seq, head_dim, dtype=DT, device=DEV) for _ in range(4)]
    return lambda i: F.scaled_dot_product_attention(q[i % 4], kv[i % 4], kv[i % 4], is_causal=True,
                                                    enable_gqa=heads != kv_heads)


def rms_norm(rows: int, width: int):
    x, w = torch.randn(rows, width, dtype=DT, device=DEV), torch.ones(width, dtype=DT, device=DEV)
    return lambda i: F.rms_norm(x, (width,), w, 1e-5)


def silu_mul(rows: int, width: int):
    x = torch.randn(rows, 2 * width, dtype=DT, device=DEV)
    return lambda i: F.silu(x[:, :width]) * x[:, width:]


def main() -> None:
    for tokens in (64, 256, 512, 1024, 2048, 4096):
        for k, n in ((64, 64), (64, 128), (64, 352), (176, 64), (1024, 1024), (2048, 512), (2048, 2048)):
            both("gemm", lambda: gemm(tokens, k, n), rows=tokens, k=k, n=n)
    for batch, seq in ((1, 64), (4, 64), (4, 128), (16, 128), (4, 512)):
        both("sdpa", lambda: attention(batch, seq, 4, 2, 16), batch=batch, seq=seq, heads=4, kv_heads=2, head_dim=16)
    both("sdpa", lambda: attention(4, 128, 32, 8, 64), batch=4, seq=128, heads=32, kv_heads=8, head_dim=64)
    for rows in (256, 512, 4096):
        both("rms_norm", lambda: rms_norm(rows, 64), rows=rows, width=64)
        both("silu_mul", lambda: silu_mul(rows, 176), rows=rows, width=176)


if __name__ == "__main__":
    main()
