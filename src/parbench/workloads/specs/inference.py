"""The inference workload's config and checks, and its engines: `native` (parbench's model with a
KV cache under tp/pp on its own torchrun ranks) and `vllm` (vLLM's LLM engine, one process that
starts vLLM's own workers). The code is in parbench.workloads.inference."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Optional

from parbench.config import ConfigError
from parbench.config.dims import ParallelDims
from parbench.config.schema import Config, ParallelConfig
from parbench.registry import Registry, load_ref
from parbench.workloads.inference import plan
from parbench.workloads.registry import WORKLOADS, WorkloadSpec, all_ones, check_fields, moe_host_read
from parbench.workloads.specs.vllm_engine import validate_vllm

SUMMARY_METRICS = ("ttft_s_p50", "ttft_s_p99", "tpot_s_p50", "tpot_s_p99", "itl_s_p50", "e2e_s_p50",
                   "output_tokens_per_s", "requests_per_s", "mbu", "prefill_comm_pct", "decode_comm_pct",
                   "energy_j", "tokens_per_joule", "cpu_util_pct", "mem_weights_gb", "mem_kv_cache_gb",
                   "decode_mismatched_tokens", "predicted_ttft_s", "predicted_ttft_error_pct", "predicted_tpot_s",
                   "predicted_tpot_error_pct")
# workload.decode_mode values (docs/inference.md, "Decode speed"); decode_step.decode_options maps them.
DECODE_MODES = ("auto", "eager", "graph", "compile")
PREFILL_GRAPH_MAX_TOKENS = 8192  # vLLM's default token budget of a scheduled batch (max_num_batched_tokens)
GROUPED_GEMM_SM = 9.0  # F.grouped_mm's CUTLASS kernel (sm90, sm100); elsewhere it loops with the offsets on the host


@dataclass
class VllmOptions:
    """Settings only the vllm engine reads."""

    model: Optional[str] = None  # HF model dir or name; None: a random model of `model=` saved in the job dir
    kv_cache_gb: float = 1.0  # KV cache space (the CPU backend's default asks for most of the RAM)
    # null: per device type (vllm_engine.resolved_enforce_eager): vLLM's own default on a GPU (compiled,
    # CUDA graphs), eager on CPU (compiling takes minutes there); true/false force it.
    enforce_eager: Optional[bool] = None
    # Weights of model= when vllm.model is null: seeded (the native engine's, exported to a Hugging Face
    # folder: same tokens), dummy (vLLM's load_format=dummy: no disk, for speed runs), auto (seeded up to
    # vllm_engine.SEEDED_AUTO_MAX_GB of weights, dummy above).
    weights: str = "auto"
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
    # native, where decode steps are CUDA graphs (decode_mode graph, or compile on CUDA): prefills of up to
    # 8192 tokens replayed as CUDA graphs too (workloads/inference/prefill_graph.py); false: launched op by op
    prefill_graph: bool = True
    vllm: VllmOptions = field(default_factory=VllmOptions)


@dataclass(frozen=True)
class Engine:
    run: str  # "module:function" (cfg, env, reporter) -> results, loaded on the ranks
    # Degrees of parbench's own torchrun job (vLLM: one process; it starts its own workers).
    job_parallel: Callable[[Config], ParallelConfig]
    validate: Callable[[Config], None] = lambda cfg: None  # engine-specific ConfigError checks
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
    if not w.prefill_graph and w.engine != "native":
        raise ConfigError("workload.prefill_graph=false is the native engine's option; vLLM's CUDA graphs follow "
                          "workload.vllm.enforce_eager")
    p = model_parallel_only(cfg)
    extra = {n: getattr(p, n) for n in ("dp", "fsdp", "cp", "ep") if getattr(p, n) != 1}
    if extra or p.sp:
        raise ConfigError(f"workload=inference shards one model replica with tp and pp only, and got "
                          f"{extra or 'parallel.sp=true'}: use parallel=tp or parallel=pp (or set those to 1)")
    if w.input_len + w.output_len > cfg.model.max_seq_len:
        raise ConfigError(f"workload.input_len + workload.output_len = {w.input_len + w.output_len} exceeds "
                          f"model.max_seq_len={cfg.model.max_seq_len}: raise model.max_seq_len "
                          "(the RoPE table length) or shorten the request")
    ENGINES.get(w.engine).validate(cfg)


def decode_mode_blocker(mode: str, cfg: Config) -> str | None:
    """Why decode steps cannot run in `mode` (graph or compile) here, or None. Dropless MoE routing keeps
    its shapes and its expert offsets on the device (models/moe.py), so a graph holds it; a capacity limit
    does not. Capture and compilation in an unmeasured batch keep them out of the timing."""
    on_cuda = cfg.hardware.device_type == "cuda"
    if mode == "graph" and not on_cuda:
        return f"CUDA graphs need a CUDA device (got {cfg.hardware.device_type})"
    if cfg.model.experts and (host_read := moe_host_read(cfg)):
        return host_read
    if cfg.model.experts and on_cuda and (cfg.hardware.compute_capability or 0.0) < GROUPED_GEMM_SM:
        return (f"MoE experts' grouped GEMMs keep their offsets on the device only on sm90 and later (hardware."
                f"compute_capability={cfg.hardware.compute_capability}); older GPUs read them on the host")
    if on_cuda and cfg.parallel.pp > 1:
        return f"CUDA-graph capture under pipeline stages (parallel.pp={cfg.parallel.pp}) has not run on a GPU yet"
    if cfg.workload.warmup < 1:
        return "the first batch captures/compiles the step, so set workload.warmup >= 1 to keep that out of the timing"
    return None


def resolved_decode_mode(cfg: Config) -> str:
    """auto: compile where it can run on CUDA (the fastest measured, docs/inference.md), else eager."""
    mode = cfg.workload.decode_mode
    if mode != "auto":
        return mode
    fast = cfg.hardware.device_type == "cuda" and decode_mode_blocker("compile", cfg) is None
    return "compile" if fast else "eager"


def static_decode(cfg: Config) -> bool:
    """Whether decode steps run through the KV cache's static-shape path (graph, compile)."""
    return resolved_decode_mode(cfg) in ("graph", "compile")


def prefill_graphed(cfg: Config) -> bool:
    """Whether the native engine replays this run's prefills as a CUDA graph (prefill_graph.py)."""
    w = cfg.workload
    return (w.engine == "native" and w.prefill_graph and cfg.hardware.device_type == "cuda" and static_decode(cfg)
            and w.batch_size * w.input_len <= PREFILL_GRAPH_MAX_TOKENS)


def validate_native(cfg: Config) -> None:
    """Tensor parallel splits the vocabulary evenly; graph and compile decode need a dense model
    (graph: CUDA). (Whether weights and KV cache fit the device is checked by the plan.)"""
    mode = cfg.workload.decode_mode
    if mode in ("graph", "compile") and (blocker := decode_mode_blocker(mode, cfg)):
        raise ConfigError(f"workload.decode_mode={mode} cannot run: {blocker}; set workload.decode_mode=eager")
    tp = cfg.parallel.tp
    if cfg.model.vocab % tp:
        raise ConfigError(f"model.vocab={cfg.model.vocab} is not divisible by parallel.tp={tp}: the native "
                          "engine splits the embedding and the output head evenly over the tp ranks")


def engine(cfg: Config) -> Engine:
    return ENGINES.get(cfg.workload.engine)


def run(cfg: Config, env, reporter) -> dict:
    """The engine's own run, loaded on the ranks."""
    return load_ref(engine(cfg).run)(cfg, env, reporter)


ENGINES.register("native")(Engine(run="parbench.workloads.inference.native:run_native",
                                  job_parallel=model_parallel_only, validate=validate_native))
ENGINES.register("vllm")(Engine(run="parbench.workloads.inference.vllm_engine.run:run_vllm",
                                job_parallel=lambda cfg: all_ones(cfg.parallel), validate=validate_vllm,
                                joins_process_group=False))
WORKLOADS.register("inference")(WorkloadSpec(
    schema=InferenceWorkload, validate=validate, run="parbench.workloads.specs.inference:run",
    plan=plan, summary_metrics=SUMMARY_METRICS,
    job_parallel=lambda cfg: engine(cfg).job_parallel(cfg),
    joins_process_group=lambda cfg: engine(cfg).joins_process_group,
))
