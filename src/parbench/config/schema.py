"""Typed schema of every config group; Hydra merges conf/<group>/*.yaml into these."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

from omegaconf import MISSING, OmegaConf

from parbench.paths import CONF_DIR


@dataclass
class HardwareConfig:
    """A machine profile: peaks for MFU/MBU and how many devices to launch on."""

    name: str = MISSING
    device_type: str = "cuda"  # cuda | cpu (hardware=auto: auto until resolved)
    backend: str = "nccl"  # nccl | gloo (hardware=auto: auto until resolved)
    # Substrings of the GPU name (nvidia-smi) that select this profile under hardware=auto.
    match: List[str] = field(default_factory=list)
    # Dense peak per device, TFLOP/s, keyed by dtype (fp32, tf32, bf16, fp16, fp8).
    peak_tflops: Dict[str, float] = field(default_factory=dict)
    hbm_bandwidth_gbps: Optional[float] = None  # device memory bandwidth, GB/s
    memory_gb: Optional[float] = None  # per device
    compute_capability: Optional[float] = None  # the GPU's SM version, e.g. 9.0 (Hopper); null: not known
    link_bandwidth_gbps: Optional[float] = None  # intra-node GPU-GPU, one direction, GB/s
    # Between nodes, per GPU, one direction, GB/s (its NIC); null: as link_bandwidth_gbps (parbench plan).
    inter_node_bandwidth_gbps: Optional[float] = None
    gpus_per_node: int = -1  # -1: every local GPU (CPU profile: number of ranks)
    nodes: int = 1


@dataclass
class ModelConfig:
    """Architecture of a decoder-only transformer (dense or MoE)."""

    name: str = MISSING
    family: str = "llama"  # registry key in parbench.models
    layers: int = MISSING
    hidden: int = MISSING
    heads: int = MISSING
    kv_heads: int = MISSING
    head_dim: Optional[int] = None  # None: hidden // heads
    ffn: int = MISSING  # SwiGLU / MLP inner size (per expert for MoE)
    vocab: int = MISSING
    max_seq_len: int = 4096
    # Training sequence length when workload.seq_len is not given; null: min(max_seq_len, 4096).
    default_seq_len: Optional[int] = None
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    tie_embeddings: bool = False
    qk_norm: bool = False  # Qwen3 normalises q and k per head
    experts: int = 0  # 0: dense
    top_k: int = 0
    capacity_factor: float = 0.0  # 0: dropless
    aux_loss_coef: float = 0.01
    qkv_bias: bool = False  # biases on the q, k and v projections (Qwen2), not on the output one
    sliding_window: Optional[int] = None  # each query sees this many positions, itself included (Mistral)
    # Hugging Face's rope_scaling as config.json gives it: rope_type linear (factor) or llama3
    # (factor, low_freq_factor, high_freq_factor, original_max_position_embeddings); {}: none.
    rope_scaling: Dict[str, Any] = field(default_factory=dict)
    # model=hf: a folder holding config.json, or a Hugging Face name in the local cache (never
    # downloaded); the fields above then come from config.json (parbench.config.hf_model).
    path: Optional[str] = None
    config_json: Optional[str] = None  # set by parbench: the config.json read
    config_sha256: Optional[str] = None  # set by parbench: its hash (a set hash means already read)


def head_width(m: ModelConfig) -> int:
    """Elements per attention head: head_dim where the model sets it, else hidden // heads."""
    return m.head_dim or m.hidden // m.heads


@dataclass
class ZeroConfig:
    """DeepSpeed ZeRO over every rank (parallel=zero1/zero2/zero3/...; docs/deepspeed.md). stage null:
    the torch-native strategies run instead. Sizes are in elements, as DeepSpeed counts them; the
    defaults are DeepSpeed's own."""

    stage: Optional[int] = None  # 0..3: the DeepSpeed engine with this ZeRO stage
    offload_optimizer: bool = False  # optimizer states and step on the CPU (ZeRO-Offload)
    offload_param: bool = False  # stage 3: parameters on the CPU too
    pin_memory: bool = True  # page-locked host buffers for the offloaded tensors (faster copies)
    reduce_bucket_size: int = 500_000_000
    allgather_bucket_size: int = 500_000_000  # stages 1-2
    overlap_comm: Optional[bool] = None  # null: DeepSpeed's default (true for stage 3, else false)
    contiguous_gradients: bool = True
    reduce_scatter: bool = True  # stages 1-2: reduce-scatter instead of all-reduce for gradients
    stage3_prefetch_bucket_size: int = 50_000_000
    stage3_param_persistence_threshold: int = 100_000  # smaller parameters stay unpartitioned
    stage3_max_live_parameters: int = 1_000_000_000
    # torch.optim.AdamW (fused) instead of DeepSpeed's FusedAdam / DeepSpeedCPUAdam, which compile
    # C++/CUDA extensions on first use (minutes; nvcc on GPU). The offload variants are much slower
    # with it (see docs/deepspeed.md).
    torch_adam: bool = True
    communication_data_type: Optional[str] = None  # null: the compute dtype; fp32 reduces like FSDP


@dataclass
class ParallelConfig:
    """Parallel degrees; their product is the world size. dp=-1 (or fsdp=-1) is inferred."""

    name: str = MISSING
    dp: int = -1  # replicated data parallel (DDP)
    fsdp: int = 1  # sharded data parallel (FSDP2)
    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1  # expert parallel, carved out of dp*fsdp*cp ranks
    sp: bool = False  # sequence parallel on top of tp
    pp_schedule: str = "1f1b"  # gpipe | 1f1b | interleaved_1f1b | zero_bubble
    pp_microbatches: int = 4
    pp_stages_per_rank: int = 1
    fsdp_reshard_after_forward: bool = True
    cp_rotate: str = "allgather"  # allgather | alltoall (torch's context_parallel on GPU)
    zero: ZeroConfig = field(default_factory=ZeroConfig)


@dataclass
class LaunchConfig:
    """How the orchestrator launches and supervises torchrun."""

    timeout_s: float = 900.0  # the whole job, start-up and summary included; 0: no overall limit
    # Hung: no new output line for this long (start-up included), or once steps began no new step
    # for this long or 10x the slowest step so far, if more; 0 turns the watchdog off.
    # See docs/reliability.md.
    stall_timeout_s: float = 120.0
    # Refuse a point whose predicted memory does not fit (docs/plan.md); false launches it anyway.
    check_fit: bool = True
    # Start the next torchrun (its seconds of importing torch) while the orchestrator plans or logs
    # the previous point; each point still has its own torchrun (launch/prestart.py).
    prestart: bool = True
    master_port: int = 29500
    log_tail_lines: int = 60
    env: Dict[str, str] = field(default_factory=dict)


@dataclass
class TrackingConfig:
    """Where results go: an MLflow tracking URI (sqlite file or an `mlflow server` URL)."""

    uri: str = "sqlite:///outputs/mlflow.db"
    experiment: str = "parbench"
    run_name: Optional[str] = None
    # MLflow system metrics (system/*: CPU, memory, per-GPU utilisation, memory, power, temperature,
    # SM clock) sampled by the orchestrator while the workers run.
    system_metrics: bool = True
    system_metrics_interval_s: float = 1.0


@dataclass
class DebugConfig:
    """Fault injection to exercise failure handling: a rank that crashes or hangs at a step."""

    crash_at_step: int = -1
    hang_at_step: int = -1
    alloc_at_step: int = -1  # fault_rank allocates (and fills) debug.alloc_gb on its device: OOM on purpose
    alloc_gb: float = 0.0
    fault_rank: int = 0
    corrupt_results: bool = False  # microbenchmarks change one output element on fault_rank before verifying


@dataclass
class ProfileConfig:
    """torch.profiler over a short window of steps after the measured ones (on by default): one
    Kineto trace per rank, analysed into comm_pct, exposed_comm_pct, overlap_pct, per-collective
    shares, per-op/per-layer tables (docs/measurement.md). The window never enters step_time_s."""

    enabled: bool = True
    wait: int = 0  # unprofiled steps between the measured steps and the profiler's warm-up
    warmup: int = 1  # steps the profiler runs but discards (keeps its start-up out of the trace)
    active_steps: int = 2  # steps traced and analysed
    # Input shapes in the trace. null: on CPU only, where gloo's collective sizes come from them
    # (NCCL kernels carry their sizes); recording them costs host time per op.
    record_shapes: Optional[bool] = None
    # Which ranks keep their full trace as an artifact (all ranks are analysed): representative =
    # rank 0, the first rank of each pipeline stage and of each node | all.
    keep_traces: str = "representative"
    layer_ranges: bool = True  # a profiler range per model layer, for the per-layer table
    memory_timeline: bool = False  # CUDA allocator history over the window (GPU only; slows steps)
    plots: bool = False  # PNG breakdown, op-share and layer heatmap artifacts (matplotlib: ~1 s more)


CI_METHODS = ("order", "bootstrap")
KEEP_TRACES = ("representative", "all")  # profile.keep_traces


@dataclass
class StatsConfig:
    """Step statistics: the confidence interval of the median step time over the measured steps."""

    confidence: float = 0.95
    ci_method: str = "order"  # order (distribution-free, binomial order statistics) | bootstrap
    bootstrap_resamples: int = 2000


@dataclass
class Config:
    hardware: HardwareConfig = MISSING
    model: ModelConfig = MISSING
    parallel: ParallelConfig = MISSING
    # Each workload has its own schema (see parbench.workloads); validated by its registry entry.
    workload: Dict[str, Any] = MISSING
    launch: LaunchConfig = field(default_factory=LaunchConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    debug: DebugConfig = field(default_factory=DebugConfig)
    profile: ProfileConfig = field(default_factory=ProfileConfig)
    stats: StatsConfig = field(default_factory=StatsConfig)
    seed: int = 0
    dry_run: bool = False
    # The performance model's calibration profile (docs/plan.md): a file or a name (the user's profile
    # directory, then conf/calibrations/); null: <hardware.name>.yaml from those if there is one, else spec figures.
    calibration: Optional[str] = None
    # Skip a point that already has a FINISHED run with the same config hash in the experiment
    # (docs/reliability.md); false reruns it.
    resume: bool = True
    # A sweep is checked whole before its first point launches: refuse (nothing runs if a point cannot)
    # | record (run the others; each point that cannot run becomes a FAILED run).
    invalid_points: str = "refuse"
    # Modules imported before the config is checked, in the orchestrator and on every rank: they
    # register strategies, workloads or model families of your own (docs/contributing.md).
    plugins: List[str] = field(default_factory=list)
    # torch.compile's on-disk caches, one folder per compiled step (workloads/compile_cache.py): a point
    # whose step was compiled before loads it; null: torch's default (/tmp/torchinductor_<user>).
    compile_cache: Optional[str] = "outputs/compile_cache"


def load_presets(group: str, schema: type, skip: str, conf_dir: Path = CONF_DIR) -> dict[str, Any]:
    """Every conf/<group>/*.yaml but `skip` (a preset without fixed values), typed by `schema`, by name."""
    presets = {}
    for path in sorted((conf_dir / group).glob("*.yaml")):
        if path.stem != skip:
            presets[path.stem] = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(schema), OmegaConf.load(path)))
    return presets
