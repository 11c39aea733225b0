"""model=hf: a model's architecture from its Hugging Face config.json (in a folder, or under a model
name in the local Hugging Face cache: never downloaded), as the ModelConfig fields parbench builds
from. Only what the model code builds is accepted: another architecture, an attention variant or a
quantisation config is refused before launch, naming the field, its value and what is supported.
No torch here: the orchestrator and `parbench plan` read it before anything is launched."""

from __future__ import annotations

import copy
import functools
import hashlib
import json
from pathlib import Path
from typing import Any, Callable, NoReturn

from omegaconf import DictConfig, OmegaConf, open_dict

from parbench.config import ConfigError
from parbench.config.schema import ModelConfig

# Fields the user may set beside model.path (a preset or an override wins over config.json):
# they are not the architecture, or (max_seq_len) they only bound the sequences run.
USER_FIELDS = ("name", "max_seq_len", "aux_loss_coef", "capacity_factor")
ROPE_TYPES = {"linear": ("factor",),
              "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")}
LLAMA_ACTIVATIONS = ("silu",)
GPT2_ACTIVATIONS = ("gelu_new", "gelu_pytorch_tanh")  # tanh-approximated GELU, as models/gpt2.py runs
RESOLVER = "hf"  # conf/model/hf.yaml: `layers: ${hf:layers}`
PATH_HINT = "model.path=<folder with config.json, or a Hugging Face model name in the local cache>"


class HfConfig:
    """config.json's fields, read with the checks that name the file and the field."""

    def __init__(self, fields: dict[str, Any], source: str):
        self.fields, self.source = fields, source

    def get(self, key: str, default: Any = None) -> Any:
        value = self.fields.get(key)
        return default if value is None else value

    def need(self, key: str) -> Any:
        if self.fields.get(key) is None:
            raise ConfigError(f"{self.source} has no {key}, which parbench needs to build the model")
        return self.fields[key]

    def refuse(self, key: str, supported: str) -> NoReturn:
        raise ConfigError(f"{self.source}: {key}={json.dumps(self.fields.get(key))} is not supported "
                          f"({supported}); parbench builds nothing else in its place")

    def require(self, key: str, allowed: Callable[[Any], bool], supported: str) -> None:
        if not allowed(self.fields.get(key)):
            self.refuse(key, supported)


def rope(c: HfConfig) -> dict[str, Any]:
    """rope_theta and rope_scaling, from the fields of transformers 4 or the rope_parameters of 5."""
    params = c.get("rope_parameters", {})
    if any(isinstance(v, dict) for v in params.values()):
        c.refuse("rope_parameters", "one RoPE for every layer")
    scaling = dict(c.get("rope_scaling") or {k: v for k, v in params.items() if k != "rope_theta"})
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    key = "rope_scaling" if c.get("rope_scaling") else "rope_parameters"
    if kind != "default" and kind not in ROPE_TYPES:
        c.refuse(key, f"rope_type default, {', '.join(ROPE_TYPES)}")
    if kind != "default" and any(scaling.get(k) is None for k in ROPE_TYPES[kind]):
        c.refuse(key, f"rope_type {kind} with {', '.join(ROPE_TYPES[kind])}")
    return {"rope_theta": float(c.get("rope_theta", params.get("rope_theta", 10000.0))),
            "rope_scaling": {} if kind == "default" else {"rope_type": kind, **{k: scaling[k] for k in ROPE_TYPES[kind]}}}


def check_layer_types(c: HfConfig, sliding: bool) -> None:
    """transformers 5 lists each layer's attention: all alike, and sliding only where the family has it."""
    allowed = {"full_attention", "sliding_attention"} if sliding else {"full_attention"}
    types = set(c.get("layer_types", []))
    if not types <= allowed or len(types) > 1:
        c.refuse("layer_types", f"every layer {' or every layer '.join(sorted(allowed))}")


def llama_like(c: HfConfig, sliding: bool = False) -> dict[str, Any]:
    """Llama 2/3 and what shares its decoder: RMSNorm, RoPE, GQA, SwiGLU."""
    c.require("hidden_act", lambda v: v in (None, *LLAMA_ACTIVATIONS), "hidden_act silu (SwiGLU)")
    c.require("attention_bias", lambda v: not v, "attention_bias false")
    c.require("mlp_bias", lambda v: not v, "mlp_bias false")
    check_layer_types(c, sliding)
    heads = c.need("num_attention_heads")
    return {"family": "llama", "layers": c.need("num_hidden_layers"), "hidden": c.need("hidden_size"),
            "heads": heads, "kv_heads": c.get("num_key_value_heads", heads), "head_dim": c.get("head_dim"),
            "ffn": c.need("intermediate_size"), "vocab": c.need("vocab_size"),
            "max_seq_len": c.need("max_position_embeddings"), "norm_eps": float(c.get("rms_norm_eps", 1e-6)),
            "tie_embeddings": bool(c.get("tie_word_embeddings", False)), **rope(c),
            "sliding_window": c.get("sliding_window") if sliding else None}


def no_qwen_sliding(c: HfConfig) -> None:
    c.require("use_sliding_window", lambda v: not v, "use_sliding_window false: Qwen's sliding window "
              "covers only some layers (max_window_layers), which parbench does not build")


def qwen2(c: HfConfig) -> dict[str, Any]:
    no_qwen_sliding(c)
    c.require("use_mrope", lambda v: not v, "use_mrope false: multimodal RoPE is not built")
    return {**llama_like(c), "qkv_bias": True}


def qwen3(c: HfConfig) -> dict[str, Any]:
    no_qwen_sliding(c)
    return {**llama_like(c), "qk_norm": True}


def mixtral(c: HfConfig) -> dict[str, Any]:
    c.require("router_jitter_noise", lambda v: not v, "router_jitter_noise 0: routing without noise")
    return {**llama_like(c, sliding=True), "experts": c.need("num_local_experts"),
            "top_k": c.need("num_experts_per_tok"), "aux_loss_coef": float(c.get("router_aux_loss_coef", 0.001))}


def qwen3_moe(c: HfConfig) -> dict[str, Any]:
    c.require("norm_topk_prob", lambda v: v, "norm_topk_prob true: the top-k weights renormalised")
    c.require("decoder_sparse_step", lambda v: v in (None, 1), "decoder_sparse_step 1: experts in every layer")
    c.require("mlp_only_layers", lambda v: not v, "mlp_only_layers []: experts in every layer")
    return {**qwen3(c), "experts": c.need("num_experts"), "top_k": c.need("num_experts_per_tok"),
            "ffn": c.need("moe_intermediate_size"), "aux_loss_coef": float(c.get("router_aux_loss_coef", 0.001))}


def gpt2(c: HfConfig) -> dict[str, Any]:
    """GPT-2: learned positions, LayerNorm, GELU MLP (dropout is not run: parbench trains without it)."""
    c.require("activation_function", lambda v: v in (None, *GPT2_ACTIVATIONS), f"activation_function "
              f"{' or '.join(GPT2_ACTIVATIONS)}")
    for key in ("scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn", "add_cross_attention"):
        c.require(key, lambda v: not v, f"{key} false")
    c.require("scale_attn_weights", lambda v: v in (None, True), "scale_attn_weights true")
    hidden, heads = c.need("n_embd"), c.need("n_head")
    return {"family": "gpt2", "layers": c.need("n_layer"), "hidden": hidden, "heads": heads, "kv_heads": heads,
            "head_dim": None, "ffn": c.get("n_inner", 4 * hidden), "vocab": c.need("vocab_size"),
            "max_seq_len": c.need("n_positions"), "norm_eps": float(c.get("layer_norm_epsilon", 1e-5)),
            "tie_embeddings": bool(c.get("tie_word_embeddings", True))}


# model_type -> (the architectures entry, what reads its fields)
FAMILIES: dict[str, tuple[str, Callable[[HfConfig], dict[str, Any]]]] = {
    "llama": ("LlamaForCausalLM", llama_like),
    "mistral": ("MistralForCausalLM", lambda c: llama_like(c, sliding=True)),
    "qwen2": ("Qwen2ForCausalLM", qwen2),
    "qwen3": ("Qwen3ForCausalLM", qwen3),
    "mixtral": ("MixtralForCausalLM", mixtral),
    "qwen3_moe": ("Qwen3MoeForCausalLM", qwen3_moe),
    "gpt2": ("GPT2LMHeadModel", gpt2),
}


def model_fields(c: HfConfig) -> dict[str, Any]:
    """The ModelConfig fields of config.json's architecture; ConfigError for anything not built as given."""
    supported = ", ".join(f"{arch} ({kind})" for kind, (arch, _) in FAMILIES.items())
    if c.fields.get("quantization_config") is not None:
        c.refuse("quantization_config", "parbench builds unquantised weights in workload.dtype")
    kind = c.get("model_type")
    if kind not in FAMILIES:
        c.refuse("model_type", f"supported: {supported}")
    architectures = c.get("architectures", [FAMILIES[kind][0]])
    if list(architectures) != [FAMILIES[kind][0]]:
        c.refuse("architectures", f"model_type {kind} is built as {FAMILIES[kind][0]}; supported: {supported}")
    dense = {"qkv_bias": False, "qk_norm": False, "experts": 0, "top_k": 0, "sliding_window": None,
             "rope_scaling": {}, "rope_theta": ModelConfig.rope_theta, "aux_loss_coef": ModelConfig.aux_loss_coef}
    return {**dense, **FAMILIES[kind][1](c)}


def find_config_json(path: str) -> Path:
    """A config.json file, a folder holding one, or `org/name[@revision]` in the local Hugging Face cache."""
    local = Path(path).expanduser()
    if local.is_file():
        return local.resolve()
    if local.is_dir():
        if not (local / "config.json").is_file():
            raise ConfigError(f"model.path={path} is a folder without config.json: point it at the model's folder")
        return (local / "config.json").resolve()
    return cached_config_json(path)


def cached_config_json(name: str) -> Path:
    """config.json of a model in the Hugging Face cache (HF_HUB_CACHE / HF_HOME), read offline."""
    from huggingface_hub import constants, try_to_load_from_cache

    repo, _, revision = name.partition("@")
    try:
        found = try_to_load_from_cache(repo, "config.json", revision=revision or None)
    except ValueError:  # not a valid model name (HFValidationError)
        found = None
    if isinstance(found, str):
        return Path(found)
    raise ConfigError(f"model.path={name} is neither a folder with config.json nor a model in the local Hugging "
                      f"Face cache ({constants.HF_HUB_CACHE}); parbench never downloads: fetch it once with "
                      f"`hf download {repo} config.json`, or give the folder")


def model_name(path: str) -> str:
    """The run's model name: the folder's (or a file's own) name, or the cached model's without its org."""
    local = Path(path).expanduser()
    if local.is_file():
        return local.stem if local.name != "config.json" else local.resolve().parent.name
    return Path(path.partition("@")[0].rstrip("/")).name


def read_model(path: str) -> dict[str, Any]:
    """The ModelConfig fields of model.path, with the config.json read and its SHA-256."""
    file = find_config_json(path)
    raw = file.read_bytes()
    try:
        fields = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ConfigError(f"model.path={path}: {file} is not JSON ({e})") from None
    built = model_fields(HfConfig(fields, str(file)))
    return {"name": model_name(path), **built, "config_json": str(file), "config_sha256": hashlib.sha256(raw).hexdigest()}


@functools.lru_cache(maxsize=64)
def read_field(path: str, key: str) -> Any:
    """One field of read_model, the file read once per path (the resolver asks field by field)."""
    return read_model(path)[key]


def from_config_json(key: str, _parent_: DictConfig) -> Any:
    """The `${hf:<field>}` resolver of conf/model/hf.yaml (for `--cfg job --resolve`; runs read
    the file once, through expand_model)."""
    if _parent_.get("path") is None:
        raise ConfigError(f"model=hf needs {PATH_HINT}")
    return read_field(str(_parent_.path), key)


OmegaConf.register_new_resolver(RESOLVER, from_config_json, replace=True)


def from_hf(model: DictConfig, key: str) -> bool:
    """`${hf:<field>}`, as conf/model/hf.yaml leaves the fields config.json gives."""
    node = model._get_node(key)
    return node._is_interpolation() and str(node._value()).startswith(f"${{{RESOLVER}:")


def unset(model: DictConfig, key: str) -> bool:
    """Left for config.json to give: `${hf:<field>}`, unset (null, {}) or missing."""
    if key not in model or OmegaConf.is_missing(model, key):
        return True
    return model._get_node(key)._value() in (None, {}) or from_hf(model, key)


def expand_model(node: DictConfig) -> DictConfig:
    """The config tree with model.* read from model.path's config.json (unchanged without a path, or
    once read: a set config_sha256). A field set beside the path must agree with config.json,
    except USER_FIELDS, where the set value wins."""
    model = node.get("model") if isinstance(node, DictConfig) else None
    if not isinstance(model, DictConfig) or model.get("config_sha256"):
        return node
    if model.get("path") is None:
        if any(from_hf(model, key) for key in model):
            raise ConfigError(f"model=hf needs {PATH_HINT}")
        return node
    fields = read_model(str(model.path))
    node = copy.deepcopy(node)
    with open_dict(node):
        for key, value in fields.items():
            if unset(node.model, key):
                node.model[key] = value
            elif key not in USER_FIELDS and node.model[key] != value:
                raise ConfigError(f"model.{key}={node.model[key]} is set and {fields['config_json']} gives {value}: "
                                  "under model.path the architecture comes from config.json; drop model."
                                  f"{key} (and start from model=hf)")
    return node


def source_tags(m: ModelConfig) -> dict[str, str]:
    """The run's tags (and the plan's entries) naming the config.json a model=hf run was built from."""
    return {"model.config_json": m.config_json, "model.config_sha256": m.config_sha256 or ""} if m.config_json else {}
