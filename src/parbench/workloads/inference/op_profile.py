"""One profiled batch of an inference engine: op-type shares of prefill and decode, time per layer
and op type, and (over several ranks) the communication share of each phase."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.distributed as dist
from torch.autograd.profiler import record_function
from torch.profiler import ProfilerActivity, profile, schedule

from parbench.distenv import DistEnv
from parbench.metrics.op_types import category_totals, module_scopes, op_time_by_layer, shares_pct
from parbench.metrics.profile import LayerRanges, analyze_exported, gzip_trace, rank_summary, trace_path
from parbench.metrics.timing import STEP_RANGE
from parbench.models.kv_cache import KVCache
from parbench.paths import INFERENCE_LAYERS_FILE
from parbench.models.llama import Attention, FeedForward
from parbench.models.moe import MoE
from parbench.workloads.inference.model_parallel import PipelinedDecoder

PROFILED_DECODE_STEPS = 8  # decode steps traced for the op breakdown (each step is alike)
OPS_CSV, OPS_PNG = "op_breakdown.csv", "op_breakdown.png"


def profile_one_batch(decoder: PipelinedDecoder, cache: KVCache, prompts: torch.Tensor, output_len: int,
                      env: DistEnv, job_dir: Path, sample) -> tuple[dict[str, float], list[str]]:
    """The profiled batch's metrics (<phase>_op_pct_<type>, <phase>_comm_pct ...) and, on rank 0,
    the artifacts it wrote (op breakdown table and pies, time per layer and op type)."""
    profs = profile_phases(decoder, cache, prompts, output_len, env, sample)
    on_device = env.device.type == "cuda"
    by_layer = {phase: op_time_by_layer(prof, on_device) for phase, prof in profs.items()}
    shares = {phase: shares_pct(category_totals(times)) for phase, times in by_layer.items()}
    steps = {"prefill": 1, "decode": decode_steps_profiled(output_len)}
    layer_rows = gathered_layer_times(by_layer, steps, env)
    metrics = {**op_share_metrics(shares), **phase_comm_metrics(profs, env, job_dir)}
    if not env.is_main:
        return metrics, []
    return metrics, write_op_breakdown(shares, job_dir) + write_layer_times(layer_rows, job_dir)


def decode_steps_profiled(output_len: int) -> int:
    """Decode steps recorded after the profiler's warm-up step (the KV cache holds output_len
    positions past the prompt, so output_len 2 still has room for both); none for output_len 1."""
    return 0 if output_len < 2 else min(max(output_len - 2, 1), PROFILED_DECODE_STEPS)


def gathered_layer_times(by_layer: dict[str, dict[tuple[str, str], float]], steps: dict[str, int],
                         env: DistEnv) -> list[tuple[str, str, str, float]]:
    """(phase, layer, op type, ms per step), each the mean over the ranks that ran the layer: tp
    ranks run every layer side by side, pp ranks each their own stage's."""
    mine = {(phase, layer, category): us / 1e3 / steps[phase]
            for phase, times in by_layer.items() for (layer, category), us in times.items()}
    gathered: list = [None] * env.world_size
    dist.all_gather_object(gathered, mine)
    keys = sorted({key for rank in gathered for key in rank})
    return [(*key, sum(ms) / len(ms)) for key in keys
            for ms in [[rank[key] for rank in gathered if key in rank]]]


def write_layer_times(rows: list[tuple[str, str, str, float]], job_dir: Path) -> list[str]:
    lines = ["phase,layer,op_type,ms_per_step"] + [f"{p},{layer},{c},{ms:.6f}" for p, layer, c, ms in rows]
    (job_dir / INFERENCE_LAYERS_FILE).write_text("\n".join(lines) + "\n")
    return [INFERENCE_LAYERS_FILE]


def op_categories(decoder: PipelinedDecoder) -> dict[torch.nn.Module, str]:
    """The module -> op-type labels of the breakdown (nested labels: the innermost wins)."""
    labels = {Attention: "attention", FeedForward: "mlp", MoE: "mlp", torch.nn.RMSNorm: "norm",
              torch.nn.Embedding: "embedding"}
    categories = {m: label for root in decoder.modules() for m in root.modules()
                  for kind, label in labels.items() if isinstance(m, kind)}
    if decoder.head is not None:
        categories[decoder.head] = "lm_head"
    return categories


@torch.no_grad()
def profile_phases(decoder: PipelinedDecoder, cache: KVCache, prompts: torch.Tensor, output_len: int,
                   env: DistEnv, sample) -> dict[str, profile]:
    """One profiled batch: the prefill, then decode steps, each step a parbench.step range (what
    trace analysis measures in), each module in its op-type scope and each layer in its range.
    Decode runs op by op here: a graph replay has no module scopes to attribute its kernels to.
    Each phase's profiler first runs one step it discards (its warm-up, back to back with the
    recorded ones): the first ops after a profiler starts pay its start and the wake-up of the
    idle intra-op threads, which put layers.0's prefill attention at 27x layers.1's on CPU."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if env.device.type == "cuda" else [])
    profs: dict[str, profile] = {}
    # Layer ranges after the op-type scopes: they open first and close last, so each layer holds its op types.
    with module_scopes(op_categories(decoder)), LayerRanges(decoder.modules()), decoder.launching_op_by_op():
        with warmed_profile(activities, 1) as profs["prefill"]:
            for _ in range(2):  # the warm-up prefill, then the recorded one
                cache.reset()
                with record_function(STEP_RANGE):
                    tokens = decoder.step(prompts, cache, sample).cpu()
                profs["prefill"].step()
        steps = decode_steps_profiled(output_len)
        if not steps:
            return profs
        with warmed_profile(activities, steps) as profs["decode"]:
            for _ in range(steps + 1):  # the warm-up step, then the recorded ones
                with record_function(STEP_RANGE):
                    tokens = decoder.step(tokens.to(env.device)[:, None], cache, sample).cpu()
                profs["decode"].step()
    return profs


def warmed_profile(activities: list[ProfilerActivity], active: int) -> profile:
    """A profiler that discards its first step and records the next `active`."""
    return profile(activities=activities, schedule=schedule(wait=0, warmup=1, active=active, repeat=1))


def phase_comm_metrics(profs: dict[str, profile], env: DistEnv, job_dir: Path) -> dict[str, float]:
    """Every rank's trace of each phase analysed as training steps are (comm_pct, exposed_comm_pct,
    overlap_pct, comm_pct_<collective>, ...), mean over ranks (`_max`: the max), as prefill_* and
    decode_*; one rank alone has no communication to measure. Rank 0 keeps its traces (gzipped)."""
    mine = {}
    for phase, prof in profs.items():
        raw = trace_path(job_dir, env.rank, phase)
        raw.parent.mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(str(raw))
        if env.world_size == 1:
            gzip_trace(raw)
        else:
            mine[phase] = analyze_exported(raw, keep=env.is_main).metrics()
    if env.world_size == 1:
        return {}
    gathered: list = [None] * env.world_size
    dist.all_gather_object(gathered, mine)
    return {f"{phase}_{key}": value for phase in profs
            for key, value in rank_summary([g[phase] for g in gathered]).items()}


def op_share_metrics(shares: dict[str, dict[str, float]]) -> dict[str, float]:
    """prefill_op_pct_attention, decode_op_pct_all_reduce, ..."""
    return {f"{phase}_op_pct_{category}": pct for phase, table in shares.items() for category, pct in table.items()}


def write_op_breakdown(shares: dict[str, dict[str, float]], job_dir: Path) -> list[str]:
    """The breakdown as a CSV table and a pie per phase; the file names, for the run's artifacts."""
    from parbench.metrics.plots import plot_phase_pies

    categories = sorted({c for table in shares.values() for c in table})
    lines = ["category," + ",".join(shares)]
    lines += [f"{c}," + ",".join(f"{shares[p].get(c, 0.0):.3f}" for p in shares) for c in categories]
    (job_dir / OPS_CSV).write_text("\n".join(lines) + "\n")
    plot_phase_pies(shares, job_dir / OPS_PNG)
    return [OPS_CSV, OPS_PNG]
