"""Inference workload: fixed-length prompts, prefill then greedy decode of a fixed number of tokens,
measured with vLLM's definitions (TTFT, TPOT, ITL, E2E). Engines: `native` (parbench's model with a
KV cache under tp/pp on its own torchrun ranks) and `vllm` (vLLM's LLM engine, one process that
starts vLLM's own workers)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Optional

from parbench.config import ConfigError
from parbench.config.schema import Config, ParallelConfig
from parbench.metrics.memory import GB
from parbench.models import build_model, count_params
from parbench.parallel import DistEnv
from parbench.parallel.dims import ParallelDims
from parbench.registry import Registry
from parbench.workloads import WORKLOADS, WorkloadSpec, check_fields
from parbench.workloads.dtypes import torch_dtype
from parbench.workloads.inference.decode_step import DECODE_MODES
from parbench.workloads.inference.latency import SUMMARY_METRICS, decode_bytes_per_step, kv_bytes_per_position
from parbench.workloads.reporting import StepReporter


@dataclass
class VllmOptions:
    """Settings only the vllm engine reads."""

    model: Optional[str] = None  # HF model dir or name; None: a random model of `model=` saved in the job dir
    kv_cache_gb: float = 1.0  # KV cache space (the CPU backend's default asks for most of the RAM)
    enforce_eager: bool = True  # false: vLLM compiles (and captures CUDA graphs on GPU); slow to start on CPU
    gpu_memory_utilization: float = 0.9


@dataclass
class InferenceWorkload:
    name: str = "inference"
    engine: str = "native"  # native | vllm
    input_len: int = 64  # prompt tokens per request
    output_len: int = 16  # generated tokens per request (ignore_eos: always this many)
    batch_size: int = 4  # requests decoded together
    repeats: int = 5  # measured batches
    warmup: int = 1  # batches run before measuring
    dtype: str = "auto"  # auto (bf16 on GPU, fp32 on CPU) | fp32 | bf16 | fp16
    profile: bool = True  # one extra batch under torch.profiler: op-type shares of prefill and decode
    verify: bool = False  # native: decode the first measured batch again without the KV cache, count mismatches
    # native: auto (compile on CUDA where it can run, else eager) | eager | graph | compile
    decode_mode: str = "auto"
    vllm: VllmOptions = field(default_factory=VllmOptions)


@dataclass(frozen=True)
class Engine:
    run: Callable[[Config, DistEnv, StepReporter], dict]
    # Degrees of parbench's own torchrun job (vLLM: one process; it starts its own workers).
    job_parallel: Callable[[Config], ParallelConfig]
    check: Callable[[Config], None] = lambda cfg: None  # engine-specific ConfigError checks
    joins_process_group: bool = True  # False: the engine sets up torch.distributed itself


ENGINES: Registry[Engine] = Registry("inference engine", "workload.engine")


def model_parallel_only(cfg: Config) -> ParallelConfig:
    """tp*pp ranks: inference here shards one model replica; a -1 (inferred) dp/fsdp means 1."""
    p = cfg.parallel
    return replace(p, dp=1 if p.dp == -1 else p.dp, fsdp=1 if p.fsdp == -1 else p.fsdp)


def validate(cfg: Config, dims: ParallelDims) -> None:
    w = cfg.workload
    check_fields(w, positive=("input_len", "output_len", "batch_size", "repeats"), non_negative=("warmup",))
    if w.engine not in ENGINES:
        raise ConfigError(f"workload.engine={w.engine!r}: use one of {', '.join(ENGINES.names())}")
    if w.decode_mode not in DECODE_MODES:
        raise ConfigError(f"workload.decode_mode={w.decode_mode!r}: use one of {', '.join(DECODE_MODES)}")
    if w.decode_mode not in ("auto", "eager") and w.engine != "native":
        raise ConfigError(f"workload.decode_mode={w.decode_mode} is the native engine's option; vLLM compiles and "
                          "captures CUDA graphs itself unless workload.vllm.enforce_eager=true: set "
                          "workload.vllm.enforce_eager=false instead")
    p = model_parallel_only(cfg)
    extra = {n: getattr(p, n) for n in ("dp", "fsdp", "cp", "ep") if getattr(p, n) != 1}
    if extra or p.sp:
        raise ConfigError(f"workload=inference shards one model replica with tp and pp only, and got "
                          f"{extra or 'parallel.sp=true'}: use parallel=tp or parallel=pp (or set those to 1)")
    if w.input_len + w.output_len > cfg.model.max_seq_len:
        raise ConfigError(f"workload.input_len + workload.output_len = {w.input_len + w.output_len} exceeds "
                          f"model.max_seq_len={cfg.model.max_seq_len}: raise model.max_seq_len "
                          "(the RoPE table length) or shorten the request")
    ENGINES.get(w.engine).check(cfg)


def memory_per_device_gb(cfg: Config) -> dict[str, float]:
    """Weights and the full KV cache (input_len + output_len positions) per device; tp and pp
    split both evenly."""
    w, dtype = cfg.workload, torch_dtype(cfg.workload.dtype)
    devices = cfg.parallel.tp * cfg.parallel.pp
    counts = count_params(build_model(cfg.model, "meta"), cfg.model)
    kv_cache = kv_bytes_per_position(cfg.model, w.batch_size, dtype) * (w.input_len + w.output_len)
    return {"weights_per_device_gb": counts.total * dtype.itemsize / devices / GB,
            "kv_cache_per_device_gb": kv_cache / devices / GB}


def plan(cfg: Config, dims: ParallelDims) -> dict:
    w = cfg.workload
    counts = count_params(build_model(cfg.model, "meta"), cfg.model)
    weights, kv_read = decode_bytes_per_step(cfg.model, counts, w, torch_dtype(w.dtype))
    return {"engine": w.engine, "model_devices": cfg.parallel.tp * cfg.parallel.pp,
            "weight_bytes_per_step": weights, "kv_bytes_per_step": kv_read, **memory_per_device_gb(cfg)}


def job_parallel(cfg: Config) -> ParallelConfig:
    return ENGINES.get(cfg.workload.engine).job_parallel(cfg)


def run(cfg: Config, env: DistEnv, reporter: StepReporter) -> dict:
    return ENGINES.get(cfg.workload.engine).run(cfg, env, reporter)


WORKLOADS.register("inference")(WorkloadSpec(
    schema=InferenceWorkload, run=run, validate=validate, plan=plan, summary_metrics=SUMMARY_METRICS,
    job_parallel=job_parallel, joins_process_group=lambda cfg: ENGINES.get(cfg.workload.engine).joins_process_group,
))

# Importing the engine modules registers them.
from parbench.workloads.inference import native, vllm_engine  # noqa: E402,F401

