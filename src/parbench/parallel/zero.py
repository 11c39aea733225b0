"""DeepSpeed ZeRO (stages 0-3, optional CPU offload) over every rank, beside the torch-native
strategies: `deepspeed.initialize` wraps parbench's own model in a DeepSpeedEngine, which owns the
optimizer (its step, mixed precision and the partitioned fp32 master weights). The train loop runs
unchanged: the engine's `backward` and `step` replace `loss.backward()` and the optimizer step.

deepspeed is an optional extra; nothing here imports it until a zero strategy is applied."""

from __future__ import annotations

import inspect
import os
from typing import Any

import torch

from parbench.config.batch import local_batch
from parbench.config.schema import Config, ZeroConfig
from parbench.metrics.memory import reset_peak_memory
from parbench.distenv import DistEnv
from parbench.parallel.model import ParallelModel

# parbench's workload.optimizer -> DeepSpeed's optimizer type (torch.optim.<type> for SGD).
OPTIMIZER_TYPES = {"adamw": "AdamW", "sgd": "SGD"}
NEVER = 10**9  # steps_per_print: parbench reports the steps itself


def optimizer_config(cfg: Config) -> dict[str, Any]:
    """The workload's optimizer, built by the engine: torch's AdamW (fused, as the other strategies
    use) unless parallel.zero.torch_adam=false picks DeepSpeed's compiled FusedAdam/DeepSpeedCPUAdam."""
    w, z = cfg.workload, cfg.parallel.zero
    params: dict[str, Any] = {"lr": w.lr}
    if w.optimizer == "adamw":
        # torch's AdamW default, which the other strategies get; DeepSpeed's own Adams default to 0.
        params["weight_decay"] = inspect.signature(torch.optim.AdamW).parameters["weight_decay"].default
        if z.torch_adam:
            params.update(torch_adam=True, fused=True)
    return {"type": OPTIMIZER_TYPES[w.optimizer], "params": params}


def zero_optimization(z: ZeroConfig, device_type: str) -> dict[str, Any]:
    """The `zero_optimization` section from parallel.zero.*."""
    section: dict[str, Any] = {
        "stage": z.stage,
        "reduce_bucket_size": z.reduce_bucket_size,
        "allgather_bucket_size": z.allgather_bucket_size,
        "contiguous_gradients": z.contiguous_gradients,
        "reduce_scatter": z.reduce_scatter,
        "stage3_prefetch_bucket_size": z.stage3_prefetch_bucket_size,
        "stage3_param_persistence_threshold": z.stage3_param_persistence_threshold,
        "stage3_max_live_parameters": z.stage3_max_live_parameters,
    }
    if z.overlap_comm is not None:
        section["overlap_comm"] = z.overlap_comm
    # Pinned host memory only means something next to a GPU.
    pin = z.pin_memory and device_type == "cuda"
    if z.offload_optimizer:
        section["offload_optimizer"] = {"device": "cpu", "pin_memory": pin}
    if z.offload_param:
        section["offload_param"] = {"device": "cpu", "pin_memory": pin}
    return section


def deepspeed_config(cfg: Config, env: DistEnv) -> dict[str, Any]:
    """The DeepSpeed config dict of this job: one micro-batch per step, no gradient accumulation
    or clipping (as every parbench strategy), the workload's dtype."""
    w, z = cfg.workload, cfg.parallel.zero
    config: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": local_batch(w, env.dims),
        "gradient_accumulation_steps": 1,
        "steps_per_print": NEVER,
        "optimizer": optimizer_config(cfg),
        "bf16": {"enabled": w.dtype == "bf16"},
        "fp16": {"enabled": w.dtype == "fp16"},
        "zero_optimization": zero_optimization(z, env.device.type),
        # torch.optim.SGD is outside DeepSpeed's list of optimizers tested with ZeRO.
        "zero_allow_untested_optimizer": w.optimizer != "adamw",
    }
    if z.communication_data_type is not None:
        config["communication_data_type"] = z.communication_data_type
    return config


def import_deepspeed(device_type: str):
    """Import deepspeed for this device without building ops that ZeRO training never uses.

    On CPU, DeepSpeed's TorchBackend JIT-compiles a shared-memory all-reduce op (~130 s on a
    2-core machine) when it starts. Only `inference_all_reduce` (tensor-parallel inference) calls
    that op; ZeRO's collectives go through torch.distributed (gloo). Marking the op incompatible in
    DeepSpeed's own table of compatible ops skips the build."""
    os.environ.setdefault("DS_ACCELERATOR", device_type)
    import deepspeed
    import deepspeed.ops

    if device_type == "cpu":
        from deepspeed.ops.op_builder.cpu import ShareMemCommBuilder

        deepspeed.ops.__compatible_ops__[ShareMemCommBuilder.NAME] = False
    return deepspeed


def apply(pmodel: ParallelModel, env: DistEnv, cfg: Config) -> ParallelModel:
    deepspeed = import_deepspeed(env.device.type)
    # torch.distributed is initialised already (gloo/NCCL, by init_distributed): DeepSpeed's comm
    # layer wraps that process group instead of making its own.
    deepspeed.init_distributed(dist_backend=cfg.hardware.backend)
    (model,) = pmodel.parts
    engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(),
                                      config=deepspeed_config(cfg, env))
    # Each rank built the whole fp32 model before ZeRO partitioned it; training never holds it again.
    if env.device.type == "cuda":
        torch.cuda.empty_cache()
    reset_peak_memory(env.device)
    pmodel.parts = [engine]
    pmodel.backward = engine.backward
    pmodel.optimizer_step = engine.step  # the optimizer step, then zeroing the gradients
    pmodel.handles_mixed_precision = True  # the engine casts the model to bf16/fp16 itself
    pmodel.notes["deepspeed_version"] = deepspeed.__version__
    return pmodel


# Last: it wraps the model that activation checkpointing (40) has rewritten.
