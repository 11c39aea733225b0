"""Inference workload: fixed-length prompts, prefill then greedy decode of a fixed number of tokens,
measured with vLLM's definitions (TTFT, TPOT, ITL, E2E). Its config, checks and engine table are in
parbench.workloads.specs.inference; the engines are native.py and vllm_engine/."""

from __future__ import annotations

from parbench.config import ConfigError
from parbench.config.dims import ParallelDims
from parbench.config.schema import Config
from parbench.dtypes import ITEMSIZE
from parbench.dtypes import GB
from parbench.models.shapes import param_counts
from parbench.metrics.inference_cost import decode_bytes_per_step, kv_bytes_per_position
from parbench.workloads.specs.vllm_engine import kv_cache_gb_per_worker, parbench_shape


def memory_per_device_gb(cfg: Config) -> dict[str, float]:
    """Weights and the full KV cache (input_len + output_len positions) per device; tp and pp
    split both evenly."""
    w, itemsize = cfg.workload, ITEMSIZE[cfg.workload.dtype]
    devices = cfg.parallel.tp * cfg.parallel.pp
    counts = param_counts(cfg.model)
    kv_cache = kv_bytes_per_position(cfg.model, w.batch_size, itemsize) * (w.input_len + w.output_len)
    return {"weights_per_device_gb": counts.total * itemsize / devices / GB,
            "kv_cache_per_device_gb": kv_cache / devices / GB}


def check_fits(cfg: Config, memory: dict[str, float]) -> None:
    """Weights and KV cache alone must fit the device memory (activations come on top); vLLM on a
    GPU gets gpu_memory_utilization of it and keeps whole KV blocks."""
    hw, w = cfg.hardware, cfg.workload
    weights, kv_cache = memory["weights_per_device_gb"], memory["kv_cache_per_device_gb"]
    if w.engine == "native" and hw.memory_gb and weights + kv_cache > hw.memory_gb:
        raise ConfigError(f"weights ({weights:.1f} GB) + KV cache ({kv_cache:.1f} GB) per device exceed "
                          f"hardware.memory_gb={hw.memory_gb} of {hw.name}: lower workload.batch_size or "
                          "input_len, or raise tp/pp")
    if w.engine == "vllm" and hw.device_type == "cuda" and hw.memory_gb and w.vllm.model is None:
        kv_cache = kv_cache_gb_per_worker(cfg, parbench_shape(cfg))
        usable = hw.memory_gb * w.vllm.gpu_memory_utilization
        if weights + kv_cache > usable:
            raise ConfigError(f"weights ({weights:.1f} GB) + the batch's KV cache ({kv_cache:.1f} GB) per GPU exceed "
                              f"workload.vllm.gpu_memory_utilization x hardware.memory_gb = {usable:.1f} GB: lower "
                              "workload.batch_size or the lengths, or raise tp/pp")


def plan(cfg: Config, dims: ParallelDims) -> dict:
    w = cfg.workload
    counts = param_counts(cfg.model)
    weights, kv_read = decode_bytes_per_step(cfg.model, counts, w, ITEMSIZE[w.dtype])
    memory = memory_per_device_gb(cfg)
    check_fits(cfg, memory)
    return {"engine": w.engine, "model_devices": cfg.parallel.tp * cfg.parallel.pp,
            "weight_bytes_per_step": weights, "kv_bytes_per_step": kv_read, **memory}
