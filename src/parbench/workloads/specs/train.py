"""The training workload's config, checks and plan; the training loop is parbench.workloads.train."""

from __future__ import annotations

from dataclasses import dataclass

from parbench.config import ConfigError
from parbench.config.batch import local_batch, tokens_per_step
from parbench.config.dims import ParallelDims
from parbench.config.hardware import require_peak
from parbench.config.schema import Config
from parbench.metrics import flops
from parbench.models.shapes import param_counts
from parbench.workloads.registry import WORKLOADS, WorkloadSpec, check_fields, moe_host_read

AC_MODES = ("none", "full", "selective")
OPTIMIZERS = ("adamw", "sgd")
INIT_MODES = ("auto", "full", "meta")


@dataclass
class TrainWorkload:
    name: str = "train"
    batch_size: int = 4  # per data-parallel rank; a step sees batch_size * dp * fsdp sequences
    # Sequences per step over all data-parallel ranks (strong scaling); set, it replaces batch_size.
    global_batch_size: int | None = None
    seq_len: int | None = None  # None: the model preset's default_seq_len (config/resolve.py)
    steps: int = 8  # measured steps, after the warm-up
    warmup_steps: int = 2
    dtype: str = "auto"  # auto (bf16 on GPU, fp32 on CPU) | fp32 | bf16 | fp16
    activation_checkpointing: str = "none"  # none | full | selective
    compile: bool = False  # torch.compile each transformer block
    lr: float = 3e-4
    # adamw | sgd: plain SGD moves each weight by lr x its gradient, so a mis-scaled gradient shows
    # in the loss (AdamW normalises the scale away); the exactness tests use it.
    optimizer: str = "adamw"
    init: str = "auto"  # full: whole model per rank then shard; meta: shard first (big models)
    # Python's automatic garbage collection off during the steps, a generation-1 collection every
    # gc_interval steps instead (torchtitan's gc_freq, Megatron's --manual-gc); 0: automatic.
    gc_interval: int = 50


def moe_compile_blocker(cfg: Config, dims: ParallelDims) -> str | None:
    """What in this MoE's dispatch the host sizes from the routing (moe_host_read, and expert parallel's
    all-to-alls), or None."""
    if dims.ep > 1:
        return f"expert parallel (parallel.ep={dims.ep}) sizes its all-to-alls from the routing"
    return moe_host_read(cfg)


def validate(cfg: Config, dims: ParallelDims) -> None:
    w = cfg.workload
    check_fields(w, positive=("batch_size", "seq_len", "steps"), non_negative=("warmup_steps", "gc_interval"))
    require_peak(cfg.hardware, w.dtype)  # for MFU
    if w.activation_checkpointing not in AC_MODES:
        raise ConfigError(f"workload.activation_checkpointing={w.activation_checkpointing!r}: "
                          f"use one of {', '.join(AC_MODES)}")
    if w.optimizer not in OPTIMIZERS:
        raise ConfigError(f"workload.optimizer={w.optimizer!r}: use one of {', '.join(OPTIMIZERS)}")
    if w.init not in INIT_MODES:
        raise ConfigError(f"workload.init={w.init!r}: use one of {', '.join(INIT_MODES)}")
    if w.init == "meta" and dims.dp > 1 and dims.fsdp == 1:
        raise ConfigError(f"workload.init=meta with DDP (parallel.dp={dims.dp}, fsdp=1): DDP broadcasts "
                          "materialised weights; use workload.init=full or shard with parallel.fsdp")
    if w.compile and cfg.model.experts and (blocker := moe_compile_blocker(cfg, dims)):
        raise ConfigError(f"workload.compile=true with an MoE model ({cfg.model.experts} experts): {blocker}; "
                          "a full-graph block compile cannot trace that: set workload.compile=false")
    if w.seq_len > cfg.model.max_seq_len:
        raise ConfigError(f"workload.seq_len={w.seq_len} exceeds model.max_seq_len={cfg.model.max_seq_len}: "
                          "shorten the sequence or raise model.max_seq_len")
    if w.global_batch_size is not None and (w.global_batch_size <= 0 or w.global_batch_size % dims.data_parallel):
        raise ConfigError(f"workload.global_batch_size={w.global_batch_size} must be a positive multiple of "
                          f"the data-parallel degree dp*fsdp={dims.data_parallel}")
    if dims.pp > 1 and local_batch(w, dims) % cfg.parallel.pp_microbatches:
        raise ConfigError(f"the batch per data-parallel rank ({local_batch(w, dims)}) is not divisible by "
                          f"parallel.pp_microbatches={cfg.parallel.pp_microbatches}")
    if dims.cp > 1 and w.seq_len % (2 * dims.cp):
        raise ConfigError(f"workload.seq_len={w.seq_len} must be divisible by 2*cp={2 * dims.cp} "
                          "(context parallel splits the sequence into 2*cp load-balanced chunks)")
    if cfg.parallel.sp and (w.seq_len // dims.cp) % dims.tp:
        raise ConfigError(f"workload.seq_len={w.seq_len} must be divisible by cp*tp={dims.cp * dims.tp}: "
                          "sequence parallel splits each rank's sequence over the tp ranks "
                          "(or set parallel.sp=false)")


def plan(cfg: Config, dims: ParallelDims) -> dict:
    """The step's tokens and FLOPs, from the config alone (the orchestrator plans without torch)."""
    w = cfg.workload
    counts = param_counts(cfg.model)
    return {
        "tokens_per_step": tokens_per_step(cfg, dims),
        "flops_per_token": flops.train_flops_per_token(cfg.model, counts, w.seq_len, causal=True),
        "flops_per_token_nocausal": flops.train_flops_per_token(cfg.model, counts, w.seq_len, causal=False),
    }


WORKLOADS.register("train")(WorkloadSpec(
    schema=TrainWorkload, validate=validate, run="parbench.workloads.train:run", plan=plan,
    summary_metrics=("throughput_tokens_per_s", "throughput_tokens_per_s_per_device", "step_time_s",
                     "step_time_s_p90", "mfu", "mfu_nocausal", "comm_pct", "exposed_comm_pct", "overlap_pct",
                     "bubble_pct", "bubble_pct_theory", "profile_overhead_ratio", "profile_added_s",
                     "energy_j", "avg_power_w", "tokens_per_joule", "cpu_util_pct", "mem_peak_allocated_gb",
                     "loss_final", "predicted_step_time_s", "predicted_step_time_error_pct", "predicted_mem_peak_gb"),
))
