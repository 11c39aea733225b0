"""Profiler helpers: which modules get layer ranges, and how per-rank metrics combine."""

from __future__ import annotations

import pytest
import torch
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointWrapper, checkpoint_wrapper
from torch.profiler import ProfilerActivity, profile

from parbench.metrics import trace
from parbench.metrics.profile import LayerRanges, layer_modules, rank_summary
from parbench.models.build import build_model
from parbench.report.compare import distinct_labels


def test_layer_modules_are_the_outermost_wrappers_with_clean_names(model_config):
    model = build_model(model_config("tiny"), "cpu")
    for name, block in list(model.layers.items()):
        model.layers[name] = checkpoint_wrapper(block)
    found = dict(layer_modules([model]))
    assert list(found) == ["tok_embeddings", "layers.0", "layers.1", "norm", "output"]
    assert isinstance(found["layers.0"], CheckpointWrapper)


def test_layer_ranges_appear_in_the_trace_and_go_away(model_config):
    model = build_model(model_config("tiny"), "cpu")
    ranges = LayerRanges([model])
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        model(torch.zeros(1, 8, dtype=torch.long))
    ranges.remove()
    names = {e.name for e in prof.events()}
    assert {f"{trace.LAYER_RANGE_PREFIX} layers.1", f"{trace.LAYER_RANGE_PREFIX} output"} <= names
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        model(torch.zeros(1, 8, dtype=torch.long))
    assert not any(e.name.startswith(trace.LAYER_RANGE_PREFIX) for e in prof.events())


def test_rank_summary_is_mean_and_max_with_missing_collectives_as_zero():
    summary = rank_summary([{"comm_pct": 10.0, "comm_pct_all_gather": 4.0}, {"comm_pct": 30.0}])
    assert summary["comm_pct"] == pytest.approx(20) and summary["comm_pct_max"] == 30
    assert summary["comm_pct_all_gather"] == pytest.approx(2) and summary["comm_pct_all_gather_max"] == 4


def test_run_labels_keep_only_what_differs():
    names = ["train parallel=dp,model=tiny", "train parallel=fsdp,model=tiny"]
    assert distinct_labels(names) == ["parallel=dp", "parallel=fsdp"]
    assert distinct_labels(["train a=1"]) == ["train a=1"]  # nothing differs: the whole name
