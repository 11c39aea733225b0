"""Compiled inference steps are shared by the points that can share them: input and output length
are dynamic sizes of the compiled step, so they do not change its key; batch and layout do."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest
from conftest import compose

from parbench.workloads.compile_cache import CACHE_ENV, cache_folder, cache_outcome, compile_key, use_compile_cache

BASE = ("workload=inference", "model=llama2_7b", "hardware=h100_sxm", "hardware.gpus_per_node=2",
        "workload.decode_mode=compile")


def key(*overrides: str) -> str:
    return compile_key(compose(*BASE, *overrides))


def test_points_that_differ_only_in_lengths_share_one_key():
    first = key("workload.input_len=64", "workload.output_len=16")
    assert key("workload.input_len=1024", "workload.output_len=16") == first
    assert key("workload.input_len=64", "workload.output_len=128") == first


@pytest.mark.parametrize("change", ["workload.batch_size=8", "parallel=tp", "parallel=pp",
                                    "workload.decode_mode=graph", "model=llama3_8b", "workload.dtype=fp16"])
def test_batch_layout_model_or_mode_change_the_key(change):
    assert key(change) != key()


def test_the_folder_is_under_the_configured_cache_and_named_by_the_key(tmp_path, monkeypatch):
    monkeypatch.delenv(CACHE_ENV, raising=False)
    cfg = compose(*BASE, f"compile_cache={tmp_path}")
    assert use_compile_cache(cfg) == tmp_path / compile_key(cfg) == cache_folder(cfg)
    assert os.environ[CACHE_ENV] == str(tmp_path / compile_key(cfg)) and (tmp_path / compile_key(cfg)).is_dir()
    assert cache_folder(compose(*BASE, "compile_cache=null")) is None


def test_a_users_inductor_cache_dir_wins(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, "/somewhere")
    assert use_compile_cache(compose(*BASE, f"compile_cache={tmp_path}")) is None
    assert os.environ[CACHE_ENV] == "/somewhere"


def test_training_shares_one_folder():
    assert compile_key(compose("hardware=cpu")) == compile_key(compose("hardware=cpu", "workload.seq_len=128")) == "train"


@pytest.mark.parametrize("inductor, outcome", [({}, "none"), ({"fxgraph_cache_hit": 3}, "hit"),
                                               ({"fxgraph_cache_miss": 2}, "miss"),
                                               ({"fxgraph_cache_hit": 1, "fxgraph_cache_miss": 1}, "partial")])
def test_the_run_records_whether_its_compiles_hit_the_cache(inductor, outcome):
    metrics, tags = cache_outcome({"inductor": inductor})
    assert tags == {"compile_cache": outcome}
    assert metrics["compile_cache_hits"] == inductor.get("fxgraph_cache_hit", 0)


def compiled_graphs(mark: bool = True, layers: int = 2, lengths=((8, 8), (12, 20))) -> list[int]:
    """The size (FX nodes) of each graph dynamo compiled for the prefills and static-shape decode
    steps of the tiny model's blocks (regional compilation: decode_step.compile_blocks), run at
    several (input, output) lengths (dynamo only, no inductor: fast on CPU)."""
    import torch
    from torch._dynamo.utils import counters

    from parbench.models.build import build_model
    from parbench.models.kv_cache import KVCache
    from parbench.workloads.inference.decode_step import compile_blocks, mark_lengths_dynamic, static_position

    cfg = replace(compose("model=tiny", "hardware=cpu").model, layers=layers)
    torch.manual_seed(0)
    model = build_model(cfg, "cpu").eval()
    sizes = []

    def backend(graph, example_inputs):  # records what dynamo hands the compiler, runs it as traced
        sizes.append(len(graph.graph.nodes))
        return graph.forward

    compile_blocks(model.layers.values(), backend=backend)
    torch._dynamo.reset()
    counters.clear()
    with torch.no_grad():
        for input_len, output_len in lengths:
            cache = KVCache(list(model.layers.keys()), input_len + output_len)
            for name, block in model.layers.items():
                cache.layer(name).allocate(2, cfg.kv_heads, block.attention.head_dim, torch.float32, torch.device("cpu"))
            prompt = torch.randint(0, cfg.vocab, (2, input_len))
            if mark:
                mark_lengths_dynamic(cache)
            model(prompt, cache=cache)
            position = torch.tensor([input_len])
            with static_position(cache, position):
                model(prompt[:, :1], positions=position, cache=cache)
    assert counters["stats"]["unique_graphs"] == len(sizes)
    return sizes


def test_one_compiled_prefill_and_decode_step_serve_every_length():
    assert len(compiled_graphs(mark=True)) == 2  # one prefill, one decode step
    assert len(compiled_graphs(mark=False)) > 2  # without the dynamic cache length: compiled again


def test_every_layer_shares_the_compiled_block():
    """Regional compilation: what dynamo compiles (and so the compile time) does not grow with the
    layers; one graph per block specialised to its layer would hit dynamo's recompile limit."""
    one_layer = compiled_graphs(layers=1, lengths=((8, 8),))
    assert compiled_graphs(layers=12, lengths=((8, 8),)) == one_layer and len(one_layer) == 2
