"""FLOPs per token: hand computations for a GQA and an MoE model, and torch's FLOP counter."""

from __future__ import annotations

import pytest
import torch

from conftest import HF_FAMILIES, compose, hf_model

from parbench.metrics import flops
from parbench.models.build import build_model, count_params


@pytest.fixture
def per_token(model_config):
    def flops_per_token(name: str, seq_len: int, causal: bool) -> float:
        cfg = model_config(name)
        return flops.train_flops_per_token(cfg, count_params(build_model(cfg, "meta"), cfg), seq_len, causal)

    return flops_per_token


def test_llama3_8b_gqa_by_hand(per_token):
    # hidden 4096, 32 heads of 128, 8 kv heads (GQA: wk, wv are 4096 x 1024), ffn 14336, 32 layers.
    attention = 2 * 4096 * 4096 + 2 * 4096 * 1024  # wq, wo + wk, wv
    mlp = 3 * 4096 * 14336  # w1, w2, w3
    norms = 2 * 4096
    head = 128256 * 4096  # untied output head; the input embedding is left out
    n = 32 * (attention + mlp + norms) + 4096 + head
    assert n + 128256 * 4096 == 8_030_261_248  # Meta's published 8.03B parameters
    seq = 8192
    assert per_token("llama3_8b", seq, causal=False) == 6 * n + 12 * 32 * 4096 * seq
    assert per_token("llama3_8b", seq, causal=True) == 6 * n + 6 * 32 * 4096 * seq


def test_mixtral_moe_counts_top_k_experts_by_hand(per_token):
    # Mixtral 8x7B: Llama 3 8B attention shape, 8 SwiGLU experts of 14336, top-2, router 4096 x 8.
    attention = 2 * 4096 * 4096 + 2 * 4096 * 1024
    expert = 3 * 4096 * 14336
    router = 4096 * 8
    norms = 2 * 4096
    head = 32000 * 4096
    active = 32 * (attention + 2 * expert + router + norms) + 4096 + head
    total = 32 * (attention + 8 * expert + router + norms) + 4096 + head + 32000 * 4096
    assert round(total / 1e9, 1) == 46.7 and round((active + 32000 * 4096) / 1e9, 1) == 12.9  # published
    seq = 4096
    assert per_token("mixtral_8x7b", seq, causal=True) == 6 * active + 6 * 32 * 4096 * seq
    assert per_token("mixtral_8x7b", seq, causal=False) == 6 * active + 12 * 32 * 4096 * seq


@pytest.mark.parametrize("model", [("model=tiny",), ("model=tiny_moe",), *map(hf_model, HF_FAMILIES)],
                         ids=["tiny", "tiny_moe", *(f"hf_{f}" for f in HF_FAMILIES)])
def test_flop_counter_matches_formula_minus_elementwise_params(model):
    """FlopCounterMode counts the matmuls actually run (MoE: only the tokens routed to each
    expert). It misses exactly 6 x the norm weights and biases (which 6N includes), and counts
    attention without the causal saving. The sequence is no longer than the Mistral fixture's
    sliding window, which the counter (a masked full score matrix) would not see."""
    cfg = compose(*model, "hardware=cpu").model
    torch.manual_seed(0)
    model = build_model(cfg, "cpu")
    seq = 16
    counted = flops.counted_train_flops_per_token(model, cfg.vocab, batch=2, seq_len=seq)
    counts = count_params(build_model(cfg, "meta"), cfg)
    nocausal = flops.train_flops_per_token(cfg, counts, seq, causal=False)
    causal = flops.train_flops_per_token(cfg, counts, seq, causal=True)
    assert counted == nocausal - 6 * flops.elementwise_params(model)
    assert nocausal - causal == 6 * cfg.layers * cfg.heads * (cfg.head_dim or cfg.hidden // cfg.heads) * seq
    assert 6 * flops.elementwise_params(model) / nocausal < 0.02  # the known gap is small
