"""Named configs build on the meta device with the published parameter counts."""

from __future__ import annotations

import pytest
from conftest import compose

from parbench.models.build import build_model, count_params


@pytest.mark.parametrize("model, total_b, active_b", [
    ("llama2_7b", 6.74, 6.74), ("llama2_13b", 13.0, 13.0), ("llama2_70b", 69.0, 69.0),
    ("llama3_8b", 8.03, 8.03), ("llama3_2_1b", 1.24, 1.24), ("qwen3_8b", 8.19, 8.19),
    ("qwen3_1_7b", 1.72, 1.72), ("gpt2_xl", 1.56, 1.56), ("mixtral_8x7b", 46.7, 12.9),
])
def test_published_parameter_counts(model, total_b, active_b):
    cfg = compose(f"model={model}", "hardware=cpu").model
    counts = count_params(build_model(cfg, "meta"), cfg)
    assert counts.total / 1e9 == pytest.approx(total_b, rel=0.005)  # published figures are rounded
    assert counts.active / 1e9 == pytest.approx(active_b, rel=0.005)


def test_untied_llama3_2_1b_is_torchtitans_1_5b_shape():
    cfg = compose("model=llama3_2_1b", "model.tie_embeddings=false", "hardware=cpu").model
    assert count_params(build_model(cfg, "meta"), cfg).total / 1e9 == pytest.approx(1.50, abs=0.005)


def test_tiny_model_runs_forward():
    import torch

    cfg = compose("model=tiny_moe", "hardware=cpu").model
    torch.manual_seed(0)
    logits = build_model(cfg, "cpu")(torch.randint(0, cfg.vocab, (2, 16)))
    assert logits.shape == (2, 16, cfg.vocab) and torch.isfinite(logits).all()
