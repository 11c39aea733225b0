"""Where a 2-row grouped GEMM of Mixtral's shape spends its time, on the device's timeline: in the matmul
microbenchmark's graph (40 calls, the calibration's way, splits and inputs as measure_shape makes them) and in the
native engine's decode of Mixtral at batch 1 (a CUDA graph a step). For each CUTLASS grouped kernel: its duration,
the grouped GEMM's prepare kernel before it and the gaps around them, and a call's period (one grouped kernel's start
to the next's, in the microbenchmark). Usage (one GPU, from benchmarks/): python ../docs/results/2026-11-29_mixtral31/grouped_timeline.py"""

import statistics
import sys
from types import SimpleNamespace

import torch

from decode_mbu import single_device_env
from parbench.metrics.timing import time_graphed
from parbench.models.llama import fuse_projections
from parbench.planner import compose_config
from parbench.workloads.inference.decode_step import decode_options
from parbench.workloads.inference.model_parallel import PipelinedDecoder, build_shard
from parbench.workloads.inference.native import generate, greedy, synthetic_prompts
from parbench.workloads.microbench.matmul import grouped_multiply, rotated_inputs, row_splits

SHAPES = ([2, 4096, 14336], [2, 14336, 4096])


def kernels(run) -> list:
    """The device's kernels while `run` runs, in start order."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return sorted(events, key=lambda e: e.time_range.start)


def summary(label: str, events: list) -> None:
    """Medians over the grouped calls: the CUTLASS kernel, the prepare kernel, the gaps, the period."""
    rows = {"cutlass": [], "prepare": [], "gap prepare->cutlass": [], "gap before prepare": [], "period": []}
    starts = []
    for i, e in enumerate(events):
        if "cutlass" not in e.name or "prepare" in e.name:
            continue
        rows["cutlass"].append(e.time_range.end - e.time_range.start)
        starts.append(e.time_range.start)
        before = events[i - 1] if i else None
        if before is not None and "prepare" in before.name:
            rows["prepare"].append(before.time_range.end - before.time_range.start)
            rows["gap prepare->cutlass"].append(e.time_range.start - before.time_range.end)
            if i > 1:
                rows["gap before prepare"].append(before.time_range.start - events[i - 2].time_range.end)
    rows["period"] = [b - a for a, b in zip(starts, starts[1:])]
    names = sorted({events[i - 1].name[:50] for i, e in enumerate(events) if "cutlass" in e.name and "prepare" not in e.name and i})
    print(f"{label}: {len(rows['cutlass'])} grouped calls; " + ", ".join(
        f"{k} {statistics.median(v):.1f} µs" for k, v in rows.items() if v) + f"; kernels before: {names}", flush=True)


def microbenchmark(shape: list[int]) -> None:
    inputs = rotated_inputs(shape, torch.bfloat16, torch.device("cuda"), 512 << 20, False, 40, 8)  # the default rotate_bytes
    multiply = grouped_multiply(row_splits(shape[0], 8, True), False, torch.device("cuda"))
    call = lambda i: multiply(*inputs[i % len(inputs)])  # noqa: E731
    print(f"microbenchmark {shape}: graphed mean call {time_graphed(call, 40, 20) * 1e6:.1f} µs", flush=True)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for i in range(40):
            call(i)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(40):
            call(i)
    graph.replay()
    torch.cuda.synchronize()
    summary(f"microbenchmark {shape} graphed", kernels(lambda: [graph.replay() for _ in range(3)]))


def engine_decoder():
    """Mixtral's native engine on one GPU after a warm generate, and a function that decodes 3 steps from a prompt."""
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
        for _ in range(3):
            tokens = decoder.step(tokens[:, None], cache, greedy)

    return decoder, decode


def engine() -> None:
    _, decode = engine_decoder()
    with torch.no_grad():
        events = kernels(decode)
    summary("engine decode", events)
    steps = [e for e in events if e.time_range.end - e.time_range.start > 0]
    busy = sum(e.time_range.end - e.time_range.start for e in steps)
    print(f"engine decode: 3 steps, {len(steps)} kernels, {busy / 3 / 1e3:.2f} ms of kernels a step, "
          f"{(steps[-1].time_range.end - steps[0].time_range.start) / 3 / 1e3:.2f} ms first to last", flush=True)


if __name__ == "__main__":
    for shape in SHAPES:
        microbenchmark(shape)
    if "--no-engine" not in sys.argv:
        engine()
