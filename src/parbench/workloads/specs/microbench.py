"""The microbenchmarks' configs and checks (nccl-tests style sizes); their code is in
parbench.workloads.microbench."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import List

from parbench.config import ConfigError
from parbench.config.dims import ParallelDims
from parbench.config.hardware import require_peak
from parbench.config.schema import Config
from parbench.dtypes import DTYPE_NAMES, ITEMSIZE
from parbench.workloads.registry import WORKLOADS, WorkloadSpec

_SIZE = re.compile(r"^\s*(\d+)\s*([KMGT]?)i?B?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
MATMUL_DTYPES = (*DTYPE_NAMES, "tf32")  # tf32: fp32 tensors on TF32 tensor cores
COLLECTIVE_OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv")
CHUNKED_OPS = ("all_gather", "reduce_scatter", "all_to_all")  # the buffer splits into one chunk per rank
TP_LINEAR_MODES = ("none", "column", "row")


def parse_size(text: str | int, key: str = "size") -> int:
    """Bytes from 1048576, '1M', '1MiB' or '1G' (binary units, as nccl-tests reads -b/-e)."""
    match = _SIZE.match(str(text))
    if not match:
        raise ConfigError(f"workload.{key}={text!r} is not a size: write bytes or a number with K, M, G "
                          "(e.g. 1M, 1G)")
    return int(match.group(1)) * _UNITS[match.group(2).upper()]


def size_sweep(begin: str | int, end: str | int, factor: int) -> list[int]:
    """begin, begin*factor, ... up to end (nccl-tests -b -e -f)."""
    lo, hi = parse_size(begin, "begin"), parse_size(end, "end")
    if lo <= 0 or hi < lo:
        raise ConfigError(f"workload.begin={begin} and workload.end={end}: need 0 < begin <= end")
    if factor < 2:
        raise ConfigError(f"workload.factor={factor} must be >= 2 (each size is the previous times factor)")
    sizes = [lo]
    while sizes[-1] * factor <= hi:
        sizes.append(sizes[-1] * factor)
    return sizes


def human_size(nbytes: int) -> str:
    for unit in ("G", "M", "K"):
        if nbytes >= _UNITS[unit] and nbytes % _UNITS[unit] == 0:
            return f"{nbytes // _UNITS[unit]}{unit}iB"
    return f"{nbytes}B"


def check_iterations(w) -> None:
    if w.iters <= 0 or w.warmup_iters < 0:
        raise ConfigError(f"workload.iters={w.iters} must be positive and workload.warmup_iters={w.warmup_iters} "
                          ">= 0")


def require_gpus(cfg: Config, what: str, instead: str) -> None:
    if cfg.hardware.device_type != "cuda":
        raise ConfigError(f"workload={cfg.workload.name} {what} and needs GPUs (hardware.device_type=cuda); "
                          f"hardware={cfg.hardware.name} has none. {instead}")


@dataclass
class MatmulWorkload:
    name: str = "matmul"
    shapes: List[List[int]] = field(default_factory=lambda: [[n, n, n] for n in (1024, 2048, 4096, 8192)])  # [M, K, N]
    dtype: str = "auto"  # bf16 on GPU, fp32 on CPU; or fp32, tf32, bf16, fp16
    warmup_iters: int = 10
    iters: int = 50
    rotate_bytes: str = "512M"  # total size of the rotated input pairs
    b_transposed: bool = False  # B held N x K and used transposed, as nn.Linear holds its weight: F.linear(A, B)
    graph_calls: int = 0  # >0 (GPUs): that many calls replayed as one CUDA graph, as an engine's decode step
    groups: int = 0  # >0: A's M rows split evenly over that many K x N matrices in one grouped GEMM (an MoE's experts)
    routed_groups: bool = False  # with groups: the rows split as a balanced router spreads random tokens (seeded)


def validate_matmul(cfg: Config, dims: ParallelDims) -> None:
    w = cfg.workload
    if w.dtype not in MATMUL_DTYPES:
        raise ConfigError(f"workload.dtype={w.dtype!r}: use auto or one of {', '.join(MATMUL_DTYPES)}")
    if w.dtype == "tf32" and cfg.hardware.device_type != "cuda":
        raise ConfigError("workload.dtype=tf32 needs NVIDIA GPUs: use fp32 on CPU")
    require_peak(cfg.hardware, w.dtype)
    if not w.shapes or any(len(s) != 3 or min(s) <= 0 for s in w.shapes):
        raise ConfigError(f"workload.shapes={w.shapes}: give a list of [M, K, N] with positive sizes, "
                          "e.g. workload.shapes=[[4096,4096,4096]]")
    check_iterations(w)
    parse_size(w.rotate_bytes, "rotate_bytes")
    if w.graph_calls < 0:
        raise ConfigError(f"workload.graph_calls={w.graph_calls}: give 0 (each call timed alone) or a positive count")
    if w.graph_calls:
        require_gpus(cfg, "with workload.graph_calls > 0 replays CUDA graphs", "Set workload.graph_calls=0.")
    if w.groups < 0 or (not w.routed_groups and any(m % w.groups for m, _, _ in w.shapes if w.groups)):
        raise ConfigError(f"workload.groups={w.groups}: give 0 (plain GEMMs) or a count that divides every shape's M "
                          "(or split the rows as a router does: workload.routed_groups=true)")
    if w.groups and w.dtype != "bf16":
        raise ConfigError("workload.groups > 0 times F.grouped_mm, which takes bf16: set workload.dtype=bf16")
    if w.groups and any(k % 8 or n % 8 for _, k, n in w.shapes):
        raise ConfigError(f"workload.groups > 0 with workload.shapes={w.shapes}: grouped_mm's kernel needs K and N in "
                          "multiples of 8 (16-byte rows)")


@dataclass
class AttentionWorkload:
    name: str = "attention"
    # [batch, heads, kv_heads, seq_len, head_dim]; the 1B Llama's heads at the same tokens per shape
    shapes: List[List[int]] = field(default_factory=lambda: [[8, 32, 8, 1024, 64], [4, 32, 8, 2048, 64],
                                                             [2, 32, 8, 4096, 64], [1, 32, 8, 8192, 64]])
    # [batch, heads, kv_heads, positions, head_dim]: a decode step's attention over a static cache buffer
    decode_shapes: List[List[int]] = field(default_factory=list)
    rotate_bytes: str = "512M"  # the decode shapes' caches rotate through at least this many bytes
    causal: bool = True
    dtype: str = "auto"  # bf16 on GPU, fp32 on CPU
    warmup_iters: int = 5
    iters: int = 20


def validate_attention(cfg: Config, dims: ParallelDims) -> None:
    w = cfg.workload
    if w.dtype not in DTYPE_NAMES:
        raise ConfigError(f"workload.dtype={w.dtype!r}: use auto or one of {', '.join(DTYPE_NAMES)}")
    if not w.shapes or any(len(s) != 5 or min(s) <= 0 or s[1] % s[2] for s in w.shapes):
        raise ConfigError(f"workload.shapes={w.shapes}: give a list of [batch, heads, kv_heads, seq_len, head_dim] "
                          "with positive sizes and heads a multiple of kv_heads, e.g. workload.shapes=[[4,32,8,2048,64]]")
    if any(len(s) != 5 or min(s) <= 0 or s[1] % s[2] for s in w.decode_shapes):
        raise ConfigError(f"workload.decode_shapes={w.decode_shapes}: give a list of [batch, heads, kv_heads, "
                          "positions, head_dim] with positive sizes and heads a multiple of kv_heads, e.g. "
                          "workload.decode_shapes=[[16,32,8,1024,64]]")
    parse_size(w.rotate_bytes, "rotate_bytes")
    check_iterations(w)


@dataclass
class CollectivesWorkload:
    name: str = "collectives"
    ops: List[str] = field(default_factory=lambda: list(COLLECTIVE_OPS))
    begin: str = "1K"  # first message size: bytes, or with K/M/G (binary units)
    end: str = "1M"  # last message size (inclusive)
    factor: int = 2  # each size is the previous times factor
    dtype: str = "fp32"  # nccl-tests' default is float
    warmup_iters: int = 5
    iters: int = 20
    verify: bool = True


def validate_collectives(cfg: Config, dims: ParallelDims) -> None:
    w = cfg.workload
    unknown = [op for op in w.ops if op not in COLLECTIVE_OPS]
    if unknown or not w.ops:
        raise ConfigError(f"workload.ops={list(w.ops)}: choose among {', '.join(COLLECTIVE_OPS)}")
    if w.dtype not in DTYPE_NAMES:
        raise ConfigError(f"workload.dtype={w.dtype!r}: use one of {', '.join(DTYPE_NAMES)}")
    check_iterations(w)
    sizes = size_sweep(w.begin, w.end, w.factor)
    n, itemsize = dims.world_size, ITEMSIZE[w.dtype]
    if "send_recv" in w.ops and n < 2:
        raise ConfigError("workload.ops has send_recv, which needs at least 2 ranks: set hardware.gpus_per_node>=2 "
                          "or drop send_recv from workload.ops")
    smallest_split = n * itemsize if any(op in CHUNKED_OPS for op in w.ops) else itemsize
    if sizes[0] < smallest_split:
        raise ConfigError(f"workload.begin={w.begin} is smaller than one {w.dtype} element per rank "
                          f"({smallest_split} bytes for {n} ranks): raise workload.begin")


@dataclass
class P2pWorkload:
    name: str = "p2p"
    size: str = "256M"  # bytes per copy, or with K/M/G (binary units)
    warmup_iters: int = 3
    iters: int = 10
    bidirectional: bool = True
    host: bool = True  # also pinned host <-> device


def validate_p2p(cfg: Config, dims: ParallelDims) -> None:
    require_gpus(cfg, "measures copies between GPUs and between host and GPU",
                 "On CPU, workload=membw measures memory bandwidth and workload=collectives workload.ops=[send_recv] "
                 "rank-to-rank bandwidth.")
    parse_size(cfg.workload.size)
    check_iterations(cfg.workload)


@dataclass
class MembwWorkload:
    name: str = "membw"
    begin: str = "1M"  # first copy size: bytes, or with K/M/G (binary units)
    end: str = "1G"
    factor: int = 4
    warmup_iters: int = 5
    iters: int = 20


def validate_membw(cfg: Config, dims: ParallelDims) -> None:
    w = cfg.workload
    size_sweep(w.begin, w.end, w.factor)
    check_iterations(w)


@dataclass
class TpLinearWorkload:
    name: str = "tp_linear"
    tokens: int = 8192  # rows of X (batch x sequence)
    in_features: int = 8192
    out_features: int = 8192
    modes: List[str] = field(default_factory=lambda: list(TP_LINEAR_MODES))
    dtype: str = "auto"  # bf16 on GPU, fp32 on CPU
    warmup_iters: int = 5
    iters: int = 20


def validate_tp_linear(cfg: Config, dims: ParallelDims) -> None:
    w, n = cfg.workload, dims.world_size
    if not w.modes or any(m not in TP_LINEAR_MODES for m in w.modes):
        raise ConfigError(f"workload.modes={list(w.modes)}: choose among {', '.join(TP_LINEAR_MODES)}")
    if w.dtype not in DTYPE_NAMES:
        raise ConfigError(f"workload.dtype={w.dtype!r}: use auto or one of {', '.join(DTYPE_NAMES)}")
    for key in ("tokens", "in_features", "out_features"):
        if getattr(w, key) <= 0:
            raise ConfigError(f"workload.{key}={getattr(w, key)} must be positive")
    if w.in_features % n or w.out_features % n:
        raise ConfigError(f"workload.in_features={w.in_features} and workload.out_features={w.out_features} must be "
                          f"divisible by the {n} tp ranks (every rank of the job)")
    check_iterations(w)


@dataclass
class TopologyWorkload:
    name: str = "topology"


def validate_topology(cfg: Config, dims: ParallelDims) -> None:
    require_gpus(cfg, "reports the GPUs and their links", "There is no GPU topology to report on CPU.")


# The plans: what the orchestrator logs before launch, from the config alone (no torch).
def plan_matmul(cfg: Config, dims: ParallelDims) -> dict:
    return {"shapes": len(cfg.workload.shapes), "peak_tflops": cfg.hardware.peak_tflops[cfg.workload.dtype]}


def plan_attention(cfg: Config, dims: ParallelDims) -> dict:
    return {"shapes": len(cfg.workload.shapes), "decode_shapes": len(cfg.workload.decode_shapes),
            "causal": cfg.workload.causal}


def plan_collectives(cfg: Config, dims: ParallelDims) -> dict:
    sizes = size_sweep(cfg.workload.begin, cfg.workload.end, cfg.workload.factor)
    return {"sizes": len(sizes), "size_min_bytes": sizes[0], "size_max_bytes": sizes[-1]}


def plan_p2p(cfg: Config, dims: ParallelDims) -> dict:
    gpus = cfg.hardware.gpus_per_node
    return {"gpu_pairs": gpus * (gpus - 1), "size_bytes": parse_size(cfg.workload.size)}


def plan_membw(cfg: Config, dims: ParallelDims) -> dict:
    sizes = size_sweep(cfg.workload.begin, cfg.workload.end, cfg.workload.factor)
    return {"sizes": len(sizes), "size_max_bytes": sizes[-1]}


def plan_tp_linear(cfg: Config, dims: ParallelDims) -> dict:
    w = cfg.workload
    return {"tp": dims.world_size, "flops_unsharded": 2 * w.tokens * w.in_features * w.out_features}


MICROBENCH = "parbench.workloads.microbench."
WORKLOADS.register("matmul")(WorkloadSpec(
    schema=MatmulWorkload, validate=validate_matmul, run=MICROBENCH + "matmul:run", plan=plan_matmul,
    uses_model=False,
    summary_metrics=("matmul_tflops", "matmul_peak_fraction", "matmul_tflops_max", "matmul_tflops/*"),
))
WORKLOADS.register("attention")(WorkloadSpec(
    schema=AttentionWorkload, validate=validate_attention, run=MICROBENCH + "attention:run", plan=plan_attention,
    uses_model=False, summary_metrics=("attention_tflops", "attention_tflops_max", "attention_tflops/*", "decode_attention_gbps/*"),
))
WORKLOADS.register("collectives")(WorkloadSpec(
    schema=CollectivesWorkload, validate=validate_collectives, run=MICROBENCH + "collectives:run",
    plan=plan_collectives, uses_model=False,
    summary_metrics=("busbw_gbps/*", "algbw_gbps/*", "busbw_gbps_avg", "wrong_elements"),
))
WORKLOADS.register("p2p")(WorkloadSpec(
    schema=P2pWorkload, validate=validate_p2p, run=MICROBENCH + "p2p:run", plan=plan_p2p,
    uses_model=False,
    summary_metrics=("p2p_gbps_min", "p2p_gbps_mean", "p2p_gbps_max", "p2p_bidir_gbps_mean", "h2d_gbps", "d2h_gbps"),
))
WORKLOADS.register("membw")(WorkloadSpec(
    schema=MembwWorkload, validate=validate_membw, run=MICROBENCH + "membw:run", plan=plan_membw,
    uses_model=False, summary_metrics=("membw_gbps", "membw_peak_fraction", "membw_gbps/*"),
))
WORKLOADS.register("tp_linear")(WorkloadSpec(
    schema=TpLinearWorkload, validate=validate_tp_linear, run=MICROBENCH + "tp_linear:run",
    plan=plan_tp_linear, uses_model=False,
    summary_metrics=("total_ms/*", "compute_ms/*", "comm_ms/*", "comm_busbw_gbps/*", "max_rel_error/*"),
))
WORKLOADS.register("topology")(WorkloadSpec(
    schema=TopologyWorkload, validate=validate_topology, run=MICROBENCH + "topology:run", uses_model=False,
    summary_metrics=("gpu_count", "nvlinks/*"),
))
