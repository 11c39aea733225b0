"""Profiling a short window of steps after the measured ones with torch.profiler (on by default),
then turning every rank's trace into metrics (mean and max over ranks), CSV tables and plots in
<job dir>/profile/. The window's steps are never part of step_time_s.

The train loop only does:
    profiler = StepProfiler(cfg, env, job_dir, pmodel.parts, first_step=warmup + measured).start()
    for step in range(warmup + measured + profiler.window_steps):
        ...
        profiler.step()
    profiler.stop()
    metrics.update(profiler.results(window_step_times, measured_step_times))  # every rank: gathers to rank 0
(`with StepProfiler(...) as profiler:` works too.)
"""

from __future__ import annotations

import gzip
import re
import shutil
import statistics
import time
import warnings
from functools import partial
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.profiler import ProfilerActivity, record_function, schedule

from parbench.config.schema import Config
from parbench.distenv import DistEnv
from parbench.paths import PROFILE_DIR
from parbench.metrics import KERNEL_TIME, trace, trace_events
from parbench.metrics.profile_tables import bandwidth_metrics, write_tables

GZIP_LEVEL = 3  # traces compress ~10x at any level; higher levels cost seconds on big traces
# Wrapper modules insert these into parameter/module names; layer names leave them out.
WRAPPER_PREFIXES = ("module.", "_orig_mod.", "_checkpoint_wrapped_module.", "_fsdp_wrapped_module.")
LAYER_NAME = re.compile(r"layers\.\d+|\w*embeddings|norm|output")

# torch warns at each profiled cycle's start that it clears the last cycle's events; the window is one
# cycle (repeat=1), so there is nothing to lose, and users saw the warning on every profiled run.
warnings.filterwarnings("ignore", message="Warning: Profiler clears events", category=UserWarning)


def trace_path(job_dir: Path, rank: int, phase: str = "") -> Path:
    """Where a rank's exported trace goes (uncompressed; analyze_exported gzips the kept ones)."""
    return job_dir / PROFILE_DIR / f"trace_{phase + '_' if phase else ''}rank{rank}.json"


def keeps_trace(env: DistEnv, keep: str) -> bool:
    """Whether this rank keeps its full trace as an artifact. representative: rank 0, the first
    rank of every pipeline stage (coordinate 0 on every other mesh dim) and of every node; every
    rank analyses its own trace either way."""
    if keep == "all" or env.rank == 0 or env.local_rank == 0:
        return True
    mesh = env.mesh
    return mesh is not None and all(coordinate == 0 for name, coordinate in zip(mesh.mesh_dim_names, mesh.get_coordinate())
                                    if name != "pp")


def gzip_trace(raw: Path) -> Path:
    """`<name>.json` -> `<name>.json.gz` (the artifact); the raw file is removed."""
    kept = raw.with_suffix(".json.gz")
    with raw.open("rb") as src, gzip.open(kept, "wb", compresslevel=GZIP_LEVEL) as dst:
        shutil.copyfileobj(src, dst)
    raw.unlink()
    return kept


def analyze_exported(raw: Path, keep: bool) -> trace.TraceAnalysis:
    """Analyse an exported trace, then keep it gzipped or delete it."""
    analysis = trace.analyze(trace_events.load_trace(raw))
    if keep:
        gzip_trace(raw)
    else:
        raw.unlink()
    return analysis


def kept_ranks_tag(kept: list[int], keep: str) -> str:
    rule = ("every rank" if keep == "all" else
            "rank 0, the first rank of each pipeline stage and of each node; profile.keep_traces=all keeps all")
    return f"{', '.join(map(str, kept))} ({rule}); every rank's trace is analysed"


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
        r = record_function(f"{trace_events.LAYER_RANGE_PREFIX} {name}")
        r.__enter__()
        self._open[name].append(r)

    def _exit(self, name: str, module: nn.Module, args, output) -> None:
        if self._open[name]:
            self._open[name].pop().__exit__(None, None, None)

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()

    def __enter__(self) -> "LayerRanges":
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


class StepProfiler:
    """torch.profiler over loop steps first_step .. first_step + window_steps, after the measured
    ones: `wait` unprofiled steps, `warmup` steps the profiler runs but discards, `active_steps`
    traced and analysed. window_steps is 0 (a no-op profiler) when profile.enabled is false."""

    def __init__(self, cfg: Config, env: DistEnv, job_dir: Path, parts: list[nn.Module], first_step: int):
        self.cfg, self.env, self.job_dir, self.parts = cfg.profile, env, job_dir, parts
        self.window_start = first_step  # loop index of the window's first step
        self.first_loop_step = first_step + self.cfg.wait  # the profiler's warm-up starts here
        self._loop_step = 0
        self._started_at = 0.0  # wall clock at the window's first step: what the window adds
        self._export_s = 0.0
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

    @property
    def window_steps(self) -> int:
        """Loop steps the window adds after the measured ones."""
        return self.cfg.wait + self.cfg.warmup + self.cfg.active_steps if self.enabled else 0

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
        started = time.perf_counter()
        prof.export_chrome_trace(str(trace_path(self.job_dir, self.env.rank)))
        self._export_s = time.perf_counter() - started

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
        if self._loop_step == self.window_start:
            self._started_at = time.perf_counter()
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

    def results(self, window_times: list[float], measured_times: list[float]) -> dict[str, float]:
        """Analyse this rank's trace; on rank 0 write the tables and plots and return the metrics
        (mean over ranks, and `<name>_max`). `window_times`: the window's step times in loop order.
        Every rank must call it."""
        if not self.enabled:
            return {}
        keep = keeps_trace(self.env, self.cfg.keep_traces)
        started = time.perf_counter()
        analysis = analyze_exported(trace_path(self.job_dir, self.env.rank), keep)
        cost = {"profile_export_s": self._export_s, "profile_analysis_s": time.perf_counter() - started}
        metrics = analysis.metrics()
        if self.env.device.type == "cuda" and analysis.device != "gpu":
            self.tags["profile_warning"] = ("the trace holds no GPU kernels (is CUPTI available?): compute and "
                                            "communication figures come from CPU-side ops only")
            metrics = {k: v for k, v in metrics.items() if not k.startswith(KERNEL_TIME)}  # host time, not the kernels'
        mine = {"metrics": {**metrics, **cost}, "steps": [s.row() for s in analysis.steps],
                "ops": analysis.ops, "collectives": analysis.collectives, "keeps_trace": keep}
        gathered: list = [None] * self.env.world_size
        dist.all_gather_object(gathered, mine)
        if not self.env.is_main:
            return {}
        self.tags["profile_trace_ranks"] = kept_ranks_tag([r for r, g in enumerate(gathered) if g["keeps_trace"]],
                                                          self.cfg.keep_traces)
        tables = write_tables(self.job_dir / PROFILE_DIR, gathered)
        if self.cfg.plots:
            import pandas as pd  # pandas and matplotlib only when plotting

            from parbench.metrics.plots import save_profile_plots

            save_profile_plots(self.job_dir / PROFILE_DIR, {k: pd.DataFrame(v) for k, v in tables.items()})
        active = statistics.median(window_times[self.cfg.wait + self.cfg.warmup:])
        return {**rank_summary([g["metrics"] for g in gathered]),
                **bandwidth_metrics(tables["collectives"]),
                "step_time_s_profiled": active,
                "profile_overhead_ratio": active / statistics.median(measured_times),
                "profile_added_s": time.perf_counter() - self._started_at}


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
