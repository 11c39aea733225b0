"""The MoE's experts: in bf16 one grouped GEMM per weight matrix (F.grouped_mm), which must give what one GEMM per
expert gives, forward and backward, with experts that receive no tokens."""

import pytest
import torch

from parbench.models.moe import GroupedExperts, swiglu

EXPERTS, HIDDEN, FFN = 4, 32, 48
COUNTS = [5, 0, 9, 2]  # expert 1 receives no tokens


def experts_and_tokens(dtype: torch.dtype) -> tuple[GroupedExperts, torch.Tensor]:
    torch.manual_seed(0)
    experts = GroupedExperts(EXPERTS, HIDDEN, FFN)
    for w in experts.parameters():
        torch.nn.init.normal_(w, std=0.1)
    return experts.to(dtype), torch.randn(sum(COUNTS), HIDDEN, dtype=dtype, requires_grad=True)


def one_gemm_per_expert(experts: GroupedExperts, x: torch.Tensor) -> torch.Tensor:
    chunks = torch.split(x, COUNTS)
    w1, w2, w3 = (w.to(torch.bfloat16) for w in (experts.w1, experts.w2, experts.w3))
    return torch.cat([swiglu(c.to(torch.bfloat16), w1[e], w3[e], w2[e]) for e, c in enumerate(chunks)])


def test_grouped_gemm_matches_one_gemm_per_expert_in_bf16():
    experts, x = experts_and_tokens(torch.bfloat16)
    grouped = experts(x, torch.tensor(COUNTS))
    torch.testing.assert_close(grouped, one_gemm_per_expert(experts, x))


def test_grouped_gemm_under_autocast_gives_the_per_expert_gradients():
    """fp32 weights under bf16 autocast (a training step's), the gradients reaching the stacked fp32 weights."""
    grads = []
    for run in (lambda e, x: e(x, torch.tensor(COUNTS)), one_gemm_per_expert):
        experts, x = experts_and_tokens(torch.float32)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = run(experts, x)
        assert out.dtype == torch.bfloat16
        out.float().square().sum().backward()
        grads.append([x.grad, *(w.grad for w in experts.parameters())])
    for grouped, reference in zip(*grads):
        assert grouped.dtype == torch.float32
        torch.testing.assert_close(grouped, reference, rtol=2e-2, atol=1e-2)
    assert grads[0][1][1].abs().sum() == 0  # the expert with no tokens gets no gradient


@pytest.mark.skipif(not torch.cuda.is_available(), reason="host syncs are a CUDA matter")
def test_dropless_moe_forward_never_waits_for_the_device():
    from parbench.config.schema import ModelConfig, load_presets
    from parbench.models.moe import MoE

    moe = MoE(load_presets("model", ModelConfig, skip="hf")["tiny_moe"]).cuda().to(torch.bfloat16)
    moe.init_weights(0.02)
    x = torch.randn(4, 16, moe.router.in_features, device="cuda", dtype=torch.bfloat16)
    torch.cuda.set_sync_debug_mode("error")  # any synchronising call raises
    try:
        out = moe(x)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert out.shape == x.shape and torch.isfinite(out).all()


def test_grouping_by_expert_is_a_stable_sort_by_expert():
    from parbench.models.moe import group_by_expert

    torch.manual_seed(0)
    ids = torch.randint(0, 5, (97,))
    ids[ids == 3] = 4  # an expert with no pairs
    counts, order = group_by_expert(ids, 5)
    assert counts.tolist() == torch.bincount(ids, minlength=5).tolist()
    assert order.tolist() == ids.argsort(stable=True).tolist()
