"""Native engine: parbench's Llama with a KV cache, tp and pp over its own torchrun ranks.

Each batch: prefill the prompts (first tokens), then greedy decode one token per step until
output_len tokens; each step's tokens are copied to the host, as a server streams them, and a
token's time is when it arrives there. How decode steps run (eager, CUDA graph, compiled):
workload.decode_mode, decode_step.py."""

from __future__ import annotations

import json
import time

import torch
import torch.distributed as dist
from torch.autograd.profiler import record_function

from parbench.config.schema import Config
from parbench.metrics.memory import GB, peak_memory_gb, reset_peak_memory
from parbench.metrics.energy import WindowMeter, window_metrics
from parbench.metrics.timing import device_synchronize
from parbench.models.shapes import param_counts
from parbench.models.kv_cache import KVCache
from parbench.models.llama import fuse_projections
from parbench.distenv import DistEnv
from parbench.dtypes import ITEMSIZE, torch_dtype
from parbench.workloads.compile_cache import cache_outcome, compile_key
from parbench.workloads.inference.decode_step import decode_options
from parbench.metrics.inference_cost import decode_bytes_per_step, prefill_flops
from parbench.workloads.inference.latency import (BatchTiming, RequestTiming, latency_metrics, mbu_metrics,
                                                   prefill_mfu_metrics)
from parbench.workloads.inference.model_parallel import PipelinedDecoder, build_shard
from parbench.workloads.inference.kernel_count import prefill_kernels
from parbench.workloads.inference.op_profile import profile_one_batch
from parbench.workloads.microbench.common import rank_mean
from parbench.workloads.reporting import StepReporter, progress
from parbench.workloads.specs.inference import prefill_graphed, resolved_decode_mode

TOKENS_FILE = "generated_tokens.json"  # the first measured batch's tokens, to compare layouts


def synthetic_prompts(cfg: Config, batch_index: int, device: torch.device) -> torch.Tensor:
    """Seeded random token ids [batch_size, input_len], the same on every rank and layout."""
    w = cfg.workload
    gen = torch.Generator().manual_seed(cfg.seed * 1_000_003 + batch_index)
    return torch.randint(0, cfg.model.vocab, (w.batch_size, w.input_len), generator=gen).to(device)


def greedy(logits: torch.Tensor) -> torch.Tensor:
    with record_function("parbench.sampling"):
        return logits.argmax(dim=-1)


class HostTokens:
    """Each step's tokens copied to the host as they are produced (pinned memory, an event per
    step on CUDA), so the host can queue the next step before waiting for them."""

    def __init__(self, output_len: int, batch: int, device: torch.device):
        self.on_cuda = device.type == "cuda"
        self.tokens = torch.empty((output_len, batch), dtype=torch.long, pin_memory=self.on_cuda)
        self.ready: list = [None] * output_len

    def copy(self, i: int, tokens: torch.Tensor) -> None:
        self.tokens[i].copy_(tokens, non_blocking=self.on_cuda)
        if self.on_cuda:
            self.ready[i] = torch.cuda.Event()
            self.ready[i].record()

    def wait(self, i: int) -> None:
        if self.on_cuda:
            self.ready[i].synchronize()


@torch.no_grad()  # not inference_mode: gloo's all_gather cannot write inference tensors (pytorch#126032)
def generate(decoder: PipelinedDecoder, cache: KVCache, prompts: torch.Tensor, output_len: int,
             device: torch.device) -> tuple[BatchTiming, torch.Tensor]:
    """Prefill then decode with the KV cache; the timing of the batch and its tokens [batch, output_len].
    A token's time is when it reaches the host. Decode step i+1 is queued before waiting for step
    i's tokens (its input is already on the device), as vLLM's and SGLang's overlapped schedulers
    do, so the device does not idle while the host receives tokens and launches the next step; the
    first token is waited for before any decode step is queued, so TTFT is the prefill's alone.
    The batch also keeps the host's time to queue the prefill (its dispatch)."""
    cache.reset()
    host = HostTokens(output_len, prompts.shape[0], device)
    device_synchronize(device)
    start = time.perf_counter()
    tokens = decoder.step(prompts, cache, greedy)
    dispatch_s = time.perf_counter() - start
    times = []
    for i in range(output_len):
        host.copy(i, tokens)
        if i == 0:
            host.wait(0)
            times.append(time.perf_counter() - start)
        if i + 1 < output_len:
            tokens = decoder.step(tokens[:, None], cache, greedy)
        if i > 0:
            host.wait(i)
            times.append(time.perf_counter() - start)
    timing = RequestTiming.from_token_times(times)
    return BatchTiming([timing] * prompts.shape[0], times[-1], dispatch_s), host.tokens.t().clone()


@torch.no_grad()
def generate_without_cache(decoder: PipelinedDecoder, prompts: torch.Tensor, output_len: int) -> torch.Tensor:
    """The reference: every step recomputes the whole sequence so far, no cache."""
    sequence = prompts
    for _ in range(output_len):
        sequence = torch.cat([sequence, decoder.step(sequence, None, greedy)[:, None]], dim=1)
    return sequence[:, prompts.shape[1]:].cpu()


MODE_TEXT = {"eager": "launched op by op (the reference path)",
             "graph": "static-shape, fused projections, replayed as a CUDA graph",
             "compile": "static-shape, fused projections, torch.compile'd (replayed as a CUDA graph on CUDA; "
                        "compiled in the warm-up batch)"}


def run_native(cfg: Config, env: DistEnv, reporter: StepReporter) -> dict:
    w = cfg.workload
    dtype = torch_dtype(w.dtype)
    mode = resolved_decode_mode(cfg)
    options = decode_options(mode, env.device.type, w.prefill_graph)
    prefill = " (prefills too)" if options.prefill_graph else ""
    progress(env.rank, f"building {cfg.model.name} in {w.dtype} (tp={env.dims.tp}, pp={env.dims.pp}): "
                       f"sharded on meta, materialised layer by layer on {env.device}; decode_mode={mode}: "
                       f"{MODE_TEXT[mode]}{prefill}")
    start = time.perf_counter()
    model = build_shard(cfg.model, cfg.seed, env, dtype)
    decoder = PipelinedDecoder(fuse_projections(model) if options.fuse else model, env, dtype, options)
    build_s = time.perf_counter() - start
    progress(env.rank, f"model ready in {build_s:.1f} s: {decoder.weight_bytes() / GB:.2f} GB of weights on this rank")
    results = measure(cfg, env, reporter, decoder, build_s)
    results["tags"]["decode_mode"] = mode
    if options.compile:  # what the compiles found in the compile cache (workloads/compile_cache.py)
        from torch._dynamo.utils import counters

        metrics, tags = cache_outcome(counters)
        results["metrics"].update(metrics)
        results["tags"].update(tags, compile_key=compile_key(cfg))
    decoder.release_graph()  # before the worker's teardown (a failed rank is torn down by torchrun)
    return results


def measure(cfg: Config, env: DistEnv, reporter: StepReporter, decoder: PipelinedDecoder, build_s: float) -> dict:
    """Warm-up and measured batches, then the optional verify and profile passes."""
    w = cfg.workload
    reset_peak_memory(env.device)
    cache = decoder.kv_cache(w.batch_size, w.input_len + w.output_len)
    batches, first_tokens, first_batch_s = [], None, 0.0
    total = w.warmup + w.repeats
    meter = WindowMeter.for_device(env.device)  # energy and CPU use over the measured batches
    for i in range(total):
        phase = "warmup" if i < w.warmup else "measure"
        if i == w.warmup:
            meter.start()
        progress(env.rank, f"batch {i + 1}/{total} ({phase}): prefill {w.batch_size}x{w.input_len} tokens, "
                           f"then {w.output_len - 1} decode steps")
        prompts = synthetic_prompts(cfg, i, env.device)
        timing, tokens = generate(decoder, cache, prompts, w.output_len, env.device)
        if phase == "measure":
            batches.append(timing)
            first_tokens = tokens if first_tokens is None else first_tokens
            meter.sample()
        request = timing.requests[0]
        if i == 0:
            first_batch_s = request.e2e  # compiling and capturing included
        reporter.step(i, total, phase, ttft_s=request.ttft, e2e_s=request.e2e,
                      **({"tpot_s": request.tpot} if request.tpot is not None else {}))
    meter.stop()
    job_dir = reporter.path.parent
    progress(env.rank, "gathering results over ranks")
    results = native_results(cfg, env, decoder, cache, batches, build_s, meter)
    results["metrics"]["first_batch_s"] = first_batch_s
    if prefill_graphed(cfg):  # a replay's count is cheap and is what the calibration prices
        kernels = float(prefill_kernels(decoder, cache, synthetic_prompts(cfg, 0, env.device), greedy))
        results["metrics"]["prefill_kernels"] = rank_mean(kernels, env.device)
    if env.is_main:
        (job_dir / TOKENS_FILE).write_text(json.dumps(first_tokens.tolist()))
        results["artifacts"].append(TOKENS_FILE)
    if w.verify:
        progress(env.rank, "verify: decoding the first measured batch again without the KV cache")
        with decoder.launching_op_by_op():  # the reference path: no compiled code, no graph
            reference = generate_without_cache(decoder, synthetic_prompts(cfg, w.warmup, env.device), w.output_len)
        results["metrics"]["decode_mismatched_tokens"] = float((reference != first_tokens).sum())
    if w.profile and cfg.profile.enabled:
        progress(env.rank, "profiling one batch (prefill and decode: op and layer breakdown, communication share)")
        metrics, artifacts = profile_one_batch(decoder, cache, synthetic_prompts(cfg, 0, env.device), w.output_len,
                                               env, job_dir, greedy)
        results["metrics"].update(metrics)
        results["artifacts"] += artifacts
    progress(env.rank, "done")
    return results


def native_results(cfg: Config, env: DistEnv, decoder: PipelinedDecoder, cache: KVCache,
                   batches: list[BatchTiming], build_s: float, meter: WindowMeter) -> dict:
    """Rank 0's latencies (what a client sees), memory and model build time as the max over ranks,
    MBU over all devices, energy over every rank's GPU for the output tokens of the measured batches."""
    w = cfg.workload
    gathered: list = [None] * env.world_size
    per_rank = {"mem_weights_gb": decoder.weight_bytes() / GB, "mem_kv_cache_gb": cache.nbytes() / GB,
                **peak_memory_gb(env.device), "model_build_s": build_s}
    dist.all_gather_object(gathered, (per_rank, meter.reading()))
    metrics = {**latency_metrics(batches, w.output_len, cfg.stats.confidence), **{k: max(m[k] for m, _ in gathered) for k in per_rank}}
    counts = param_counts(cfg.model)
    weight_bytes, kv_bytes = decode_bytes_per_step(cfg.model, counts, w, ITEMSIZE[w.dtype])
    mbu, tags = mbu_metrics(weight_bytes, kv_bytes, metrics.get("tpot_s"), env.world_size,
                            cfg.hardware.hbm_bandwidth_gbps)
    flops = prefill_flops(cfg.model, counts, w.batch_size, w.input_len)
    mfu, mfu_tags = prefill_mfu_metrics(flops, metrics["ttft_s"], env.world_size, cfg.hardware.peak_tflops.get(w.dtype))
    window, window_tags = window_metrics([r for _, r in gathered], len(batches) * w.batch_size * w.output_len)
    return {"metrics": {**metrics, **mbu, **mfu, **window}, "tags": {**tags, **mfu_tags, **window_tags},
            "artifacts": []}
