"""Every config that cannot work is refused before launch, with a message naming the fix."""

from __future__ import annotations

import re

import pytest
from conftest import compose

from parbench.config import ConfigError
from parbench.config.hardware import GpuInfo
from parbench.prepare import validate

H100 = GpuInfo("NVIDIA H100 80GB HBM3", 81559)


def check(*overrides: str, gpus=(), launching: bool = True):
    cfg = compose(*overrides, gpus=gpus)
    return validate(cfg, list(gpus) if launching else None)


@pytest.mark.parametrize("overrides, message", [
    (["parallel=dp", "parallel.dp=3"], "multiply to 3 but the world size is 2"),
    (["parallel=tp", "parallel.tp=4", "hardware.gpus_per_node=4", "model.heads=6", "model.kv_heads=2",
      "model.head_dim=16"],
     "parallel.tp=4 must divide model.heads=6"),
    (["parallel=tp", "model.kv_heads=1"], "model.kv_heads=1"),
    (["parallel=pp", "model.layers=3"], "model.layers=3 is not divisible by the 2 pipeline stages"),
    (["parallel=ep", "model=tiny_moe", "model.experts=3", "model.top_k=1"],
     "model.experts=3 is not divisible by parallel.ep=2"),
    (["parallel=ep", "model=tiny"], "needs an MoE model"),
    (["model.hidden=0"], "model.hidden=0 must be positive"),
    (["workload.batch_size=-1"], "workload.batch_size=-1 must be positive"),
    (["workload.seq_len=0"], "workload.seq_len=0 must be positive"),
    (["hardware.gpus_per_node=0"], "must be positive"),
    (["parallel=3d"], "not divisible by the fixed degrees"),
    (["parallel.dp=-1", "parallel.fsdp=-1"], "only one degree can be inferred"),
    (["parallel.pp_schedule=zigzag"], "parallel.pp_schedule='zigzag'"),
    (["model.family=mamba"], "model.family='mamba' is unknown"),
    (["workload.seq_len=1024"], "exceeds model.max_seq_len=256"),
    (["workload.dtype=fp8"], "workload.dtype='fp8'"),
    (["parallel.sp=true"], "parallel.sp=true needs parallel.tp > 1"),
    (["model=tiny_moe", "workload.compile=true"], "in fp32 the experts run one GEMM each"),
    (["model=tiny_moe", "workload.compile=true", "workload.dtype=bf16", "parallel=ep"],
     "expert parallel (parallel.ep=2) sizes its all-to-alls"),
    (["model=tiny_moe", "workload.compile=true", "workload.dtype=bf16", "model.capacity_factor=1.5"],
     "the capacity limit (model.capacity_factor=1.5)"),
    (["model.heads=4", "model.kv_heads=3"], "not a multiple of model.kv_heads=3"),
    (["workload.global_batch_size=3"], "workload.global_batch_size=3 must be a positive multiple of the "
                                       "data-parallel degree dp*fsdp=2"),
    (["parallel=pp", "workload.global_batch_size=2"], "the batch per data-parallel rank (2) is not divisible by "
                                                      "parallel.pp_microbatches=4"),
])
def test_invalid_layout_is_refused(overrides, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        check("hardware=cpu", *overrides)


def test_more_gpus_than_the_node_has():
    with pytest.raises(ConfigError, match=r"gpus_per_node=4 but this node has 1 GPU"):
        check("hardware=h100_sxm", "hardware.gpus_per_node=4", gpus=[H100])


def test_gpu_profile_without_gpus():
    with pytest.raises(ConfigError, match="none are visible here: use hardware=cpu"):
        check("hardware=h200", "hardware.gpus_per_node=2", gpus=[])


def test_planning_for_absent_gpus_is_allowed():
    dims = check("hardware=h200", "hardware.gpus_per_node=8", "parallel=fsdp", "model=llama3_8b", launching=False)
    assert dims.fsdp == 8 and dims.world_size == 8


def test_unknown_workload_key_is_refused():
    with pytest.raises(ConfigError, match="batchsize"):
        compose("hardware=cpu", "+workload.batchsize=3")


def test_valid_layouts_pass():
    assert check("hardware=cpu", "parallel=fsdp").fsdp == 2
    assert check("hardware=cpu", "parallel=tp").tp == 2
    assert check("hardware=cpu", "hardware.gpus_per_node=8", "parallel=3d").dp == 2


def test_global_batch_size_is_split_over_data_parallel_ranks():
    from parbench.config.batch import tokens_per_step
    cfg = compose("hardware=cpu", "hardware.gpus_per_node=4", "parallel=fsdp_tp", "workload.global_batch_size=6",
                  "workload.seq_len=32")
    dims = validate(cfg, None)
    assert tokens_per_step(cfg, dims) == 6 * 32  # fsdp 2 ranks x 3 sequences, tp ranks share them
