"""Profiler helpers: which modules get layer ranges, how per-rank metrics combine, which ranks
keep their traces."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointWrapper, checkpoint_wrapper
from torch.profiler import ProfilerActivity, profile

from parbench.config.dims import MESH_DIMS
from parbench.metrics import trace_events
from parbench.metrics.profile import LayerRanges, keeps_trace, layer_modules, rank_summary
from parbench.models.build import build_model
from parbench.report.runs import distinct_labels


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
    assert {f"{trace_events.LAYER_RANGE_PREFIX} layers.1", f"{trace_events.LAYER_RANGE_PREFIX} output"} <= names
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        model(torch.zeros(1, 8, dtype=torch.long))
    assert not any(e.name.startswith(trace_events.LAYER_RANGE_PREFIX) for e in prof.events())


def test_rank_summary_is_mean_and_max_with_missing_collectives_as_zero():
    summary = rank_summary([{"comm_pct": 10.0, "comm_pct_all_gather": 4.0}, {"comm_pct": 30.0}])
    assert summary["comm_pct"] == pytest.approx(20) and summary["comm_pct_max"] == 30
    assert summary["comm_pct_all_gather"] == pytest.approx(2) and summary["comm_pct_all_gather_max"] == 4


def test_run_labels_keep_only_what_differs():
    names = ["train parallel=dp,model=tiny", "train parallel=fsdp,model=tiny"]
    assert distinct_labels(names) == ["parallel=dp", "parallel=fsdp"]
    assert distinct_labels(["train a=1"]) == ["train a=1"]  # nothing differs: the whole name


@pytest.mark.parametrize("nodes, per_node, shape, keep, kept", [
    (1, 2, (1, 2, 1, 1, 1), "representative", {0}),  # the default CPU run: rank 0 alone
    (1, 8, (2, 1, 2, 1, 2), "representative", {0, 4}),  # + the second pipeline stage's first rank
    (2, 8, (4, 1, 2, 1, 2), "representative", {0, 4, 8, 12}),  # stages of 4 ranks; node 1 starts at 8
    (2, 4, (1, 1, 8, 1, 1), "representative", {0, 4}),  # one per node
    (1, 4, (1, 1, 2, 1, 2), "all", {0, 1, 2, 3}),
])
def test_traces_kept_by_rank_0_each_pipeline_stage_and_node(nodes, per_node, shape, keep, kept):
    """The mesh is (pp, dp, fsdp, cp, tp), ranks in row-major order over it, as init_device_mesh lays them."""
    found = set()
    for rank in range(nodes * per_node):
        coordinates = [int(c) for c in np.unravel_index(rank, shape)]
        mesh = SimpleNamespace(mesh_dim_names=MESH_DIMS, get_coordinate=lambda c=coordinates: c)
        env = SimpleNamespace(rank=rank, local_rank=rank % per_node, mesh=mesh)
        if keeps_trace(env, keep):
            found.add(rank)
    assert found == kept
