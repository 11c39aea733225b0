"""The MoE: in bf16 its experts run as one grouped GEMM per weight matrix (F.grouped_mm: on a CPU its loop, on an sm90
GPU CUTLASS's), which must give what one GEMM per expert gives, forward and backward, with experts that receive no
tokens; its routing (a counting sort) and combine (a scatter and a gated sum) as token-by-token routing gives them;
on the GPU, without a host sync."""

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


def moe_of(**fields) -> "MoE":
    from dataclasses import replace

    from parbench.config.schema import ModelConfig, load_presets
    from parbench.models.moe import MoE

    torch.manual_seed(0)
    moe = MoE(replace(load_presets("model", ModelConfig, skip="hf")["tiny_moe"], **fields))
    moe.init_weights(0.1)
    return moe


def token_by_token(moe, x: torch.Tensor) -> torch.Tensor:
    """Each token through its top_k experts one at a time, weighted by its renormalised gates; a (token, choice) pair
    beyond its expert's capacity (counted in token order) left out."""
    tokens = x.reshape(-1, x.shape[-1])
    gates, ids = torch.softmax(moe.router(tokens), dim=-1).topk(moe.top_k, dim=-1)
    gates = gates / gates.sum(-1, keepdim=True)
    capacity = int(moe.capacity_factor * len(tokens) * moe.top_k / moe.num_experts) if moe.capacity_factor > 0 else None
    seen = [0] * moe.num_experts
    out = torch.zeros_like(tokens)
    for t, j in ((t, j) for t in range(len(tokens)) for j in range(moe.top_k)):
        e = int(ids[t, j])
        seen[e] += 1
        if capacity is None or seen[e] <= capacity:
            w = moe.experts
            out[t] += gates[t, j] * swiglu(tokens[t:t + 1], w.w1[e], w.w3[e], w.w2[e])[0]
    return out.view(x.shape)


@pytest.mark.parametrize("fields", [{}, {"capacity_factor": 0.6}, {"top_k": 4}])
def test_moe_forward_routes_each_token_as_token_by_token_routing_does(fields):
    """Dropless, capacity-limited (some pairs dropped) and every expert chosen (top_k == experts), in fp32."""
    moe = moe_of(**fields)
    x = torch.randn(3, 7, moe.router.in_features)
    with torch.no_grad():
        torch.testing.assert_close(moe(x), token_by_token(moe, x))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="host syncs are a CUDA matter")
@pytest.mark.parametrize("training", [True, False])
def test_dropless_moe_never_waits_for_the_device(training):
    """bf16 on the GPU (sm90+): a training forward and backward, and an inference forward, with any synchronising
    call an error; the outputs as token-by-token routing gives them."""
    moe = moe_of().cuda().to(torch.bfloat16).train(training)
    x = torch.randn(4, 16, moe.router.in_features, device="cuda", dtype=torch.bfloat16, requires_grad=training)
    torch.cuda.set_sync_debug_mode("error")  # any synchronising call raises
    try:
        out = moe(x)
        if training:
            out.float().square().sum().backward()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    with torch.no_grad():
        torch.testing.assert_close(out, token_by_token(moe, x), rtol=2e-2, atol=2e-2)
    assert not training or x.grad is not None and torch.isfinite(x.grad).all()


def test_grouping_by_expert_is_a_stable_sort_by_expert():
    from parbench.models.moe import group_by_expert

    torch.manual_seed(0)
    ids = torch.randint(0, 5, (97,))
    ids[ids == 3] = 4  # an expert with no pairs
    counts, order = group_by_expert(ids, 5)
    assert counts.tolist() == torch.bincount(ids, minlength=5).tolist()
    assert order.tolist() == ids.argsort(stable=True).tolist()
