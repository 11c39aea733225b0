"""The engine's grouped GEMM kernels in Mixtral's decode step, by full name and duration, beside one standalone
F.grouped_mm of the same shape (engine_vs_microbench.py): which CUTLASS kernel each runs.
Usage (GPU, from benchmarks/): python ../docs/results/2026-11-29_scale31/engine_kernels.py"""

import statistics
from collections import defaultdict
from types import SimpleNamespace

import torch
import torch.nn.functional as F

from decode_mbu import single_device_env
from parbench.models.llama import fuse_projections
from parbench.planner import compose_config
from parbench.workloads.inference.decode_step import decode_options
from parbench.workloads.inference.model_parallel import PipelinedDecoder, build_shard
from parbench.workloads.inference.native import generate, greedy, synthetic_prompts


def cutlass_kernels(run) -> dict[str, list[float]]:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    times = defaultdict(list)
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA and "cutlass" in e.name and "prepare" not in e.name:
            times[e.name].append(e.device_time_total)
    return times


def show(label: str, times: dict[str, list[float]]) -> None:
    for name, t in times.items():
        print(f"{label}: {len(t)} calls, median {statistics.median(t):.1f} µs, min {min(t):.1f}, max {max(t):.1f}\n  {name[:1500]}")


def main() -> None:
    torch._dynamo.config.cache_size_limit = 64
    model_cfg = compose_config(["model=mixtral_8x7b"]).model
    env, dtype = single_device_env("cuda"), torch.bfloat16
    decoder = PipelinedDecoder(build_shard(model_cfg, 0, env, dtype), env, dtype)
    fuse_projections(decoder.model)
    decoder.use(decode_options("compile", "cuda"))
    w = SimpleNamespace(input_len=256, output_len=16, batch_size=1)
    cache = decoder.kv_cache(1, 272)
    prompt = synthetic_prompts(SimpleNamespace(workload=w, seed=0, model=model_cfg), 0, env.device)
    generate(decoder, cache, prompt, 16, env.device)
    cache.reset()
    state = {"tokens": decoder.step(prompt, cache, greedy)}

    def decode():
        tokens = state["tokens"]
        for _ in range(4):
            tokens = decoder.step(tokens[:, None], cache, greedy)

    with torch.no_grad():
        show("engine decode", cutlass_kernels(decode))
    x = torch.randn(2, 4096, dtype=dtype, device=env.device)
    b = torch.randn(8, 4096, 14336, dtype=dtype, device=env.device)
    offs = torch.tensor([0, 1, 1, 1, 1, 2, 2, 2], device=env.device, dtype=torch.int32)
    show("standalone 2x4096x14336", cutlass_kernels(lambda: [F.grouped_mm(x, b, offs=offs) for _ in range(20)]))


if __name__ == "__main__":
    main()
