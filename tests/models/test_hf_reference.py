"""Each family model=hf builds computes what Hugging Face transformers computes for the same
config.json and the same weights: the tiny configs exercise Llama 3.1's RoPE scaling past its
original context, Mistral's sliding window past its width, Qwen2's q/k/v biases, Qwen3's q/k
norms and head_dim, Mixtral's router and experts, and GPT-2's fused, transposed (Conv1D) layers."""

from __future__ import annotations

import pytest
import torch
import transformers
from conftest import HF_FAMILIES, HF_TINY, compose, hf_model

from parbench.models.build import build_initialized
from parbench.workloads.inference.vllm_engine.hf_export import hf_name

State = dict[str, torch.Tensor]


def llama_state(ours: State, hf_keys: set[str], layers: int) -> State:
    """Llama-style names (hf_export's), the router as mlp.gate, the stacked experts as transformers
    5 fuses them (mlp.experts.gate_up_proj [E, 2F, H], down_proj [E, H, F]) or per expert (4.x)."""
    state = {hf_name(k.replace("feed_forward.router", "feed_forward.w1")).replace("mlp.gate_proj", "mlp.gate")
             if ".router." in k else hf_name(k): v for k, v in ours.items() if ".experts." not in k}
    for i in range(layers):
        if f"layers.{i}.feed_forward.experts.w1" not in ours:
            continue
        w1, w2, w3 = (ours[f"layers.{i}.feed_forward.experts.{w}"] for w in ("w1", "w2", "w3"))
        prefix = f"model.layers.{i}.mlp.experts"
        if f"{prefix}.gate_up_proj" in hf_keys:
            state.update({f"{prefix}.gate_up_proj": torch.cat([w1, w3], dim=2).transpose(1, 2),
                          f"{prefix}.down_proj": w2.transpose(1, 2)})
            continue
        for e in range(w1.shape[0]):  # transformers 4.x: block_sparse_moe.experts.<e>.w1/w2/w3
            state.update({f"model.layers.{i}.block_sparse_moe.experts.{e}.{w}.weight": t[e].T
                          for w, t in (("w1", w1), ("w2", w2), ("w3", w3))})
        state[f"model.layers.{i}.block_sparse_moe.gate.weight"] = state.pop(f"model.layers.{i}.mlp.gate.weight")
    return state


def gpt2_state(ours: State, hf_keys: set[str], layers: int) -> State:
    """GPT-2's names; its Conv1D layers hold weights transposed, q/k/v as one c_attn."""
    state = {"transformer.wte.weight": ours["tok_embeddings.weight"], "transformer.wpe.weight": ours["pos_embeddings.weight"],
             "transformer.ln_f.weight": ours["norm.weight"], "transformer.ln_f.bias": ours["norm.bias"],
             "lm_head.weight": ours["output.weight"]}
    for i in range(layers):
        ours_, hf = f"layers.{i}.", f"transformer.h.{i}."
        for leaf in ("weight", "bias"):
            state[f"{hf}ln_1.{leaf}"], state[f"{hf}ln_2.{leaf}"] = (ours[f"{ours_}{n}.{leaf}"] for n in ("attention_norm", "ffn_norm"))
            qkv = torch.cat([ours[f"{ours_}attention.w{x}.{leaf}"] for x in "qkv"])
            state[f"{hf}attn.c_attn.{leaf}"] = qkv.T if leaf == "weight" else qkv
            for theirs, mine in (("attn.c_proj", "attention.wo"), ("mlp.c_fc", "feed_forward.w1"), ("mlp.c_proj", "feed_forward.w2")):
                t = ours[f"{ours_}{mine}.{leaf}"]
                state[f"{hf}{theirs}.{leaf}"] = t.T if leaf == "weight" else t
    return state


@pytest.mark.parametrize("family", HF_FAMILIES)
def test_logits_equal_transformers_for_the_same_config_and_weights(family):
    m = compose(*hf_model(family), "hardware=cpu").model
    ours = build_initialized(m, 0, "cpu").eval()
    with torch.no_grad():  # parbench zeroes biases at init: random ones, so that a misplaced one shows
        for name, p in ours.named_parameters():
            if name.endswith("bias"):
                p.normal_(0, 0.02)
    config = transformers.AutoConfig.from_pretrained(HF_TINY / family)
    config._attn_implementation = "eager"
    reference = transformers.AutoModelForCausalLM.from_config(config).eval()
    hf_keys = set(reference.state_dict())
    state = (gpt2_state if m.family == "gpt2" else llama_state)(ours.state_dict(), hf_keys, m.layers)
    missing, unexpected = reference.load_state_dict(state, strict=False)
    assert not unexpected and all(".attn.bias" in k or "masked_bias" in k for k in missing)  # GPT-2's mask buffers
    tokens = torch.randint(0, m.vocab, (2, 40), generator=torch.Generator().manual_seed(1))  # past window and context
    with torch.no_grad():
        torch.testing.assert_close(ours(tokens), reference(tokens).logits, rtol=1e-5, atol=1e-5)
