"""Which step of building and running Mixtral's native engine makes a standalone 2-row grouped GEMM of its w1 shape
(randn B, experts 0 and 1) run at 99 µs rather than a fresh process's 115 (calls 5, 7-9)? Its CUTLASS kernel's median
(profiler, eager, 30 calls) after each step: a one-rank process group; the model built; its projections fused and the
compiled decode chosen; a generate (compile and graph capture); three decode steps. Usage (one GPU, from benchmarks/):
python ../docs/results/2026-11-29_mixtral31/bisect_engine.py"""

from types import SimpleNamespace

import torch

from decode_mbu import single_device_env
from parbench.models.llama import fuse_projections
from parbench.planner import compose_config
from parbench.workloads.inference.decode_step import decode_options
from parbench.workloads.inference.model_parallel import PipelinedDecoder, build_shard
from parbench.workloads.inference.native import generate, greedy, synthetic_prompts
from warm import cutlass_us


def main() -> None:
    x = torch.randn(2, 4096, dtype=torch.bfloat16, device="cuda")
    offs = torch.tensor([1, 2, 2, 2, 2, 2, 2, 2], device="cuda", dtype=torch.int32)
    b = torch.randn(8, 4096, 14336, dtype=torch.bfloat16, device="cuda")
    calls = lambda: [torch.nn.functional.grouped_mm(x, b, offs=offs) for _ in range(30)]  # noqa: E731
    show = lambda step: print(f"{step}: {cutlass_us(calls):.1f} µs", flush=True)  # noqa: E731
    show("fresh")
    torch._dynamo.config.cache_size_limit = 64
    model_cfg = compose_config(["model=mixtral_8x7b"]).model
    env, dtype = single_device_env("cuda"), torch.bfloat16
    show("process group")
    decoder = PipelinedDecoder(build_shard(model_cfg, 0, env, dtype), env, dtype)
    show("model built")
    fuse_projections(decoder.model)
    decoder.use(decode_options("compile", "cuda"))
    show("fused, compiled decode chosen")
    w = SimpleNamespace(input_len=256, output_len=16, batch_size=1)
    cache = decoder.kv_cache(1, 272)
    prompt = synthetic_prompts(SimpleNamespace(workload=w, seed=0, model=model_cfg), 0, env.device)
    generate(decoder, cache, prompt, 16, env.device)
    show("after a generate")
    cache.reset()
    with torch.no_grad():
        tokens = decoder.step(prompt, cache, greedy)
        for _ in range(3):
            tokens = decoder.step(tokens[:, None], cache, greedy)
    show("after 3 decode steps")
    with torch.no_grad():
        for _ in range(3):
            tokens = decoder.step(tokens[:, None], cache, greedy)
        show("after 3 more, under no_grad")


if __name__ == "__main__":
    main()
