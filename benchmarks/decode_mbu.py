"""Native-engine decode and prefill speed on one GPU, per decode variant (issue 22):

    python benchmarks/decode_mbu.py [--model llama2_7b] [--hardware h100_sxm] [--batches 1,8,32,64] ...

Builds the model as the engine does (parbench's seeded weights, bf16, one rank), then for each
variant and batch size decodes `--repeats` measured batches after one warm-up batch (which
captures the graph / compiles the step) with the engine's own generate(): prefill of
`--input-len` tokens, then greedy decode of `--output-len` tokens, each step's tokens copied to
the host. Prints TPOT, output tok/s, MBU (engine definition: weights + KV cache at the mean
context per step, over the hardware's peak bandwidth) and decode MFU per variant and batch;
then prefill TTFT and MFU (causal FLOPs convention, metrics.inference_cost.prefill_flops) at `--prefill-len`;
and the device's measured copy/read bandwidth. `--profile` adds the top GPU kernels of a few
decode steps per variant (where the step's time goes). `--json PATH` writes every figure.

Variants (decode_step.DecodeOptions): eager (the reference: op by op, growing cache shapes,
separate projections), graph_unfused (the static-shape step as a CUDA graph, separate
projections: main's former cuda_graph=true), graph (fused projections + graph), compile (fused +
torch.compile + graph: what decode_mode=auto picks on CUDA), compile_nograph (the same compiled
steps launched without a graph). The compiled prefill (decode_mode=compile's) is measured last."""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import torch
import torch.distributed as dist
from omegaconf import OmegaConf
from torch.distributed.device_mesh import init_device_mesh

from parbench.config.schema import ModelConfig
from parbench.models.build import build_model, count_params
from parbench.models.llama import fuse_projections
from parbench.config.dims import MESH_DIMS, ParallelDims
from parbench.distenv import DistEnv
from parbench.paths import CONF_DIR
from parbench.workloads.inference.decode_step import DecodeOptions
from parbench.metrics.inference_cost import decode_bytes_per_step, decode_flops, mean_decode_context, prefill_flops
from parbench.workloads.inference.latency import mbu_metrics
from parbench.workloads.inference.model_parallel import PipelinedDecoder, build_shard
from parbench.workloads.inference.native import generate, greedy, synthetic_prompts

VARIANTS = {  # name -> options; unfused variants run first (fusing rewrites the model in place)
    "eager": DecodeOptions(),
    "graph_unfused": DecodeOptions(graph=True),
    "graph": DecodeOptions(fuse=True, graph=True),
    "compile": DecodeOptions(fuse=True, compile=True, graph=True),
    # After compile: the same compiled steps (dynamo's cache), launched without a graph.
    "compile_nograph": DecodeOptions(fuse=True, compile=True),
}


def parse_args() -> argparse.Namespace:
    ints = lambda text: [int(x) for x in text.split(",")]  # noqa: E731
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="llama2_7b", help="conf/model/<name>.yaml")
    p.add_argument("--hardware", default="h100_sxm", help="conf/hardware/<name>.yaml: peak TFLOP/s and bandwidth")
    p.add_argument("--dtype", default="bf16", choices=("bf16", "fp16", "fp32"))
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"), help="cpu: a smoke run (no graphs)")
    p.add_argument("--variants", default=",".join(VARIANTS), help=f"any of {', '.join(VARIANTS)}")
    p.add_argument("--batches", type=ints, default=[1, 8, 32, 64])
    p.add_argument("--batch1-only", default="graph_unfused",
                   help="variants measured at batch 1 only")
    p.add_argument("--input-len", type=int, default=1024)
    p.add_argument("--output-len", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--prefill-len", type=int, default=2048)
    p.add_argument("--prefill-batches", type=ints, default=[1, 8])
    p.add_argument("--profile", default="eager,graph_unfused,graph,compile",
                   help="variants whose decode kernels are listed (comma-separated)")
    p.add_argument("--json", type=Path, help="write every figure here")
    return p.parse_args()


def single_device_env(device_type: str) -> DistEnv:
    """A one-rank group and mesh, as the engine's worker has for one GPU (CPU: gloo, for a smoke run)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    device = torch.device("cuda", 0) if device_type == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=0, world_size=1, device_id=device if device.type == "cuda" else None)
    dims = ParallelDims(pp=1, dp=1, fsdp=1, cp=1, tp=1, ep=1)
    return DistEnv(0, 0, 1, device, dims, init_device_mesh(device.type, dims.mesh_shape(), mesh_dim_names=MESH_DIMS))


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def measured_bandwidth_gbps(device: torch.device) -> dict[str, float]:
    """The device's achievable bandwidth: a 4 GB copy (bytes read + written) and a 4 GB sum (read)."""
    x = torch.randn(1 << 31, dtype=torch.bfloat16, device=device)
    y = torch.empty_like(x)
    results = {}
    for name, op, moved in (("copy", lambda: y.copy_(x), 2 * x.nbytes), ("read", lambda: x.sum(), x.nbytes)):
        for _ in range(3):
            op()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(10):
            op()
        end.record()
        end.synchronize()
        results[f"{name}_gbps"] = moved * 10 / (start.elapsed_time(end) / 1e3) / 1e9
    return results


def decode_point(decoder: PipelinedDecoder, cfg: SimpleNamespace, batch: int, options: DecodeOptions) -> dict:
    """Warm-up batch, then `repeats` measured batches; TPOT (median), tok/s, MBU, decode MFU."""
    decoder.use(options)
    w = SimpleNamespace(input_len=cfg.input_len, output_len=cfg.output_len, batch_size=batch)
    cache = decoder.kv_cache(batch, cfg.input_len + cfg.output_len)
    prompts_cfg = SimpleNamespace(workload=w, seed=0, model=cfg.model)
    timings = []
    for i in range(1 + cfg.repeats):
        timing, _ = generate(decoder, cache, synthetic_prompts(prompts_cfg, i, cfg.device), cfg.output_len, cfg.device)
        timings.append(timing)
    measured = timings[1:]
    tpot = statistics.median(t.requests[0].tpot for t in measured)
    weight_bytes, kv_bytes = decode_bytes_per_step(cfg.model, cfg.counts, w, cfg.torch_dtype.itemsize)
    mbu, _ = mbu_metrics(weight_bytes, kv_bytes, tpot, 1, cfg.hw.hbm_bandwidth_gbps)
    step_flops = decode_flops(cfg.model, cfg.counts, batch, mean_decode_context(cfg.input_len, cfg.output_len))
    point = {"batch": batch, "tpot_ms": tpot * 1e3, "tok_s": batch / tpot, "mbu": mbu["mbu"],
             "bandwidth_gbps": mbu["decode_bandwidth_gbps"], "gb_per_step": (weight_bytes + kv_bytes) / 1e9,
             "decode_mfu": step_flops / tpot / (cfg.peak_tflops * 1e12),
             "memory_floor_ms": (weight_bytes + kv_bytes) / (cfg.hw.hbm_bandwidth_gbps * 1e9) * 1e3,
             "compute_floor_ms": step_flops / (cfg.peak_tflops * 1e12) * 1e3,
             "ttft_ms": statistics.median(t.requests[0].ttft for t in measured) * 1e3}
    decoder.release_graph()
    return point


def decode_kernels(decoder: PipelinedDecoder, cfg: SimpleNamespace, options: DecodeOptions, steps: int = 8) -> dict:
    """GPU time per decode step by kernel name (top 12) and the step's busy time, from torch.profiler."""
    decoder.use(options)
    cache = decoder.kv_cache(1, cfg.input_len + cfg.output_len)
    prompts_cfg = SimpleNamespace(workload=SimpleNamespace(input_len=cfg.input_len, batch_size=1), seed=0,
                                  model=cfg.model)
    with torch.no_grad():
        tokens = decoder.step(synthetic_prompts(prompts_cfg, 0, cfg.device), cache, greedy)
        for _ in range(3):  # capture / compile outside the trace
            tokens = decoder.step(tokens[:, None], cache, greedy).clone()
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(steps):
                tokens = decoder.step(tokens[:, None], cache, greedy).clone()
            torch.cuda.synchronize()
    decoder.release_graph()
    per_kernel: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            per_kernel[event.name[:90]] += event.device_time_total / steps / 1e3  # ms per step
            counts[event.name[:90]] += 1
    top = sorted(per_kernel.items(), key=lambda kv: -kv[1])[:12]
    return {"busy_ms_per_step": sum(per_kernel.values()), "kernels_per_step": sum(counts.values()) / steps,
            "top": [(name, ms, counts[name] / steps) for name, ms in top]}


def prefill_points(decoder: PipelinedDecoder, cfg: SimpleNamespace, variant: str) -> list[dict]:
    """TTFT (median of repeats after one warm-up, which compiles) and MFU of prefilling --prefill-len tokens."""
    decoder.use(VARIANTS[variant])
    points = []
    for batch in cfg.prefill_batches:
        w = SimpleNamespace(input_len=cfg.prefill_len, batch_size=batch)
        cache = decoder.kv_cache(batch, cfg.prefill_len + 1)
        ttfts = []
        for i in range(1 + cfg.repeats):
            prompts = synthetic_prompts(SimpleNamespace(workload=w, seed=0, model=cfg.model), i, cfg.device)
            timing, _ = generate(decoder, cache, prompts, 1, cfg.device)
            ttfts.append(timing.requests[0].ttft)
        ttft = statistics.median(ttfts[1:])
        flops = prefill_flops(cfg.model, cfg.counts, batch, cfg.prefill_len)
        points.append({"variant": variant, "batch": batch, "input_len": cfg.prefill_len, "ttft_ms": ttft * 1e3,
                       "tflops": flops / ttft / 1e12, "mfu": flops / ttft / (cfg.peak_tflops * 1e12)})
        del cache
        torch.cuda.empty_cache()
    return points


def print_decode_table(results: dict) -> None:
    print(f"\n{'variant':16s} {'batch':>5s} {'TPOT ms':>8s} {'tok/s':>9s} {'MBU':>7s} {'GB/s':>7s} "
          f"{'dec. MFU':>8s} {'floor mem/compute ms':>21s} bound")
    for name, points in results["decode"].items():
        for p in points:
            bound = "memory" if p["memory_floor_ms"] > p["compute_floor_ms"] else "compute"
            print(f"{name:16s} {p['batch']:5d} {p['tpot_ms']:8.2f} {p['tok_s']:9,.1f} {100 * p['mbu']:6.1f}% "
                  f"{p['bandwidth_gbps']:7,.0f} {100 * p['decode_mfu']:7.1f}% "
                  f"{p['memory_floor_ms']:10.2f} / {p['compute_floor_ms']:.2f} {bound:>8s}")
    print(results["crossover"])


def compute_bound_batch(cfg: SimpleNamespace) -> str:
    """Where batched decode turns compute-bound: the batch whose step FLOPs take longer at the peak
    than its bytes at the peak bandwidth. Each sequence adds its KV cache's bytes as well as FLOPs."""
    weight_bytes, kv_seq = decode_bytes_per_step(cfg.model, cfg.counts, SimpleNamespace(
        input_len=cfg.input_len, output_len=cfg.output_len, batch_size=1), cfg.torch_dtype.itemsize)
    context = mean_decode_context(cfg.input_len, cfg.output_len)
    flops_seq = decode_flops(cfg.model, cfg.counts, 1, context)
    peak, bandwidth = cfg.peak_tflops * 1e12, cfg.hw.hbm_bandwidth_gbps * 1e9
    weights_only = weight_bytes / bandwidth / (2 * cfg.counts.matmul_active / peak)
    margin = flops_seq / peak - kv_seq / bandwidth  # seconds of compute over memory each sequence adds
    at_context = (f"from batch {weight_bytes / bandwidth / margin:,.0f}" if margin > 0 else
                  "never: each sequence's KV cache adds more memory time than compute time")
    return (f"compute-bound decode at context {context:,.0f}: {at_context}; without the KV cache (short "
            f"contexts) from batch {weights_only:,.0f} (peak {cfg.peak_tflops:,.0f} TFLOP/s over "
            f"{cfg.hw.hbm_bandwidth_gbps:,.0f} GB/s)")


def print_other_tables(results: dict) -> None:
    for p in results["prefill"]:
        print(f"prefill {p['variant']:8s} batch {p['batch']} x {p['input_len']}: TTFT {p['ttft_ms']:,.1f} ms, "
              f"{p['tflops']:,.0f} TFLOP/s, MFU {100 * p['mfu']:.1f}% (causal FLOPs)")
    if bw := results["bandwidth"]:
        print(f"device bandwidth: copy {bw['copy_gbps']:,.0f} GB/s (read + write), read {bw['read_gbps']:,.0f} GB/s")
    for name, prof in results["kernels"].items():
        print(f"\n{name}: GPU busy {prof['busy_ms_per_step']:.2f} ms/step, {prof['kernels_per_step']:.0f} kernels/step")
        for kernel, ms, n in prof["top"]:
            print(f"  {ms:7.3f} ms  x{n:5.0f}  {kernel}")


def setup(args: argparse.Namespace) -> tuple[PipelinedDecoder, SimpleNamespace]:
    model_cfg = ModelConfig(**OmegaConf.to_container(OmegaConf.load(CONF_DIR / "model" / f"{args.model}.yaml")))
    hw = OmegaConf.load(CONF_DIR / "hardware" / f"{args.hardware}.yaml")
    env = single_device_env(args.device)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    start = time.perf_counter()
    decoder = PipelinedDecoder(build_shard(model_cfg, 0, env, dtype), env, dtype)
    print(f"[decode_mbu] {args.model} built in {time.perf_counter() - start:.1f} s on {device_name(env.device)} "
          f"(torch {torch.__version__})", flush=True)
    cfg = SimpleNamespace(model=model_cfg, hw=hw, device=env.device, torch_dtype=dtype, input_len=args.input_len,
                          output_len=args.output_len, repeats=args.repeats, prefill_len=args.prefill_len,
                          prefill_batches=args.prefill_batches, peak_tflops=hw.peak_tflops[args.dtype],
                          counts=count_params(build_model(model_cfg, "meta"), model_cfg))
    return decoder, cfg


def main() -> None:
    args = parse_args()
    torch._dynamo.config.cache_size_limit = 64  # one compiled step per batch size and variant
    decoder, cfg = setup(args)
    on_cuda = cfg.device.type == "cuda"
    results = {"args": {k: str(v) for k, v in vars(args).items()}, "device": device_name(cfg.device),
               "torch": torch.__version__, "bandwidth": measured_bandwidth_gbps(cfg.device) if on_cuda else {},
               "decode": {}, "kernels": {}, "prefill": [], "crossover": compute_bound_batch(cfg)}
    results["prefill"] = prefill_points(decoder, cfg, "eager")
    fused = False
    for name in args.variants.split(","):
        options = VARIANTS[name] if on_cuda else replace(VARIANTS[name], graph=False)
        if options.fuse and not fused:
            fuse_projections(decoder.model)
            fused = True
        batches = [1] if name in args.batch1_only.split(",") else args.batches
        results["decode"][name] = []
        for batch in batches:
            start = time.perf_counter()
            point = decode_point(decoder, cfg, batch, options)
            results["decode"][name].append(point)
            print(f"[decode_mbu] {name} batch {batch}: TPOT {point['tpot_ms']:.2f} ms, MBU {100 * point['mbu']:.1f}% "
                  f"({time.perf_counter() - start:.0f} s with warm-up)", flush=True)
            torch.cuda.empty_cache()
        if on_cuda and name in args.profile.split(","):
            results["kernels"][name] = decode_kernels(decoder, cfg, options)
        if args.json:
            args.json.write_text(json.dumps(results, indent=1))
    if fused and on_cuda:  # the fused, compiled prefill that decode_mode=compile runs (compiles per shape)
        results["prefill"] += prefill_points(decoder, cfg, "compile")
        if args.json:
            args.json.write_text(json.dumps(results, indent=1))
    print_other_tables(results)
    print_decode_table(results)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    sys.exit(main())
