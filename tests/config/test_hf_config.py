"""model=hf: config.json read into the model config, refusals that name the field, value and what is
supported (before anything launches), user fields beside the path, and the offline cache lookup."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from conftest import HF_TINY, compose, hf_model

from parbench.config import ConfigError


def write_config(where: Path, base: str, **changes) -> Path:
    """tests/models/hf_tiny/<base>/config.json with `changes` (None deletes a field), in its own folder."""
    fields = json.loads((HF_TINY / base / "config.json").read_text())
    fields.update(changes)
    folder = where / base
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({k: v for k, v in fields.items() if v is not None}))
    return folder


def test_config_json_becomes_the_model_config_with_its_path_and_hash():
    m = compose(*hf_model("qwen3"), "hardware=cpu").model
    file = HF_TINY / "qwen3" / "config.json"
    assert (m.name, m.family, m.layers, m.hidden, m.heads, m.kv_heads, m.head_dim, m.ffn, m.vocab) == (
        "qwen3", "llama", 2, 64, 4, 2, 32, 176, 512)
    assert m.qk_norm and not m.qkv_bias and m.norm_eps == 1e-6 and m.rope_theta == 1e6 and not m.tie_embeddings
    assert m.config_json == str(file) and m.config_sha256 == hashlib.sha256(file.read_bytes()).hexdigest()


def test_family_fields():
    llama, mistral, qwen2, mixtral, gpt2 = (compose(*hf_model(f), "hardware=cpu").model
                                            for f in ("llama", "mistral", "qwen2", "mixtral", "gpt2"))
    assert llama.rope_scaling == {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                  "high_freq_factor": 4.0, "original_max_position_embeddings": 32}
    assert mistral.sliding_window == 16 and llama.sliding_window is None
    assert qwen2.qkv_bias and qwen2.sliding_window is None  # use_sliding_window false
    assert (mixtral.experts, mixtral.top_k, mixtral.ffn, mixtral.aux_loss_coef) == (4, 2, 96, 0.02)
    assert (gpt2.family, gpt2.ffn, gpt2.max_seq_len, gpt2.tie_embeddings) == ("gpt2", 256, 256, False)


def test_user_fields_beside_the_path_win_and_architecture_fields_must_agree():
    m = compose(*hf_model("mixtral"), "model.name=mine", "model.max_seq_len=128", "model.aux_loss_coef=0",
                "hardware=cpu").model
    assert (m.name, m.max_seq_len, m.aux_loss_coef, m.experts) == ("mine", 128, 0.0, 4)
    with pytest.raises(ConfigError, match=r"model.layers=4 is set and .*qwen2/config.json gives 2: .*drop model.layers"):
        compose(*hf_model("qwen2"), "model.layers=4", "hardware=cpu")
    with pytest.raises(ConfigError, match=r"model.qk_norm=False is set .* gives True"):  # a preset's fields
        compose("model=tiny", f"model.path={HF_TINY / 'qwen3'}", "model.head_dim=32", "hardware=cpu")


@pytest.mark.parametrize("base, changes, message", [
    ("llama", {"model_type": "gemma2", "architectures": ["Gemma2ForCausalLM"]},
     r'model_type="gemma2" is not supported \(supported: LlamaForCausalLM \(llama\), MistralForCausalLM'),
    ("llama", {"architectures": ["LlamaForSequenceClassification"]},
     r'architectures=\["LlamaForSequenceClassification"\] is not supported \(model_type llama is built as LlamaForCausalLM'),
    ("llama", {"quantization_config": {"quant_method": "awq", "bits": 4}},
     r'quantization_config=\{"quant_method": "awq", "bits": 4\} is not supported'),
    ("llama", {"rope_scaling": {"rope_type": "yarn", "factor": 4.0}},
     r'rope_scaling=\{"rope_type": "yarn", "factor": 4.0\} is not supported \(rope_type default, linear, llama3\)'),
    ("llama", {"hidden_act": "gelu"}, r'hidden_act="gelu" is not supported \(hidden_act silu'),
    ("llama", {"attention_bias": True}, r"attention_bias=true is not supported"),
    ("qwen2", {"use_sliding_window": True}, r"use_sliding_window=true is not supported .*max_window_layers"),
    ("mistral", {"layer_types": ["sliding_attention", "full_attention"]}, r"layer_types=.* is not supported"),
    ("mixtral", {"router_jitter_noise": 0.1}, r"router_jitter_noise=0.1 is not supported"),
    ("gpt2", {"activation_function": "relu"}, r'activation_function="relu" is not supported'),
    ("gpt2", {"n_embd": None}, r"has no n_embd, which parbench needs"),
])
def test_unsupported_fields_are_refused_naming_field_value_and_what_is_supported(tmp_path, base, changes, message):
    folder = write_config(tmp_path, base, **changes)
    with pytest.raises(ConfigError, match=message) as refused:
        compose("model=hf", f"model.path={folder}", "hardware=cpu")
    assert str(folder / "config.json") in str(refused.value)


def test_refused_before_launch_by_the_cli(cli, tmp_path):
    folder = write_config(tmp_path, "llama", model_type="deepseek_v3", architectures=["DeepseekV3ForCausalLM"])
    proc = cli.run("model=hf", f"model.path={folder}", check=False, timeout=120)
    assert proc.returncode != 0 and 'model_type="deepseek_v3" is not supported' in proc.stderr + proc.stdout
    assert not (cli.job_dir() / "worker.log").exists() and not cli.runs().shape[0]  # nothing launched or logged


def test_a_microbenchmark_takes_the_models_shapes_by_interpolation():
    cfg = compose(*hf_model("qwen2"), "workload=tp_linear", "workload.in_features=${model.hidden}",
                  "workload.out_features=${model.ffn}", "hardware=cpu")
    assert (cfg.workload.in_features, cfg.workload.out_features) == (64, 176)


def test_path_is_required_and_must_hold_a_config_json(tmp_path):
    with pytest.raises(ConfigError, match=r"model=hf needs model.path=<folder with config.json"):
        compose("model=hf", "hardware=cpu")
    with pytest.raises(ConfigError, match=r"is a folder without config.json"):
        compose("model=hf", f"model.path={tmp_path}", "hardware=cpu")


def fake_hub_cache(root: Path, repo: str, family: str) -> Path:
    """The Hugging Face cache layout (models--org--name/refs/main -> snapshots/<commit>/config.json)
    as `hf download` leaves it, holding one config.json."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    model = root / f"models--{repo.replace('/', '--')}"
    (model / "refs").mkdir(parents=True)
    (model / "refs" / "main").write_text(commit)
    snapshot = model / "snapshots" / commit
    snapshot.mkdir(parents=True)
    shutil.copy(HF_TINY / family / "config.json", snapshot / "config.json")
    return snapshot / "config.json"


def test_a_model_name_is_found_in_the_local_cache_offline(cli, tmp_path, monkeypatch):
    cached = fake_hub_cache(tmp_path / "hub", "acme/tiny-qwen", "qwen2")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    proc = cli.run("model=hf", "model.path=acme/tiny-qwen", "dry_run=true", timeout=120)
    plan = json.loads(proc.stdout[proc.stdout.index("{"):])
    assert plan["model"] == "tiny-qwen" and plan["model.config_json"] == str(cached)
    assert "qkv bias" in plan["model_shape"] and plan["params_total"] == 158_272
    missing = cli.run("model=hf", "model.path=acme/not-downloaded", "dry_run=true", check=False, timeout=120)
    assert missing.returncode != 0
    assert (f"model.path=acme/not-downloaded is neither a folder with config.json nor a model in the local Hugging "
            f"Face cache ({tmp_path / 'hub'}); parbench never downloads") in missing.stderr + missing.stdout
