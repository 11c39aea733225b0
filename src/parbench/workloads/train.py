"""Training workload: warm-up then measured optimizer steps on synthetic tokens."""

from __future__ import annotations

import statistics
from collections import deque
from contextlib import nullcontext
from typing import Callable

import torch
import torch.distributed as dist
from torch import nn

from parbench.config.batch import local_batch, tokens_per_step
from parbench.config.schema import Config
from parbench.metrics import flops
from parbench.metrics.energy import WindowMeter, window_metrics
from parbench.metrics.memory import held_parameters_gb, peak_memory_gb
from parbench.metrics.profile import StepProfiler
from parbench.metrics.timing import StepClock, summarize
from parbench.models.build import build_model
from parbench.models.shapes import param_counts
from parbench.models.moe import MoE
from parbench.distenv import DistEnv, is_dtensor
from parbench.parallel.model import ParallelModel, parallelize
from parbench.parallel.specs import STRATEGIES
from parbench.dtypes import torch_dtype
from parbench.workloads.faults import inject_fault
from parbench.workloads.host_transfer import HostCopy, to_device
from parbench.workloads.manual_gc import manual_gc
from parbench.workloads.reporting import StepReporter
from parbench.workloads.specs.train import TrainWorkload, plan


def synthetic_batch(cfg: Config, env: DistEnv, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's slice of the step's global batch; the same tokens whatever the layout."""
    w = cfg.workload
    gen = torch.Generator().manual_seed(cfg.seed * 1_000_003 + step)
    tokens = torch.randint(0, cfg.model.vocab, (local_batch(w, env.dims) * env.dims.data_parallel, w.seq_len + 1),
                           generator=gen)
    local = tokens.chunk(env.dims.data_parallel)[env.data_rank()]
    # Contiguous: pipeline stages check the strides of what they receive against their first batch.
    inputs, labels = (to_device(t.contiguous(), env.device) for t in (local[:, :-1], local[:, 1:]))
    if env.dims.cp > 1:  # context parallel: this rank's chunks of every sequence
        from parbench.parallel.cp import held_positions  # DTensor's modules: only under cp

        held = held_positions(w.seq_len, env.dims.cp, env.mesh["cp"].get_local_rank(), env.device)
        inputs, labels = inputs[:, held], labels[:, held]
    return inputs, labels


def moe_aux_loss(model: nn.Module) -> torch.Tensor | float:
    return sum((m.aux_loss for m in model.modules() if isinstance(m, MoE)), 0.0)


def default_forward_backward(pmodel: ParallelModel, cfg: Config):
    """Forward, cross-entropy (+ MoE load-balancing loss) and backward on one module."""
    model = pmodel.parts[0]
    aux_coef = cfg.model.aux_loss_coef if cfg.model.experts else 0.0

    def step(inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        with pmodel.step_context():
            logits = model(inputs)
            loss = pmodel.loss_fn(logits, labels)
            total = loss + aux_coef * moe_aux_loss(model) if aux_coef else loss
            pmodel.backward(total)
        return loss.detach()

    return step


def build_parallel_model(cfg: Config, env: DistEnv) -> ParallelModel:
    """Seeded model, every enabled strategy applied; big sharded models start on meta."""
    counts = param_counts(cfg.model)
    sharded = env.dims.fsdp * env.dims.tp * env.dims.pp > 1
    # DDP broadcasts the weights when it wraps them (dp x pp): they must exist by then.
    ddp = STRATEGIES.get("dp").enabled(env.dims, cfg)
    use_meta = cfg.workload.init == "meta" or (
        cfg.workload.init == "auto" and sharded and not ddp and counts.total > 1e9)
    torch.manual_seed(cfg.seed)
    model = build_model(cfg.model, "meta" if use_meta else env.device)
    pmodel = parallelize(model, env, cfg)
    if use_meta:
        for part in pmodel.parts:
            part.to_empty(device=env.device)
            part.init_weights()
    if pmodel.forward_backward is None:
        pmodel.forward_backward = default_forward_backward(pmodel, cfg)
    return pmodel


def build_optimizer(w: TrainWorkload, pmodel: ParallelModel) -> torch.optim.Optimizer:
    if w.optimizer == "sgd":
        return torch.optim.SGD(pmodel.parameters(), lr=w.lr)
    # Fused AdamW cannot mix DTensor and plain parameters in one call (tp leaves norms plain):
    # one param group per kind, which step() updates separately.
    params = list(pmodel.parameters())
    groups = [{"params": [p for p in params if is_dtensor(p) == sharded]} for sharded in (True, False)]
    return torch.optim.AdamW([g for g in groups if g["params"]], lr=w.lr, fused=True)


def optimizer_stepper(optimizer: torch.optim.Optimizer) -> Callable[[], None]:
    """One optimizer step, then the gradients cleared for the next."""
    def step() -> None:
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def autocast_context(w: TrainWorkload, env: DistEnv, pmodel: ParallelModel):
    """bf16/fp16 autocast, unless fp32 or the strategy keeps its own mixed precision."""
    dtype = torch_dtype(w.dtype)
    if dtype == torch.float32 or pmodel.handles_mixed_precision:
        return nullcontext()
    return torch.autocast(env.device.type, dtype=dtype)


def step_phase(w: TrainWorkload, step: int) -> str:
    """warmup, then the measured steps, then the profiler's window (profile)."""
    if step < w.warmup_steps:
        return "warmup"
    return "measure" if step < w.warmup_steps + w.steps else "profile"


def run(cfg: Config, env: DistEnv, reporter: StepReporter) -> dict:
    w = cfg.workload
    pmodel = build_parallel_model(cfg, env)
    # A strategy whose engine owns the optimizer (DeepSpeed) brings its own step.
    optimizer_step = pmodel.optimizer_step or optimizer_stepper(build_optimizer(w, pmodel))
    autocast = autocast_context(w, env, pmodel)
    clock = StepClock(env.device)
    measured = range(w.warmup_steps, w.warmup_steps + w.steps)
    profiler = StepProfiler(cfg, env, reporter.job_dir, pmodel.parts, first_step=measured.stop)
    meter = WindowMeter.for_device(env.device)  # energy and CPU use over the measured steps
    total = measured.stop + profiler.window_steps
    times: dict[str, list[float]] = {"warmup": [], "measure": [], "profile": []}
    losses, strategy_values = [], []
    unread_losses: deque[HostCopy] = deque()

    def read_step() -> None:
        """Record the oldest unread step; waits for that step only (later ones stay queued)."""
        step = len(losses)
        elapsed, dispatch_s = clock.read()
        measured_values = {**pmodel.step_metrics(), "host_dispatch_s": dispatch_s}
        loss_value = unread_losses.popleft().read() / env.world_size
        phase = step_phase(w, step)
        times[phase].append(elapsed)
        if phase == "measure":
            strategy_values.append(measured_values)
            meter.sample()
        losses.append(loss_value)
        reporter.step(step, total, phase, loss=loss_value, step_time_s=elapsed,
                      tokens_per_s=tokens_per_step(cfg, env.dims) / elapsed, **measured_values)

    def read_all_steps() -> None:
        while unread_losses:
            read_step()

    profiler.start()
    try:
        with manual_gc(w.gc_interval) as collect_garbage:
            for step in range(total):
                if step == measured.start:
                    meter.start()
                if step == measured.stop:
                    meter.stop()
                inject_fault(cfg, env, step, flush=read_all_steps)
                inputs, labels = synthetic_batch(cfg, env, step)
                with clock.step():
                    collect_garbage(step)  # inside the step: the loop's collections are part of training
                    with autocast:
                        loss = pmodel.forward_backward(inputs, labels)
                    optimizer_step()
                dist.all_reduce(loss)  # mean over ranks = mean over the global batch
                unread_losses.append(HostCopy(loss))
                while len(unread_losses) > clock.lag:
                    read_step()
                profiler.step()
        meter.stop()  # no window after the measured steps
    finally:  # a failing step still leaves the steps before it recorded
        read_all_steps()
    profiler.stop()
    return train_results(cfg, env, times, losses, strategy_values, pmodel, profiler, meter)


def over_ranks(per_rank: list[list[dict[str, float]]]) -> dict[str, float]:
    """A strategy's per-step measurements: each rank's median over measured steps, then the
    mean over ranks as the metric and the max over ranks as `<name>_max`."""
    summary = {}
    keys = per_rank[0][0].keys() if per_rank[0] else ()
    for key in keys:
        medians = [statistics.median(step[key] for step in steps) for steps in per_rank]
        summary[key] = statistics.fmean(medians)
        summary[f"{key}_max"] = max(medians)
    return summary


def slowest_per_step(per_rank: list[list[float]]) -> list[float]:
    """A step lasts as long as its slowest rank."""
    return [max(steps) for steps in zip(*per_rank)]


def train_results(cfg: Config, env: DistEnv, times: dict[str, list[float]], losses: list[float],
                  strategy_values: list[dict[str, float]], pmodel: ParallelModel,
                  profiler: StepProfiler, meter: WindowMeter) -> dict:
    """Summary metrics over ranks: a step lasts as long as its slowest rank; memory is max over ranks.
    The profiler's window comes after the measured steps and never enters step_time_s."""
    gathered: list = [None] * env.world_size
    held = {"params_held_gb": held_parameters_gb(pmodel.parameters())}
    dist.all_gather_object(gathered, (times, {**peak_memory_gb(env.device), **held}, strategy_values,
                                      meter.reading()))
    slowest = {phase: slowest_per_step([g[0][phase] for g in gathered]) for phase in times}
    memory = {k: max(g[1][k] for g in gathered) for k in gathered[0][1]}
    stats = summarize(slowest["measure"], "step_time_s", cfg.stats.confidence, cfg.stats.ci_method,
                      cfg.stats.bootstrap_resamples)
    tokens = tokens_per_step(cfg, env.dims)
    tokens_per_s = tokens / stats["step_time_s"]
    fig = plan(cfg, env.dims)
    peak = cfg.hardware.peak_tflops[cfg.workload.dtype]
    model_mfu = flops.mfu(fig["flops_per_token"], tokens_per_s, peak, env.world_size)
    window, window_tags = window_metrics([g[3] for g in gathered], tokens * cfg.workload.steps)
    metrics = {
        **stats,
        "throughput_tokens_per_s": tokens_per_s,
        "throughput_tokens_per_s_ci_low": tokens / stats["step_time_s_ci_high"],
        "throughput_tokens_per_s_ci_high": tokens / stats["step_time_s_ci_low"],
        "throughput_tokens_per_s_per_device": tokens_per_s / env.world_size,
        "samples_per_s": tokens_per_s / cfg.workload.seq_len,
        "flops_per_token": fig["flops_per_token"],
        "flops_per_token_nocausal": fig["flops_per_token_nocausal"],
        "tflops_per_device": fig["flops_per_token"] * tokens_per_s / env.world_size / 1e12,
        "mfu": model_mfu,
        "mfu_nocausal": flops.mfu(fig["flops_per_token_nocausal"], tokens_per_s, peak, env.world_size),
        "hfu": model_mfu * flops.recompute_factor(cfg.workload.activation_checkpointing),
        "loss_final": losses[cfg.workload.warmup_steps + cfg.workload.steps - 1],  # the last measured step
        **memory,
        **window,
        **profiler.results(slowest["profile"], slowest["measure"]),
        **over_ranks([g[2] for g in gathered]),
        **pmodel.metrics,
    }
    return {"metrics": metrics, "step_metrics": {"step_time_s_max_over_ranks": slowest["measure"]},
            "tags": {**profiler.tags, **window_tags, **pmodel.notes}}
