"""One MoE layer of moe_2_5b (its routing, dispatch, grouped experts and combine; no attention or norms), forward and
backward at a training step's 2 x 2048 tokens (fp32 weights, bf16 autocast), eager and compiled: each kernel's device
time a call, by name, the GEMMs apart: what a training step's non-GEMM kernels hold beyond the model's element-wise
bytes."""
from collections import defaultdict

import torch
from torch.profiler import ProfilerActivity, profile

from parbench.config.schema import ModelConfig, load_presets
from parbench.models.moe import MoE

cfg: ModelConfig = load_presets("model", ModelConfig, skip="hf")["moe_2_5b"]
torch.manual_seed(0)


def step(moe, x):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = moe(x)
    out.float().square().mean().backward()


def kernels(fn, calls: int = 5) -> dict[str, tuple[float, int]]:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    total: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            total[e.name][0] += e.device_time / calls
            total[e.name][1] += 1 / calls
    return {k: (v[0], v[1]) for k, v in total.items()}


x = torch.randn(2, 2048, cfg.hidden, device="cuda", requires_grad=True)
for name, module in (("eager", MoE(cfg).cuda()), ("compiled", torch.compile(MoE(cfg).cuda()))):
    table = kernels(lambda: step(module, x))
    gemm = {k: v for k, v in table.items() if "gemm" in k.lower() or "cutlass" in k or "nvjet" in k or "sm90_xmma" in k}
    rest = {k: v for k, v in table.items() if k not in gemm}
    print(f"== {name}: {sum(t for t, _ in table.values()) / 1e3:.3f} ms a layer's forward and backward; GEMMs "
          f"{sum(t for t, _ in gemm.values()) / 1e3:.3f} ms ({sum(n for _, n in gemm.values()):.0f} kernels), the rest "
          f"{sum(t for t, _ in rest.values()) / 1e3:.3f} ms ({sum(n for _, n in rest.values()):.0f} kernels)")
    for k, (t, n) in sorted(rest.items(), key=lambda kv: -kv[1][0])[:30]:
        print(f"  {t:8.1f} us  x{n:3.0f}  {k[:110]}")
