"""Grouped GEMMs (F.grouped_mm, bf16) of the 2.5B MoE's expert shapes with the rows split evenly over 8 experts, as
the moe_2_5b router at its initialisation splits them (top 2 of 8 over random tokens), and with one expert taking
twice its share: µs a call, CUDA events over 50 calls after 10."""
import torch
import torch.nn.functional as F

from parbench.config.schema import ModelConfig, load_presets
from parbench.models.moe import MoE, group_by_expert

cfg: ModelConfig = load_presets("model", ModelConfig, skip="hf")["moe_2_5b"]
torch.manual_seed(0)
E, H, FF = cfg.experts, cfg.hidden, cfg.ffn


def timed_us(fn, iters: int = 50) -> float:
    for _ in range(10):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / iters


def router_counts(tokens: int) -> torch.Tensor:
    moe = MoE(cfg).cuda()
    moe.init_weights(0.02)
    x = torch.randn(tokens, H, device="cuda")
    ids = torch.topk(moe.router(x), cfg.top_k, dim=-1).indices.flatten()
    return group_by_expert(ids, E)[0]


for tokens in (2048, 4096):
    rows = tokens * cfg.top_k
    even = torch.full((E,), rows // E, device="cuda")
    skewed = torch.full((E,), rows // (E + 1), device="cuda")
    skewed[0] += rows - int(skewed.sum())
    splits = {"even": even, "router": router_counts(tokens), "one expert x2": skewed}
    for (k, n), name in (((H, FF), "w1/w3"), ((FF, H), "w2")):
        x = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(E, k, n, device="cuda", dtype=torch.bfloat16)
        for split, counts in splits.items():
            offs = counts.cumsum(0, dtype=torch.int32)
            us = timed_us(lambda: F.grouped_mm(x, w, offs=offs))
            print(f"{rows} rows x {k} x {n} ({name}), {split} {counts.tolist()}: {us:.1f} us", flush=True)
