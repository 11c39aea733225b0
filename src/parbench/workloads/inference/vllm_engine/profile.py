"""Profiling the vllm engine with vLLM's own torch profiler hook (no patching of vLLM): one extra
batch between LLM.start_profile() and stop_profile() writes a Kineto trace per vLLM worker;
metrics/phase_trace.py turns rank 0's into the prefill/decode op-type shares (the native
engine's metric names and op_breakdown files) and the per-op and per-layer tables."""

from __future__ import annotations

import csv
import re
from pathlib import Path

from parbench.metrics.phase_trace import PhaseAnalysis, TraceLabels, analyze_phases
from parbench.metrics.trace_events import load_trace
from parbench.workloads.inference.op_profile import PROFILED_DECODE_STEPS, op_share_metrics, write_op_breakdown

PROFILE_DIR = "vllm_profile"  # the traces (one per worker), under the job dir
OPS_TABLE, LAYERS_TABLE = "vllm_ops.csv", "vllm_layers.csv"
# vLLM's worker wraps each step's forward pass in `execute_context_<n>(<tokens>)_generation_<m>(<tokens>)`
# (with detailed_trace_annotation: `execute_<total>_context_<n>(sq...)_generation_<m>(sq...)`).
STEP_RANGE = re.compile(r"execute_(?:\d+_)?context_(\d+)\(.*\)_generation_(\d+)\(")
# vLLM module class name endings -> the native engine's op categories (Llama, Qwen, Mistral, ... alike).
CATEGORY_ENDINGS = (("Attention", "attention"), ("MLP", "mlp"), ("MoE", "mlp"), ("SparseMoeBlock", "mlp"),
                    ("RMSNorm", "norm"), ("LayerNorm", "norm"), ("VocabParallelEmbedding", "embedding"),
                    ("LogitsProcessor", "lm_head"), ("ParallelLMHead", "lm_head"), ("Sampler", "sampling"))


# GPU kernel name fragments (lower case) -> op category, first match wins, for kernels of vLLM's compiled
# graph (no module ranges there): FlashAttention and the KV cache write, cuBLAS/CUTLASS GEMMs (the
# projections and the MLP together: the graph does not say which), vLLM's and Inductor's fused kernels
# (category names become metric names: letters, digits and underscores only).
KERNEL_CATEGORIES = ((("flash", "fmha", "attn", "reshape_and_cache", "paged"), "attention"),
                     (("gemm", "nvjet", "xmma", "cutlass", "cublas", "matmul"), "matmul"),
                     (("rms_norm", "rmsnorm", "layer_norm", "layernorm", "rsqrt"), "norm"),
                     (("act_and_mul", "silu", "gelu"), "activation"), (("rotary",), "rotary"),
                     (("argmax", "sampl", "topk", "sort"), "sampling"),
                     (("embedding", "index_select", "indexselect"), "embedding"),
                     (("triton_",), "fused"), (("memcpy", "memset", "copy"), "memory"))


def kernel_category(name: str) -> str | None:
    lower = name.lower()
    return next((category for parts, category in KERNEL_CATEGORIES if any(p in lower for p in parts)), None)


def step_phase(name: str) -> str | None:
    """prefill (only requests without a token yet), decode (only generating ones), or mixed."""
    match = STEP_RANGE.match(name)
    if match is None:
        return None
    context, generation = int(match[1]), int(match[2])
    return "mixed" if context and generation else "prefill" if context else "decode"


def module_category(class_name: str) -> str | None:
    return next((category for ending, category in CATEGORY_ENDINGS if class_name.endswith(ending)), None)


VLLM_LABELS = TraceLabels(phase_of_step=step_phase, category_of=module_category, layer_class_ending="DecoderLayer",
                          kernel_category=kernel_category)


def profiler_config(job_dir: Path) -> dict:
    """vLLM's profiler settings: torch profiler, module ranges (with_stack), no printed op tables."""
    return {"profiler": "torch", "torch_profiler_dir": str((job_dir / PROFILE_DIR).resolve()),
            "torch_profiler_with_stack": True, "torch_profiler_dump_cuda_time_total": False}


def profiled_tokens(output_len: int) -> int:
    """The profiled batch's output tokens: the prefill and up to PROFILED_DECODE_STEPS decode steps."""
    return min(output_len, 1 + PROFILED_DECODE_STEPS)


def rank0_trace(job_dir: Path) -> Path:
    """vLLM names traces `<prefix>_dp0_pp0_tp0_dcp0_ep0_rank0.<time>.pt.trace.json.gz` (`rank0.` on one worker)."""
    traces = sorted((job_dir / PROFILE_DIR).glob("*.pt.trace.json*"))
    first = [p for p in traces if re.search(r"(^|_)rank0\.", p.name)]
    if not first:
        raise RuntimeError(f"vLLM wrote no rank-0 trace in {job_dir / PROFILE_DIR} (found {[p.name for p in traces]})")
    return first[0]


def write_table(rows: list[dict], path: Path) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["phase"])
        writer.writeheader()
        writer.writerows(rows)


def analyze_profile(job_dir: Path) -> tuple[dict[str, float], list[str], PhaseAnalysis]:
    """Metrics (prefill_op_pct_*, decode_op_pct_*), the artifact names, and the analysis of rank 0's trace."""
    trace = rank0_trace(job_dir)
    analysis = analyze_phases(load_trace(trace), VLLM_LABELS)
    write_table(analysis.ops, job_dir / OPS_TABLE)
    write_table(analysis.layers, job_dir / LAYERS_TABLE)
    shares = {phase: analysis.shares[phase] for phase in ("prefill", "decode") if phase in analysis.shares}
    artifacts = [*write_op_breakdown(shares, job_dir), OPS_TABLE, LAYERS_TABLE,
                 *(str(p.relative_to(job_dir)) for p in sorted((job_dir / PROFILE_DIR).glob("*.pt.trace.json*")))]
    return op_share_metrics(shares), artifacts, analysis
