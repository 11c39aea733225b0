"""FLOPs cross-check: DeepSpeed's flops profiler on the plain model (no parallel wrapper) over one
training step, against parbench's analytical FLOPs per token (metrics/flops.py). One process.

The profiler counts the forward pass by patching torch functions (F.linear, SDPA, torch.matmul,
activations...) and counts a training step as 3 x forward, as DeepSpeed's engine does. Split by
module: nn.Linear modules hold the projection matmuls, each Attention module's own count is its
SDPA core (QK^T and AV over the full score matrix; its projections are child Linears), and the
rest is element-wise work it sees (SiLU/GELU). Expected, and logged:
    ds_matmul_flops_per_token = matmul_flops_per_token   (exactly)
      where matmul_flops_per_token = flops_per_token_nocausal - 6 x (norm weights and biases)
    ds_flops_per_token - flops_per_token_nocausal
      = ds_elementwise_flops_per_token - 6 x (norm weights and biases)
It never sees ops written as Tensor operators (residual adds, the SwiGLU product, RoPE), RMSNorm
(F.rms_norm is not patched), the loss, nor matmuls written with `@` (the MoE experts)."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path

import torch
from torch import nn

from parbench.config.schema import Config
from parbench.metrics import flops
from parbench.models.build import build_model
from parbench.models.shapes import param_counts
from parbench.models.llama import Attention
from parbench.distenv import DistEnv
from parbench.parallel import zero
from parbench.parallel.model import token_cross_entropy
from parbench.dtypes import torch_dtype
from parbench.workloads.reporting import StepReporter

PROFILE_FILE = "flops_profile.txt"  # DeepSpeed's per-module table


def analytical(cfg: Config, model: nn.Module) -> dict[str, float]:
    """parbench's figures per token: the MFU formulas, and the matmul part alone."""
    counts = param_counts(cfg.model)
    seq = cfg.workload.seq_len
    nocausal = flops.train_flops_per_token(cfg.model, counts, seq, causal=False)
    return {"flops_per_token": flops.train_flops_per_token(cfg.model, counts, seq, causal=True),
            "flops_per_token_nocausal": nocausal,
            "elementwise_param_flops_per_token": 6.0 * flops.elementwise_params(model),
            "matmul_flops_per_token": nocausal - 6.0 * flops.elementwise_params(model)}


def profiled(cfg: Config, env: DistEnv, model: nn.Module, profile_file: Path) -> dict[str, float]:
    """DeepSpeed's counts per token (x3 for forward+backward) over one training step on random tokens."""
    zero.import_deepspeed(env.device.type)
    from deepspeed.profiling.flops_profiler import FlopsProfiler

    w = cfg.workload
    tokens = torch.randint(0, cfg.model.vocab, (w.batch_size, w.seq_len + 1),
                           generator=torch.Generator().manual_seed(cfg.seed)).to(env.device)
    dtype = torch_dtype(w.dtype)
    autocast = torch.autocast(env.device.type, dtype=dtype) if dtype != torch.float32 else nullcontext()
    model.train()
    profiler = FlopsProfiler(model)
    profiler.start_profile()
    with autocast:
        logits = model(tokens[:, :-1])
    token_cross_entropy(logits, tokens[:, 1:]).backward()
    profiler.stop_profile()
    total = profiler.get_total_flops()
    linear = sum(m.__flops__ for m in model.modules() if isinstance(m, nn.Linear))
    attention = sum(m.__flops__ for m in model.modules() if isinstance(m, Attention))  # own count: SDPA
    profiler.print_model_profile(profile_step=1, module_depth=3, output_file=str(profile_file))
    profiler.end_profile()
    per_token = 3.0 / (w.batch_size * w.seq_len)
    return {"ds_flops_per_token": total * per_token, "ds_linear_flops_per_token": linear * per_token,
            "ds_attention_flops_per_token": attention * per_token,
            "ds_matmul_flops_per_token": (linear + attention) * per_token,
            "ds_elementwise_flops_per_token": (total - linear - attention) * per_token}


def compare(ours: dict[str, float], theirs: dict[str, float]) -> dict[str, float]:
    """The differences the module docstring explains."""
    diff = theirs["ds_flops_per_token"] - ours["flops_per_token_nocausal"]
    return {"ds_matmul_diff_per_token": theirs["ds_matmul_flops_per_token"] - ours["matmul_flops_per_token"],
            "ds_flops_diff_per_token": diff,
            "ds_flops_diff_pct": 100.0 * diff / ours["flops_per_token_nocausal"],
            # What MFU from DeepSpeed's count would be, relative to parbench's (causal) mfu.
            "ds_over_parbench_flops_ratio": theirs["ds_flops_per_token"] / ours["flops_per_token"]}


def run(cfg: Config, env: DistEnv, reporter: StepReporter) -> dict:
    torch.manual_seed(cfg.seed)
    model = build_model(cfg.model, env.device)
    ours = analytical(cfg, model)
    theirs = profiled(cfg, env, model, reporter.job_dir / PROFILE_FILE)
    metrics = {**ours, **theirs, **compare(ours, theirs)}
    reporter.step(0, 1, "profile", **{k: metrics[k] for k in ("flops_per_token_nocausal", "ds_flops_per_token")})
    return {"metrics": metrics, "artifacts": [PROFILE_FILE]}
