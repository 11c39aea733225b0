"""The families model=hf builds: published parameter counts of real checkpoints from their public
config.json (tests/models/hf_configs), the same counts without torch and in the dry run, and each
tiny family (tests/models/hf_tiny) training and decoding on 2 gloo ranks under tp and pp as one
process does."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
import math

import numpy as np
import pytest
import torch
from conftest import HF_FAMILIES, HF_TINY, REPO, TRAIN, compose, hf_model, single_process_losses

from parbench.metrics import flops
from parbench.models.build import build_initialized, build_model, count_params
from parbench.models.kv_cache import KVCache
from parbench.models.llama import rope_tables
from parbench.models.shapes import param_counts

PUBLIC = REPO / "tests" / "models" / "hf_configs"
REL = 2e-5  # fp32 summation order only, as tests/parallel
HF_TINY_QWEN3 = HF_TINY / "qwen3" / "config.json"


def public(name: str):
    return compose("model=hf", f"model.path={PUBLIC / name}", "hardware=cpu").model


def near_card(count: int, card: str) -> bool:
    """Within one unit of the last digit a model card states, in billions ("7.61", "3.3")."""
    decimals = len(card.partition(".")[2])
    return abs(count / 1e9 - float(card)) <= 10 ** -decimals


# Exact totals: the checkpoints' parameter counts (Hugging Face's safetensors metadata; the cards
# round them to 7B / 8B / 1B / 1.5B). Cards: Qwen's "Number of Parameters" and "(Non-Embedding)"
# (both embedding matrices left out), Mistral AI's 46.7B / 12.9B active for Mixtral, Qwen3-30B-A3B's
# 30.5B / 3.3B activated.
@pytest.mark.parametrize("name, total, active, non_embedding", [
    ("Llama-2-7b-hf", 6_738_415_616, None, None),
    ("Llama-3.1-8B", 8_030_261_248, None, None),
    ("Llama-3.2-1B", 1_235_814_400, None, None),  # tied head
    ("Mistral-7B-v0.1", 7_241_732_096, None, None),
    ("gpt2-xl", 1_557_611_200, None, None),
    ("Qwen2.5-7B", "7.61", None, "6.53"),
    ("Qwen2.5-0.5B", "0.49", None, "0.36"),  # tied head
    ("Qwen3-8B", "8.2", None, "6.95"),
    ("Mixtral-8x7B-v0.1", "46.7", "12.9", None),
    ("Qwen3-30B-A3B", "30.5", "3.3", "29.9"),
])
def test_public_configs_have_the_published_parameter_counts(name, total, active, non_embedding):
    m = public(name)
    counts = count_params(build_model(m, "meta"), m)
    assert param_counts(m) == counts  # the planner's count, without torch
    assert counts.total == total if isinstance(total, int) else near_card(counts.total, total)
    assert active is None or near_card(counts.active, active)
    output_head = 0 if m.tie_embeddings else m.vocab * m.hidden
    assert non_embedding is None or near_card(counts.total - counts.embedding - output_head, non_embedding)


def test_dry_run_shows_the_shape_and_the_same_counts(cli):
    proc = cli.run("model=hf", f"model.path={PUBLIC / 'Llama-3.1-8B'}", "dry_run=true", "workload.seq_len=8192",
                   timeout=120)
    plan = json.loads(proc.stdout[proc.stdout.index("{"):])
    assert plan["model"] == "Llama-3.1-8B" and plan["params_total"] == 8_030_261_248
    assert plan["model_shape"] == ("llama: 32 layers, hidden 4096, 32 heads (8 KV) x 128, ffn 14336, vocab 128256, "
                                   "max_seq_len 131072, rope 500000 llama3 x8, untied head")
    # 6N (input embedding left out) + the causal attention term 6 * L * d_attn * T.
    n = 8_030_261_248 - 128256 * 4096
    assert plan["flops_per_token"] == 6 * n + 6 * 32 * 4096 * 8192


def test_parbench_plan_shows_the_architecture_and_its_config_json(tmp_path):
    from parbench.planner import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["--top", "2", "--out", str(tmp_path), "model=hf", f"model.path={PUBLIC / 'Qwen2.5-7B'}",
                     "hardware=h100_sxm", "hardware.gpus_per_node=8"])
    file = PUBLIC / "Qwen2.5-7B" / "config.json"
    assert code == 0 and "parbench plan: model=Qwen2.5-7B on 8 x h100_sxm" in out.getvalue()
    assert ("architecture: llama: 28 layers, hidden 3584, 28 heads (4 KV) x 128, ffn 18944, vocab 152064, "
            "max_seq_len 131072, rope 1e+06, qkv bias, untied head\n"
            f"  from {file} (sha256 {hashlib.sha256(file.read_bytes()).hexdigest()[:12]})") in out.getvalue()


def test_sliding_window_attention_and_flops():
    m = public("Mistral-7B-v0.1")
    assert flops.attention_flops_per_token(m, 4096, causal=True) == 6 * 32 * 4096 * 4096  # T <= W: T/2 each
    # T = 2W: a query sees W - W^2/2T = 3W/4 positions on average (the first W see fewer).
    assert flops.attention_flops_per_token(m, 8192, causal=True) == 12 * 32 * 4096 * 3072
    assert flops.attention_flops_per_token(m, 8192, causal=False) == 12 * 32 * 4096 * 4096
    tiny = compose(*hf_model("mistral"), "hardware=cpu").model
    windowed, full = (build_initialized(c, 0, "cpu") for c in (tiny, dataclasses.replace(tiny, sliding_window=None)))
    tokens = torch.randint(0, tiny.vocab, (1, 40))
    with torch.no_grad():
        change = (windowed(tokens) - full(tokens)).abs().amax(-1)[0]
    assert change[:16].max() == 0 and change[16:].min() > 0  # the window of 16 masks from position 16 on


def test_llama3_rope_scaling_keeps_high_and_divides_low_frequencies():
    scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8192}
    # The angles at position 1 are the frequencies themselves.
    angle, scaled = (torch.atan2(sin[1], cos[1]) for cos, sin in (rope_tables(128, 2, 500000.0),
                                                                  rope_tables(128, 2, 500000.0, scaling)))
    assert scaled[0] == angle[0] and float(scaled[-1]) == pytest.approx(float(angle[-1]) / 8, rel=1e-4)
    wavelength = 2 * math.pi / angle
    blended = (wavelength > 8192 / 4) & (wavelength < 8192 / 1)
    assert blended.any() and ((scaled[blended] < angle[blended]) & (scaled[blended] > angle[blended] / 8)).all()


@pytest.mark.parametrize("family", HF_FAMILIES)
def test_cached_decoding_matches_the_full_forward(family):
    """Prefill then one token at a time, growing and static shapes: the Mistral fixture's window
    (16) is shorter than the 40 positions, so the cache's windowed attention is exercised."""
    m = compose(*hf_model(family), "hardware=cpu").model
    model = build_initialized(m, 0, "cpu").eval()
    tokens = torch.randint(0, m.vocab, (2, 40), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        full = model(tokens)
        cache, static = (KVCache(list(model.layers.keys()), 48) for _ in range(2))
        steps = [model(tokens[:, :24], cache=cache)] + [model(tokens[:, i:i + 1], cache=cache) for i in range(24, 40)]
        model(tokens[:, :24], cache=static)
        position = torch.tensor([24])
        static.use_position(position)
        one = model(tokens[:, 24:25], positions=position, cache=static)
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(one[:, 0], full[:, 24], rtol=1e-5, atol=1e-5)


FAST_FAMILY = "qwen2"


def family_param(family: str):
    return pytest.param(family, marks=() if family == FAST_FAMILY else pytest.mark.slow)


def training_cases() -> list:
    """Every family under tp and pp with the slow tests; the fast set trains qwen2 under tp only: its
    q/k/v biases are what tp shards beyond the preset's layers, while pp moves whole layers (its
    numerics: tests/parallel/test_pp_ep.py; a family's layers under pp: the decode test below)."""
    slow = [pytest.param(family, "tp,pp", marks=pytest.mark.slow, id=f"{family}-tp,pp") for family in HF_FAMILIES]
    return [*slow, pytest.param(FAST_FAMILY, "tp", id=f"{FAST_FAMILY}-tp")]


@pytest.mark.parametrize("family, layouts", training_cases())
def test_tiny_family_trains_under_tp_and_pp_as_one_process(cli, tmp_path, family, layouts):
    # Without the load-balancing loss, which pipeline stages see per microbatch (tests/parallel/test_pp_ep.py).
    model = (*hf_model(family), "model.aux_loss_coef=0")
    expected = single_process_losses(tmp_path / "reference", *model)
    cli.run(*TRAIN, *model, f"parallel={layouts}", multirun=True)
    for job in range(len(layouts.split(","))):
        assert cli.losses(job) == pytest.approx(expected, rel=REL)


@pytest.mark.parametrize("family", [family_param(f) for f in HF_FAMILIES])
def test_tiny_family_decodes_under_tp_and_pp_as_one_process(family_decodes, family):
    """The native engine on 1 rank, tp=2 and pp=2: the KV-cache decode agrees with recomputing the
    whole sequence (workload.verify), and every layout generates the same tokens."""
    cli = family_decodes(family)  # conftest's family_decode_overrides(family)
    runs = cli.runs()
    children = runs[runs["tags.mlflow.parentRunId"].notna()]
    assert len(children) == 3 and (children.status == "FINISHED").all()
    assert (children["metrics.decode_mismatched_tokens"] == 0).all()
    tokens = [json.loads((cli.job_dir(i) / "generated_tokens.json").read_text()) for i in range(3)]
    assert np.array(tokens[0]).shape == (4, 8) and tokens[0] == tokens[1] == tokens[2]
    file = HF_TINY / family / "config.json"
    assert (children["tags.model.config_json"] == str(file)).all()
    assert (children["tags.model.config_sha256"] == hashlib.sha256(file.read_bytes()).hexdigest()).all()


@pytest.mark.vllm
def test_vllm_engine_builds_the_same_config_json(cli):
    """vLLM loads model.path's folder (its own Qwen3 code, dummy weights); parbench's figures come
    from the same config.json. The Qwen3 fixture's head_dim 32 suits vLLM's CPU attention."""
    cli.run("workload=inference", "workload.engine=vllm", *hf_model("qwen3"), "workload.repeats=1",
            "workload.input_len=16", "workload.output_len=4", "profile.enabled=false", timeout=600)
    run = cli.runs().iloc[0]
    assert run.status == "FINISHED" and run["metrics.ttft_s_p50"] > 0 and run["metrics.tpot_s_p50"] > 0
    assert run["tags.model.config_json"] == str(HF_TINY_QWEN3) and run["params.model.qk_norm"] == "True"
    assert run["metrics.mem_weights_gb"] == pytest.approx(182_720 * 4 / 1e9)  # parbench's count, fp32
