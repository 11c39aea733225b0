"""parbench's Llama for vLLM: as a Hugging Face checkpoint with the seeded weights (vLLM then loads
the native engine's weights), or as its config.json alone (vLLM's dummy weights: nothing written)."""

from __future__ import annotations

from pathlib import Path

import torch

from parbench.config.schema import ModelConfig, head_width
from parbench.models.build import build_initialized
from parbench.models.shapes import FP32, param_counts

# parbench Llama parameter names -> Hugging Face LlamaForCausalLM names.
HF_NAMES = {"tok_embeddings": "model.embed_tokens", "norm": "model.norm", "output": "lm_head",
            "attention.wq": "self_attn.q_proj", "attention.wk": "self_attn.k_proj",
            "attention.wv": "self_attn.v_proj", "attention.wo": "self_attn.o_proj",
            "attention.q_norm": "self_attn.q_norm", "attention.k_norm": "self_attn.k_norm",
            "feed_forward.w1": "mlp.gate_proj", "feed_forward.w3": "mlp.up_proj",
            "feed_forward.w2": "mlp.down_proj", "attention_norm": "input_layernorm",
            "ffn_norm": "post_attention_layernorm"}


def hf_name(name: str) -> str:
    """`layers.3.attention.wq.weight` -> `model.layers.3.self_attn.q_proj.weight`."""
    module, _, leaf = name.rpartition(".")
    if module.startswith("layers."):
        _, index, rest = module.split(".", 2)
        return f"model.layers.{index}.{HF_NAMES[rest]}.{leaf}"
    return f"{HF_NAMES[module]}.{leaf}"


def hf_llama_config(m: ModelConfig):
    from transformers import LlamaConfig

    return LlamaConfig(vocab_size=m.vocab, hidden_size=m.hidden, intermediate_size=m.ffn,
                       num_hidden_layers=m.layers, num_attention_heads=m.heads, num_key_value_heads=m.kv_heads,
                       head_dim=head_width(m), max_position_embeddings=m.max_seq_len,
                       rms_norm_eps=m.norm_eps, rope_theta=m.rope_theta, tie_word_embeddings=m.tie_embeddings,
                       architectures=["LlamaForCausalLM"])


def export_hf_config(m: ModelConfig, dtype: torch.dtype, path: Path) -> Path:
    """config.json only: what vLLM needs with load_format=dummy (random weights made on the device)."""
    config = hf_llama_config(m)
    config.torch_dtype = dtype
    config.save_pretrained(path)
    return path


def draw_device(m: ModelConfig, device: str) -> str:
    """Where the seeded weights are drawn: the native engine's device (CUDA's generator gives other
    numbers than the CPU's for the same seed), unless the whole model in fp32 does not fit there."""
    if device == "cpu" or FP32 * param_counts(m).total < 0.9 * torch.cuda.mem_get_info()[0]:
        return device
    print(f"[parbench] model={m.name} does not fit this GPU in fp32 to draw its seeded weights: drawn on "
          "the CPU, so vLLM's tokens will not match the native engine's (the timings are unaffected)", flush=True)
    return "cpu"


def export_hf_llama(m: ModelConfig, seed: int, dtype: torch.dtype, path: Path, device: str) -> Path:
    """Save parbench's seeded Llama (the native engine's weights) as a Hugging Face checkpoint."""
    from transformers import LlamaForCausalLM

    drawn_on = draw_device(m, device)
    state = {hf_name(k): v.cpu() for k, v in build_initialized(m, seed, drawn_on).state_dict().items()}
    if drawn_on != "cpu":
        torch.cuda.empty_cache()  # vLLM sizes its KV cache from the device's free memory
    with torch.device("meta"):
        hf = LlamaForCausalLM(hf_llama_config(m))
    hf.load_state_dict(state, strict=not m.tie_embeddings, assign=True)
    hf.to(dtype).save_pretrained(path)
    return path
