"""Profiling a window of measured steps with torch.profiler, then turning every rank's trace
into metrics (mean and max over ranks), CSV tables and plots in <job dir>/profile/.

The train loop only does:
    profiler = StepProfiler(cfg, env, job_dir, pmodel.parts, warmup_steps).start()
    for step in ...:
        ...
        profiler.step()
    profiler.stop()
    metrics.update(profiler.results(step_times))   # on every rank: gathers to rank 0
(`with StepProfiler(...) as profiler:` works too.)
"""

from __future__ import annotations

import re
import statistics
from functools import partial
from pathlib import Path

import pandas as pd
import torch
import torch.distributed as dist
from torch import nn
from torch.profiler import ProfilerActivity, record_function, schedule

from parbench.config.schema import Config
from parbench.distenv import DistEnv
from parbench.paths import PROFILE_DIR
from parbench.metrics import trace

# Wrapper modules insert these into parameter/module names; layer names leave them out.
WRAPPER_PREFIXES = ("module.", "_orig_mod.", "_checkpoint_wrapped_module.", "_fsdp_wrapped_module.")
LAYER_NAME = re.compile(r"layers\.\d+|\w*embeddings|norm|output")


def trace_path(job_dir: Path, rank: int) -> Path:
    return job_dir / PROFILE_DIR / f"trace_rank{rank}.json.gz"


def clean_name(name: str) -> str:
    for prefix in WRAPPER_PREFIXES:
        name = name.replace(prefix, "")
    return name


def layer_modules(parts: list[nn.Module]) -> list[tuple[str, nn.Module]]:
    """The top-level layers (embeddings, each block, final norm, output head) of the model parts,
    outermost wrapper first so a checkpointed or compiled block is timed as a whole."""
    found: dict[str, nn.Module] = {}
    for part in parts:
        for name, module in part.named_modules():
            clean = clean_name(name)
            if LAYER_NAME.fullmatch(clean) and clean not in found:
                found[clean] = module
    return list(found.items())


class LayerRanges:
    """A `parbench.layer: <name>` profiler range around each layer's forward (and recompute).
    The pre-hook goes first, so a sharded layer's parameter all-gather falls inside its range."""

    def __init__(self, parts: list[nn.Module]):
        self._open: dict[str, list[record_function]] = {}
        self._handles = []
        for name, module in layer_modules(parts):
            self._open[name] = []
            self._handles.append(module.register_forward_pre_hook(partial(self._enter, name), prepend=True))
            self._handles.append(module.register_forward_hook(partial(self._exit, name), always_call=True))

    def _enter(self, name: str, module: nn.Module, args) -> None:
        r = record_function(f"{trace.LAYER_RANGE_PREFIX} {name}")
        r.__enter__()
        self._open[name].append(r)

    def _exit(self, name: str, module: nn.Module, args, output) -> None:
        if self._open[name]:
            self._open[name].pop().__exit__(None, None, None)

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()


class StepProfiler:
    """torch.profiler over measured steps wait .. wait+warmup+active_steps; a no-op when
    profile.enabled is false. Loop steps before that are the workload's warm-up."""

    def __init__(self, cfg: Config, env: DistEnv, job_dir: Path, parts: list[nn.Module], warmup_steps: int):
        self.cfg, self.env, self.job_dir, self.parts = cfg.profile, env, job_dir, parts
        p = self.cfg
        self.first_loop_step = warmup_steps + p.wait  # the profiler's warm-up starts here
        self.active_start = p.wait + p.warmup  # measured-step indices
        self.active_end = self.active_start + p.active_steps
        self._loop_step = 0
        self._prof: torch.profiler.profile | None = None
        self._layers: LayerRanges | None = None
        self.tags: dict[str, str] = {}

    @property
    def record_shapes(self) -> bool:
        if self.cfg.record_shapes is not None:
            return self.cfg.record_shapes
        return self.env.device.type != "cuda"

    @property
    def enabled(self) -> bool:
        return self.cfg.enabled

    def __enter__(self) -> "StepProfiler":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop(*exc)

    def start(self) -> "StepProfiler":
        if not self.enabled:
            return self
        trace_path(self.job_dir, self.env.rank).parent.mkdir(parents=True, exist_ok=True)
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.env.device.type == "cuda" else [])
        self._prof = torch.profiler.profile(
            activities=activities, record_shapes=self.record_shapes,
            schedule=schedule(skip_first=self.first_loop_step, wait=0, warmup=self.cfg.warmup,
                              active=self.cfg.active_steps, repeat=1),
            on_trace_ready=self._save_trace)
        self._prof.__enter__()
        self._on_loop_step()
        return self

    def _save_trace(self, prof: torch.profiler.profile) -> None:
        prof.export_chrome_trace(str(trace_path(self.job_dir, self.env.rank)))

    def step(self) -> None:
        """Call once at the end of every loop iteration, outside the timed region."""
        if self._prof is None:
            return
        self._prof.step()
        self._loop_step += 1
        self._on_loop_step()

    def _on_loop_step(self) -> None:
        """Layer ranges only while the profiler runs, so unprofiled steps carry no hooks."""
        window_end = self.first_loop_step + self.cfg.warmup + self.cfg.active_steps
        if self._loop_step == self.first_loop_step and self.cfg.layer_ranges:
            self._layers = LayerRanges(self.parts)
        if self._loop_step == self.first_loop_step + self.cfg.warmup and self.cfg.memory_timeline:
            self._start_memory_history()
        if self._loop_step == window_end:
            self._stop_memory_history()
            if self._layers is not None:
                self._layers.remove()
                self._layers = None

    def _start_memory_history(self) -> None:
        if self.env.device.type != "cuda":
            self.tags["memory_timeline"] = "skipped: the allocator history exists for CUDA devices only"
            return
        torch.cuda.memory._record_memory_history(max_entries=200_000)
        self.tags["memory_timeline"] = f"{PROFILE_DIR}/memory_rank<r>.pickle (open at https://pytorch.org/memory_viz)"

    def _stop_memory_history(self) -> None:
        if self.cfg.memory_timeline and self.env.device.type == "cuda":
            torch.cuda.memory._dump_snapshot(str(self.job_dir / PROFILE_DIR / f"memory_rank{self.env.rank}.pickle"))
            torch.cuda.memory._record_memory_history(enabled=None)

    def stop(self, *exc) -> None:
        if self._prof is not None:
            self._prof.__exit__(*(exc or (None, None, None)))
            self._prof = None
        if self._layers is not None:
            self._layers.remove()
            self._layers = None

    def profiled(self, measured_step: int) -> bool:
        """Whether the profiler ran (warm-up or active) during this measured step."""
        return self.enabled and self.cfg.wait <= measured_step < self.active_end

    def unprofiled(self, step_times: list[float]) -> list[float]:
        return [t for i, t in enumerate(step_times) if not self.profiled(i)]

    def results(self, step_times: list[float]) -> dict[str, float]:
        """Analyse this rank's trace; on rank 0 write the tables and plots and return the
        metrics (mean over ranks, and `<name>_max`). Every rank must call it."""
        if not self.enabled:
            return {}
        analysis = trace.analyze(trace.load_trace(trace_path(self.job_dir, self.env.rank)))
        if self.env.device.type == "cuda" and analysis.device != "gpu":
            self.tags["profile_warning"] = ("the trace holds no GPU kernels (is CUPTI available?): compute and "
                                            "communication figures come from CPU-side ops only")
        mine = {"metrics": analysis.metrics(), "steps": [s.row() for s in analysis.steps],
                "ops": analysis.ops, "collectives": analysis.collectives}
        gathered: list = [None] * self.env.world_size
        dist.all_gather_object(gathered, mine)
        if not self.env.is_main:
            return {}
        tables = write_tables(self.job_dir / PROFILE_DIR, gathered)
        if self.cfg.plots:
            from parbench.metrics.plots import save_profile_plots  # matplotlib only when plotting

            save_profile_plots(self.job_dir / PROFILE_DIR, tables)
        active = step_times[self.active_start:self.active_end]
        unprofiled = self.unprofiled(step_times)
        return {**rank_summary([g["metrics"] for g in gathered]),
                **bandwidth_metrics(tables["collectives"]),
                "step_time_s_profiled": statistics.median(active),
                "profile_overhead_ratio": statistics.median(active) / statistics.median(unprofiled)}


def rank_summary(per_rank: list[dict[str, float]]) -> dict[str, float]:
    """Each metric as its mean over ranks, and its max as `<name>_max`; a collective one rank
    never ran counts as 0 there."""
    keys = sorted({k for m in per_rank for k in m})
    out: dict[str, float] = {}
    for key in keys:
        values = [m.get(key, 0.0) for m in per_rank]
        out[key] = statistics.fmean(values)
        out[f"{key}_max"] = max(values)
    return out


def bandwidth_metrics(collectives: pd.DataFrame) -> dict[str, float]:
    """busbw_gbps_<collective>, mean over ranks, where the trace gave sizes."""
    if collectives.empty:
        return {}
    sized = collectives.dropna(subset=["busbw_gbps"])
    return {f"busbw_gbps_{kind}": float(v) for kind, v in sized.groupby("collective")["busbw_gbps"].mean().items()}


def write_tables(folder: Path, gathered: list[dict]) -> dict[str, pd.DataFrame]:
    """steps.csv, ops.csv, layers.csv, collectives.csv and ranks.csv, each with a rank column."""
    def frame(key: str) -> pd.DataFrame:
        rows = [{"rank": rank, **row} for rank, g in enumerate(gathered) for row in g[key]]
        return pd.DataFrame(rows)

    steps = frame("steps")
    if not steps.empty:
        steps.insert(1, "step", steps.groupby("rank").cumcount())
    ops = frame("ops")
    layers = (ops.groupby(["rank", "layer", "phase", "kind"], as_index=False)[["total_s"]].sum()
              if not ops.empty else ops)
    tables = {"steps": steps, "ops": ops, "layers": layers, "collectives": frame("collectives"),
              "ranks": pd.DataFrame([{"rank": r, **g["metrics"]} for r, g in enumerate(gathered)])}
    for name, table in tables.items():
        table.to_csv(folder / f"{name}.csv", index=False)
    return tables
