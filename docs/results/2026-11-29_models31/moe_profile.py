"""Where one MoE layer of moe_2_5b spends its time on one GPU: forward at decode size (bf16 weights, no grad) and
forward+backward at a training step's tokens (fp32 weights under bf16 autocast), each timed with CUDA syncs and
profiled (the ops with the most device and host time)."""
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

from parbench.config.schema import ModelConfig, load_presets
from parbench.models.moe import MoE

cfg: ModelConfig = load_presets("model", ModelConfig, skip="hf")["moe_2_5b"]
torch.manual_seed(0)


def timed(fn, n: int = 5) -> float:
    fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / n


def report(name: str, fn) -> None:
    print(f"== {name}: {timed(fn) * 1e3:.2f} ms a call (synced)", flush=True)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    ka = prof.key_averages()
    print(ka.table(sort_by="self_cuda_time_total", row_limit=12, max_name_column_width=40))
    print(ka.table(sort_by="self_cpu_time_total", row_limit=12, max_name_column_width=40))


def decode(moe: MoE, x: torch.Tensor):
    with torch.no_grad():
        return moe(x)


def train(moe: MoE, x: torch.Tensor):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = moe(x)
    out.float().square().mean().backward()


moe = MoE(cfg).cuda()
moe.init_weights(0.02)
bf16 = MoE(cfg).cuda().to(torch.bfloat16)
bf16.init_weights(0.02)
report("decode, 4 tokens, bf16", lambda: decode(bf16, torch.randn(4, 1, cfg.hidden, device="cuda", dtype=torch.bfloat16)))
report("prefill, 4 x 512 tokens, bf16", lambda: decode(bf16, torch.randn(4, 512, cfg.hidden, device="cuda", dtype=torch.bfloat16)))
x = torch.randn(2, 2048, cfg.hidden, device="cuda", requires_grad=True)
report("train fwd+bwd, 2 x 2048 tokens, fp32 weights, bf16 autocast", lambda: train(moe, x))
sys.stdout.flush()
