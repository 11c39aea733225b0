"""Tensor, sequence and context parallel (and their 2D mixes) train like one process: from the same
seed and the same global batch, the per-step losses of AdamW training agree with a single-process
run of the same model. Every run goes through the real CLI (Hydra -> torchrun -> gloo workers).

The learning rate is high enough (0.02) that a wrong gradient shows in the loss within a step or
two (a missing q/k-norm gradient reduction over tp, or context parallel without the held
positions, moves it by 1e-4..1e-3 relative), while fp32 reordering differences stay below 1e-5."""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F
from omegaconf import OmegaConf

from conftest import DENSE, TRAIN, single_process_losses, spawn_gloo_ranks

REL = 2e-5
GPT2_TINY = ("model=gpt2_xl", "model.layers=2", "model.hidden=64", "model.heads=4", "model.kv_heads=4",
             "model.ffn=256", "model.vocab=511", "model.max_seq_len=256")


@pytest.fixture(scope="module")
def reference(reference_losses) -> list[float]:
    """The one process's run of DENSE, which tests/parallel/test_pp_ep.py's pipelines share."""
    return reference_losses(*TRAIN, *DENSE)


def tokens_per_step(results: dict) -> float:
    m = results["metrics"]
    return m["throughput_tokens_per_s"] * m["step_time_s"]


def assert_trains_like_one_process(cli, reference: list[float], num: int | None = None) -> None:
    assert cli.trained_losses(num) == pytest.approx(reference, rel=REL)
    # tp and cp ranks share their batch: a step is still batch_size * dp * fsdp * seq_len tokens.
    assert tokens_per_step(cli.results(num)) == pytest.approx(4 * 64)


@pytest.mark.parametrize("num, layout", [(0, "tp"), (1, "sp"), (2, "cp")], ids=["tp", "sp", "cp"])
def test_two_ranks_match_single_process(tp_sp_cp_sweep, reference, num, layout):
    """conftest's TP_SP_CP sweep, fully checkpointed and profiled (tests/predict counts tp's and sp's
    collectives): recomputing the forward changes no loss, and the profiler's window comes after the
    compared steps."""
    assert OmegaConf.load(tp_sp_cp_sweep.job_dir(num) / "resolved.yaml").parallel.name == layout
    assert_trains_like_one_process(tp_sp_cp_sweep, reference, num)


@pytest.mark.slow
def test_fsdp_tp_and_dp_tp_on_four_ranks_match_single_process(cli, reference):
    # 2 data-parallel ranks x tp 2: batch 2 per data rank, the same global batch of 4.
    cli.run("parallel=fsdp_tp,dp_tp", "hardware.gpus_per_node=4", *TRAIN, *DENSE, "workload.batch_size=2",
            multirun=True)
    for job in (0, 1):
        assert_trains_like_one_process(cli, reference, job)


@pytest.mark.slow
def test_cp_with_sequence_parallel_tp_on_four_ranks_matches_single_process(cli, reference):
    cli.run("parallel=cp", "parallel.tp=2", "parallel.sp=true", "hardware.gpus_per_node=4", *TRAIN, *DENSE)
    assert cli.losses() == pytest.approx(reference, rel=REL)


@pytest.mark.slow
@pytest.mark.parametrize("model", [["model=tiny_moe"], list(GPT2_TINY), ["model.qk_norm=true", "model.tie_embeddings=true"]],
                         ids=["moe", "gpt2", "qk_norm_tied"])
def test_sp_other_model_shapes_match_single_process(cli, tmp_path, model):
    """MoE (experts replicated over tp), GPT-2 (biases, LayerNorm, learned positions, tied head,
    a vocab that tp does not divide) and Qwen3-style per-head norms with a tied head."""
    expected = single_process_losses(tmp_path / "reference", *model)
    cli.run("parallel=sp", *TRAIN, *model)
    assert cli.losses() == pytest.approx(expected, rel=REL)


@pytest.fixture(scope="module")
def compose():
    """The CLI's config composition in-process (launching nothing), for validation cases."""
    from hydra import compose, initialize_config_dir

    import parbench.__main__  # noqa: F401  (registers the schema)
    from parbench.paths import CONF_DIR

    with initialize_config_dir(version_base="1.3", config_dir=str(CONF_DIR)):
        yield lambda *overrides: compose("config", overrides=["hardware=cpu", *overrides])


@pytest.mark.parametrize("overrides, message", [
    (["parallel=tp", "model.ffn=175"], "model.ffn=175 is not divisible by parallel.tp=2"),
    (["parallel=sp", "workload.seq_len=63"], "must be divisible by cp*tp=2"),
    (["parallel=cp", "workload.seq_len=66"], "must be divisible by 2*cp=4"),
    (["parallel=cp", "parallel.cp_rotate=alltoall"], "use parallel.cp_rotate=allgather"),
    (["parallel=cp", "parallel.cp_rotate=ring"], "use one of allgather, alltoall"),
], ids=["ffn", "sp_seq", "cp_seq", "cp_rotate_cpu", "cp_rotate_unknown"])
def test_layouts_that_cannot_work_are_rejected_before_launch(compose, overrides, message):
    from parbench.config import ConfigError, resolve
    from parbench.prepare import validate
    from parbench.workloads.registry import typed_config

    with pytest.raises(ConfigError, match=re.escape(message)):
        validate(resolve.resolve(typed_config(compose(*overrides)), gpus=[]), None)


def _cp_attention_rank(rank: int, world: int) -> None:
    from torch.distributed.device_mesh import init_device_mesh

    from parbench.parallel.cp import AllGatherKVAttention, check_torch_layout, held_positions

    mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("cp",))
    check_torch_layout(mesh)  # torch's context_parallel holds the same chunks as parbench
    gen = torch.Generator().manual_seed(0)
    seq = 8 * world
    q, k, v = (torch.randn(2, h, seq, 16, generator=gen, requires_grad=True) for h in (4, 2, 2))
    full = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    full.square().sum().backward()
    held = held_positions(seq, world, rank, torch.device("cpu"))
    local = [t.detach()[:, :, held].requires_grad_() for t in (q, k, v)]
    out = AllGatherKVAttention(mesh)(*local)
    out.square().sum().backward()
    torch.testing.assert_close(out, full[:, :, held])
    torch.testing.assert_close(local[0].grad, q.grad[:, :, held])
    # Each rank's K/V gradient sums what every rank's queries sent it (reduce-scatter).
    for mine, ref in zip(local[1:], (k, v)):
        torch.testing.assert_close(mine.grad, ref.grad[:, :, held])


def test_cp_attention_matches_causal_sdpa_forward_and_backward():
    spawn_gloo_ranks(_cp_attention_rank)
