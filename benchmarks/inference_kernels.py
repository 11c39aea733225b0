"""Where a native-engine prefill and decode step spend their GPU time, by kernel kind, beside the
performance model's parts of the same forward (issue 31):

    python benchmarks/inference_kernels.py --model gpt2_xl --points 8x512,1x512 [--output-len 64] [--calibration F]

For each point (batch x prompt length) it builds the engine as `workload=inference` runs it by
default (decode_mode=compile: fused projections, compiled blocks, graphed decode steps and small
prefills), runs one warm-up batch, then profiles one prefill and 8 decode steps at the batch with
torch.profiler. Kernels are sorted into GEMM, attention and the rest (norms, activations, copies,
sampling); the model's GEMM, attention and element-wise/read parts come from parbench.predict with
the named calibration profile. The wall time (TTFT, TPOT) is printed too: what the kernels leave
of it is the host's and the gaps between kernels."""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from types import SimpleNamespace

import torch
import torch.distributed as dist

from decode_mbu import single_device_env
from parbench.config.hardware import detect_gpus
from parbench.config.schema import ModelConfig
from parbench.models.llama import fuse_projections
from parbench.planner import compose_config
from parbench.predict.calibration_file import load_calibration
from parbench.predict.inference import (decode_attention_seconds, decode_step, decode_weights_seconds, prefill,
                                        prefill_attention_seconds, prefill_compute_seconds, prefill_elementwise_seconds)
from parbench.predict.layout import Layout
from parbench.prepare import validate
from parbench.metrics.inference_cost import decode_bytes_per_step
from parbench.workloads.inference.decode_step import decode_options
from parbench.workloads.inference.model_parallel import PipelinedDecoder, build_shard
from parbench.workloads.inference.native import generate, greedy, synthetic_prompts

DECODE_STEPS = 8
KINDS = {"attention": ("fmha", "flash", "attention", "sdpa", "cudnn"),
         "gemm": ("gemm", "nvjet", "cutlass", "xmma", "splitk", "cublas")}


def kernel_kind(name: str) -> str:
    """gemm, attention or other; Inductor's fused element-wise kernels are other, whatever ops their
    names list (triton_poi_fused__scaled_dot_product_cudnn_attention__to_copy: the copy before SDPA)."""
    low = name.lower()
    if low.startswith("triton_"):
        return "other"
    return next((kind for kind, marks in KINDS.items() if any(m in low for m in marks)), "other")


def profiled_ms(run, repeats: int = 1, top: int = 8) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
    """GPU ms by kernel kind, kernels by kind and the top kernels, per repeat of `run`."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    kinds: dict[str, float] = defaultdict(float)
    calls: dict[str, float] = defaultdict(float)
    names: dict[str, float] = defaultdict(float)
    name_calls: dict[str, float] = defaultdict(float)
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            ms = event.device_time_total / 1e3 / repeats
            kinds[kernel_kind(event.name)] += ms
            calls[kernel_kind(event.name)] += 1 / repeats
            names[event.name[:80]] += ms
            name_calls[event.name[:80]] += 1 / repeats
    ranked = sorted(names, key=lambda n: -names[n])[:top]
    return dict(kinds), dict(calls), {f"{n} x{name_calls[n]:.0f}": names[n] for n in ranked}


def predicted_parts(model: str, hardware: str, batch: int, input_len: int, output_len: int,
                    cal) -> dict[str, dict[str, float]]:
    """The model's prefill and decode parts (ms), as predict_inference adds them."""
    cfg = compose_config(["workload=inference", f"model={model}", f"hardware={hardware}", "hardware.gpus_per_node=1",
                          "parallel=dp", f"workload.batch_size={batch}", f"workload.input_len={input_len}",
                          f"workload.output_len={output_len}"])
    layout = Layout.of(cfg, validate(cfg, None))
    attention = prefill_attention_seconds(layout, cal)
    weights, kv = decode_bytes_per_step(cfg.model, layout.counts, cfg.workload, layout.dtype_bytes)
    pre, dec = prefill(layout, cal), decode_step(layout, layout.counts, cal)
    return {"prefill": {"gemm": (prefill_compute_seconds(layout, cal) - attention) * 1e3, "attention": attention * 1e3,
                        "other": prefill_elementwise_seconds(layout, batch * input_len, cal) * 1e3,
                        "total": pre.seconds * 1e3},
            "decode": {"gemm": decode_weights_seconds(layout, weights, cal) * 1e3,
                       "attention": decode_attention_seconds(layout, kv, cal) * 1e3,
                       "host": dec.exposed_host_s * 1e3, "total": dec.seconds * 1e3}}


def measure_point(decoder: PipelinedDecoder, model_cfg: ModelConfig, batch: int, input_len: int, output_len: int,
                  device: torch.device, top: int) -> dict:
    """One warm-up batch (compiles, captures), the wall TTFT and TPOT of two more, then the profiled phases."""
    decoder.use(decode_options("compile", "cuda"))
    w = SimpleNamespace(input_len=input_len, output_len=output_len, batch_size=batch)
    cache = decoder.kv_cache(batch, input_len + output_len)
    prompts = [synthetic_prompts(SimpleNamespace(workload=w, seed=0, model=model_cfg), i, device) for i in range(3)]
    timings = [generate(decoder, cache, p, output_len, device)[0] for p in prompts]
    ttft = statistics.median(t.requests[0].ttft for t in timings[1:]) * 1e3
    tpot = statistics.median(t.requests[0].tpot for t in timings[1:]) * 1e3
    state = {}

    def run_prefill():
        cache.reset()
        state["tokens"] = decoder.step(prompts[0], cache, greedy)

    def run_decode():
        tokens = state["tokens"]
        for _ in range(DECODE_STEPS):
            tokens = decoder.step(tokens[:, None], cache, greedy)

    with torch.no_grad():
        pre, pre_calls, pre_top = profiled_ms(run_prefill, top=top)
        dec, dec_calls, dec_top = profiled_ms(run_decode, DECODE_STEPS, top)
    decoder.release_graph()
    return {"ttft": ttft, "tpot": tpot, "prefill": pre, "decode": dec, "prefill_calls": pre_calls,
            "decode_calls": dec_calls, "prefill_top": pre_top, "decode_top": dec_top}


def print_point(model: str, batch: int, input_len: int, measured: dict, predicted: dict) -> None:
    print(f"\n== {model} {batch} x {input_len}: TTFT {measured['ttft']:.2f} ms (predicted "
          f"{predicted['prefill']['total']:.2f}), TPOT {measured['tpot']:.3f} ms (predicted {predicted['decode']['total']:.3f})")
    for phase in ("prefill", "decode"):
        kinds, model_parts = measured[phase], predicted[phase]
        row = "  ".join(f"{kind} {kinds.get(kind, 0.0):.3f}/{model_parts.get(kind, 0.0):.3f}" for kind in ("gemm", "attention", "other"))
        print(f"  {phase} kernels/model ms: {row}  (kernels {sum(kinds.values()):.3f}; model host {model_parts.get('host', 0.0):.3f})")
        print("  " + " " * len(phase) + " kernels: " + "  ".join(f"{kind} {n:.0f}" for kind, n in measured[f"{phase}_calls"].items()))
        for name, ms in measured[f"{phase}_top"].items():
            print(f"      {ms:8.3f} ms  [{kernel_kind(name)}] {name}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--points", required=True, help="BATCHxPROMPT,... e.g. 8x512,1x512")
    p.add_argument("--output-len", type=int, default=64)
    p.add_argument("--hardware", default=None, help="the hardware config the prediction composes (default: this GPU's)")
    p.add_argument("--calibration", default=None, help="a profile's name or file (default: the hardware's)")
    p.add_argument("--top", type=int, default=8, help="kernels listed a phase, the longest first")
    args = p.parse_args()
    torch._dynamo.config.cache_size_limit = 64
    args.hardware = args.hardware or compose_config([], detect_gpus()).hardware.name  # hardware=auto: this GPU's
    cal = load_calibration(args.calibration or args.hardware)
    model_cfg = compose_config([f"model={args.model}"]).model
    env = single_device_env("cuda")
    dtype = torch.bfloat16
    decoder = PipelinedDecoder(build_shard(model_cfg, 0, env, dtype), env, dtype)
    fuse_projections(decoder.model)
    print(f"[inference_kernels] {args.model} on {torch.cuda.get_device_name()} (torch {torch.__version__}), "
          f"profile {args.calibration or args.hardware}", flush=True)
    for point in args.points.split(","):
        batch, input_len = (int(x) for x in point.split("x"))
        measured = measure_point(decoder, model_cfg, batch, input_len, args.output_len, env.device, args.top)
        print_point(args.model, batch, input_len, measured,
                    predicted_parts(args.model, args.hardware, batch, input_len, args.output_len, cal))
        torch.cuda.empty_cache()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
