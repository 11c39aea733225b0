"""Compiled code that outlives the process: torch.compile's on-disk caches (inductor's FX graphs and
Triton kernels, AOTAutograd's graphs) live in `compile_cache` (default outputs/compile_cache; null:
torch's own default), one folder per compiled-step key.

A key names what a compiled inference step depends on: the model's shape, the dtype, the layout
(tp, pp), the batch and how decode steps run. Input and output length are not in it: the KV cache's
length is a dynamic dimension of the compiled decode step, and the prompt's length of the compiled
prefill (decode_step.mark_lengths_dynamic, run_compiled_block), so a latency grid over lengths
compiles once per batch and layout (one transformer block's prefill and decode step: compile_blocks). Training runs share one folder (`train`). No torch at import: the orchestrator and
tests compute keys without it."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict
from pathlib import Path

from parbench.config.schema import Config

CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"  # inductor's cache root (its Triton kernels go under it too)


def compile_key(cfg: Config) -> str:
    """The compiled step's identity: equal for points that differ only in input/output length."""
    from parbench.workloads.specs.inference import resolved_decode_mode

    w = cfg.workload
    if w.name != "inference":
        return "train"
    shape = {k: v for k, v in asdict(cfg.model).items() if k not in ("name", "max_seq_len")}
    what = {"model": shape, "dtype": w.dtype, "tp": cfg.parallel.tp, "pp": cfg.parallel.pp,
            "batch": w.batch_size, "decode_mode": resolved_decode_mode(cfg), "device": cfg.hardware.device_type}
    digest = hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:12]
    return f"{cfg.model.name}-tp{cfg.parallel.tp}-pp{cfg.parallel.pp}-b{w.batch_size}-{digest}"


def cache_folder(cfg: Config) -> Path | None:
    """Where this run's compiled code is kept (None: torch's default)."""
    return Path(cfg.compile_cache).resolve() / compile_key(cfg) if cfg.compile_cache else None


def use_compile_cache(cfg: Config) -> Path | None:
    """Point torch's compile caches at this run's folder, before anything compiles (a worker's first
    step); a TORCHINDUCTOR_CACHE_DIR set by the user wins."""
    folder = cache_folder(cfg)
    if folder is None or CACHE_ENV in os.environ:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    os.environ[CACHE_ENV] = str(folder)
    return folder


def cache_outcome(counters: dict) -> tuple[dict[str, float], dict[str, str]]:
    """What the compiles of this process found on disk, from torch._dynamo.utils.counters: metrics
    compile_cache_hits/misses (inductor FX graphs) and the tag compile_cache = hit | miss | partial | none."""
    inductor = counters.get("inductor", {})
    hits, misses = inductor.get("fxgraph_cache_hit", 0), inductor.get("fxgraph_cache_miss", 0)
    outcome = "none" if hits + misses == 0 else "hit" if misses == 0 else "miss" if hits == 0 else "partial"
    return {"compile_cache_hits": float(hits), "compile_cache_misses": float(misses)}, {"compile_cache": outcome}
