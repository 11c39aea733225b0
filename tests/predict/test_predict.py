"""The performance model (parbench.predict) against what it models: parameter counts of the built
models, the pipeline schedules' own action order, the bytes and parameters of real 2-rank runs, and
the fit check and plan as a user meets them."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from parbench.calibration_runs import GPU_SIZES
from parbench.config import ConfigError
from parbench.models.build import build_model, count_params
from parbench.prepare import prediction_plan, validate
from parbench.parallel.specs import theoretical_bubble
from parbench.paths import CONF_DIR
from parbench.predict import predict
from parbench.predict.calibration import Calibration, LinkFit
from parbench.predict.calibration_file import load_calibration
from parbench.metrics.flops import attended_positions, attention_flops_per_token
from parbench.metrics.inference_cost import prefill_attention_flops
from parbench.predict.costs import attention_seconds, expert_gemm_seconds, matmul_seconds, typical_gemm_flops
from parbench.predict.inference import prefill_attention_seconds
from parbench.predict.microbench_fits import attention_figures, fit_link, fit_matmul, matmul_figures
from parbench.predict.comm import step_comms
from parbench.predict.layout import Layout
from parbench.predict.memory import estimate_memory, weight_cast_bytes
from parbench.models.shapes import param_counts
from conftest import ATTENTION_WIDTHS, TP_SP_CP_RUN, compose

# model=hf reads a config.json (its counts: tests/models/test_hf_families.py).
MODELS = sorted(p.stem for p in (CONF_DIR / "model").glob("*.yaml") if p.stem != "hf")


@pytest.mark.parametrize("name", MODELS)
def test_param_counts_from_the_config_equal_the_built_model(name, model_config):
    cfg = model_config(name)
    assert param_counts(cfg) == count_params(build_model(cfg, "meta"), cfg)


def schedule_bubble(schedule: str, pp: int, stages_per_rank: int, microbatches: int) -> float:
    """Run torch.distributed.pipelining's own action order for every rank (F=1, full backward=2,
    or F=I=W=1 for zero bubble), each action starting when its inputs are done and its rank is
    free; the largest idle fraction of the span."""
    from torch.distributed.pipelining.schedules import ScheduleInterleaved1F1B, ScheduleInterleavedZeroBubble
    from torch.distributed.pipelining.schedules import _ComputationType as T

    cls = ScheduleInterleavedZeroBubble if schedule == "zero_bubble" else ScheduleInterleaved1F1B
    s = cls.__new__(cls)  # the order needs only these fields, not stages or a process group
    s.pp_group_size, s.n_local_stages, s._n_microbatches = pp, stages_per_rank, microbatches
    s.number_of_rounds = max(1, microbatches // pp)
    s.microbatches_per_round = microbatches // s.number_of_rounds
    orders = {}
    for rank in range(pp):
        s.rank = rank
        orders[rank] = [a for a in s._calculate_single_rank_operations(rank) if a is not None]
    cost = {T.FORWARD: 1, T.FULL_BACKWARD: 2, T.BACKWARD_INPUT: 1, T.BACKWARD_WEIGHT: 1}
    last, done, free, pos = pp * stages_per_rank - 1, {}, [0.0] * pp, [0] * pp

    def inputs(a) -> tuple:
        if a.computation_type == T.FORWARD:
            return ((a.stage_index - 1, a.microbatch_index, T.FORWARD),) if a.stage_index else ()
        if a.computation_type == T.BACKWARD_WEIGHT:
            return ((a.stage_index, a.microbatch_index, T.BACKWARD_INPUT),)
        if a.stage_index == last:
            return ((a.stage_index, a.microbatch_index, T.FORWARD),)
        return ((a.stage_index + 1, a.microbatch_index, a.computation_type),)

    while any(pos[r] < len(orders[r]) for r in range(pp)):
        progressed = False
        for r in range(pp):
            while pos[r] < len(orders[r]) and all(i in done for i in inputs(orders[r][pos[r]])):
                a = orders[r][pos[r]]
                start = max([free[r], *(done[i] for i in inputs(a))])
                end = start + cost[a.computation_type]
                done[(a.stage_index, a.microbatch_index, a.computation_type)] = free[r] = end
                pos[r], progressed = pos[r] + 1, True
        assert progressed, "the schedule deadlocks"
    span = max(free)
    busy = sum(cost[a.computation_type] for a in orders[0])
    return 1 - busy / span


@pytest.mark.parametrize("schedule,pp,v,m", [("1f1b", 2, 1, 4), ("1f1b", 4, 1, 8), ("interleaved_1f1b", 4, 2, 8),
                                             ("interleaved_1f1b", 2, 2, 4), ("zero_bubble", 4, 2, 8),
                                             ("zero_bubble", 2, 2, 4)])
def test_bubble_formula_matches_the_pipeline_schedule(schedule, pp, v, m):
    # 1F1B is the interleaved schedule with one stage per rank.
    assert theoretical_bubble(schedule, pp, m, v) == pytest.approx(schedule_bubble(schedule, pp, v, m))


def test_latency_bandwidth_and_matmul_fits_recover_their_parameters():
    link = fit_link([(b, 20e-6 + b / 5e9) for b in (1e3, 1e5, 1e7, 1e9)])
    assert link.latency_s == pytest.approx(20e-6) and link.busbw_gbps == pytest.approx(5.0)
    tflops, half = fit_matmul([(f, 600 * f / (f + 2e9)) for f in (1e8, 1e9, 1e10, 1e12)])
    assert tflops == pytest.approx(600) and half == pytest.approx(2.0)


def attention_microbenchmark(shapes: list[list[int]], widths: dict) -> dict:
    """The attention run's TFLOP/s per shape on a machine of these figures per head width."""
    metrics = {}
    for b, h, kv, s, d in shapes:
        f, a, name = widths[str(d)], attended_positions(s, True), f"{b}x{h}x{kv}x{s}x{d}"
        flops = 4 * b * h * s * d * a
        both = f["attention_call_s"] + 3 * flops * (1 + f["attention_extra_positions"] / a) / (f["attention_tflops"] * 1e12)
        fwd = f["attention_forward_call_s"] + flops * (1 + f["attention_forward_extra_positions"] / a) / (
            f["attention_forward_tflops"] * 1e12)
        metrics |= {f"attention_tflops/{name}": 3 * flops / both / 1e12, f"attention_fwd_tflops/{name}": flops / fwd / 1e12}
    return metrics


def test_attention_costs_a_short_sequence_and_a_small_batch_more_per_flop_as_its_microbenchmark_measured():
    """The calibration's attention shapes give, per head width, the long-sequence rate, the extra keys a
    query costs and a call's fixed cost (one length at two batches tells the last two apart), of forward
    and backward and of the forward alone; a step's and a prefill's attention then cost more per FLOP the
    shorter the sequence, as FlashAttention measures (H100, 2026-11-27, 64-wide heads' forward: 313
    TFLOP/s at 8 x 1,024 tokens, 235 at 2 x 1,024, 438 at 1 x 8,192)."""
    figures = attention_figures(attention_microbenchmark(json.loads(GPU_SIZES["attention"]), ATTENTION_WIDTHS))
    for width, truth in ATTENTION_WIDTHS.items():
        assert figures["attention_widths"][width] == pytest.approx(truth, rel=1e-6), width
    cal = replace(load_calibration("h100_sxm"), **figures)

    def step(seq: int) -> tuple[float, float, Layout]:
        lay = Layout.of(cfg := compose("hardware=h100_sxm", "hardware.gpus_per_node=1", "model=llama3_2_1b",
                                       f"workload.seq_len={seq}", f"workload.batch_size={8192 // seq}"), validate(cfg, None))
        return attention_flops_per_token(cfg.model, seq, causal=True) * lay.tokens_per_step, attention_seconds(lay, cal), lay

    t64 = ATTENTION_WIDTHS["64"]
    flops, seconds, lay = step(1024)
    assert seconds == pytest.approx(flops * (1 + t64["attention_extra_positions"] / attended_positions(1024, True))
                                    / (t64["attention_tflops"] * 1e12) + lay.cfg.model.layers * t64["attention_call_s"])
    assert seconds / flops > 1.7 * step(8192)[1] / step(8192)[0]
    infer = compose("hardware=h100_sxm", "hardware.gpus_per_node=1", "model=qwen3_1_7b", "workload=inference",
                    "workload.input_len=1024", "workload.batch_size=8")
    lay = Layout.of(infer, validate(infer, None))
    t128, a = ATTENTION_WIDTHS["128"], attended_positions(1024, True)
    assert prefill_attention_seconds(lay, cal) == pytest.approx(
        prefill_attention_flops(infer.model, 8, 1024) * (1 + t128["attention_forward_extra_positions"] / a)
        / (t128["attention_forward_tflops"] * 1e12) + infer.model.layers * t128["attention_forward_call_s"])


def test_ring_attention_pays_a_calls_cost_per_ring_step_on_gpus():
    """cp=2 on GPUs: torch's ring attention calls SDPA twice a layer, each over half the sequence's
    queries; the CPU path gathers K and V for one call."""
    cal = replace(load_calibration("h100_sxm"), attention_widths=ATTENTION_WIDTHS)

    def extra_call_cost(*hardware: str) -> float:
        cfg = compose(*hardware, "model=llama3_2_1b", "parallel.cp=2", "workload.seq_len=2048")
        lay = Layout.of(cfg, validate(cfg, None))
        return attention_seconds(lay, cal) - attention_seconds(lay, replace(cal, attention_widths={
            k: {**f, "attention_call_s": 0.0} for k, f in ATTENTION_WIDTHS.items()}))

    layers = compose("model=llama3_2_1b").model.layers
    assert extra_call_cost("hardware=h100_sxm", "hardware.gpus_per_node=2") == pytest.approx(
        2 * layers * ATTENTION_WIDTHS["64"]["attention_call_s"])
    assert extra_call_cost("hardware=cpu") == pytest.approx(layers * ATTENTION_WIDTHS["64"]["attention_call_s"])


def test_attention_shapes_of_one_length_per_batch_fit_the_rate_curve_alone():
    """Shapes that keep batch x length fixed cannot tell a call's fixed cost from the short sequences'
    penalty: the fit is the rate curve alone, its fixed cost 0."""
    shapes = [[8, 32, 8, 1024, 64], [4, 32, 8, 2048, 64], [1, 32, 8, 8192, 64], [16, 32, 8, 512, 64]]
    no_call = {"64": {**ATTENTION_WIDTHS["64"], "attention_call_s": 0.0, "attention_forward_call_s": 0.0}}
    figures = attention_figures(attention_microbenchmark(shapes, no_call))
    assert figures.pop("attention_widths") == {} and figures == pytest.approx(no_call["64"])


@pytest.mark.parametrize("model", ["llama3_2_1b", "gpt2_xl", "mixtral_8x7b"])
def test_each_block_gemm_runs_at_the_rate_of_its_size(model):
    """Every matmul parameter is costed once (blocks at their own GEMM's rate, experts at their grouped calls', the
    head at the typical one): with no size penalty the GEMMs are 6 N T / R; with one, GQA's k and v (or GPT-2's
    narrow projections) cost more per FLOP than the MLP, and tp=2 halves each rank's GEMMs but the experts', which
    every tp rank runs whole (parallel/tp.py)."""
    def gemms(cal, tp=1):
        cfg = compose("hardware=h100_sxm", f"hardware.gpus_per_node={tp}", f"model={model}", "workload.seq_len=1024",
                      "workload.batch_size=4", f"parallel.tp={tp}", "parallel.dp=1")
        lay = Layout.of(cfg, validate(cfg, None))
        return matmul_seconds(lay, cal)[0], lay

    flat = replace(load_calibration("h100_sxm"), matmul_half_gflop=0.0, unaligned_matmul_factor=1.0, membw_gbps=0.0,
                   grouped_matmul_tflops=0.0)  # the experts' grouped calls at the plain rate
    seconds, lay = gemms(flat)
    assert seconds == pytest.approx(6 * lay.counts.matmul_active * lay.tokens_per_step / (flat.matmul_tflops * 1e12))
    curved = replace(flat, matmul_half_gflop=20.0)
    mlp_rate_only = 6 * lay.counts.matmul_active * lay.tokens_per_step / curved.matmul_rate(
        typical_gemm_flops(lay.cfg.model, lay.microbatch_tokens, 1))
    assert gemms(curved)[0] > mlp_rate_only
    if model != "gpt2_xl":  # 25 heads: no tp=2
        experts = expert_gemm_seconds(lay, flat, lay.microbatch_tokens, 3)[0]
        assert gemms(flat, tp=2)[0] == pytest.approx((seconds - experts) / 2 + experts)


def test_an_unaligned_head_runs_at_the_calibrated_unaligned_rate():
    """The matmul run's shapes with a dimension not a multiple of 8 (GPT-2's vocabulary) give the
    factor; only a model whose vocabulary is unaligned pays it, on its head's GEMMs."""
    curve = lambda m, k, n: 600 * (2 * m * k * n) / (2 * m * k * n + 2e9)  # noqa: E731
    shapes = [(512, 512, 512), (1024, 1024, 1024), (4096, 4096, 4096), (8192, 8192, 8192)]
    metrics = {f"matmul_tflops/{m}x{k}x{n}": curve(m, k, n) for m, k, n in shapes}
    metrics["matmul_tflops/4096x1600x50257"] = 0.25 * curve(4096, 1600, 50257)
    figures = matmul_figures(metrics)
    assert figures["matmul_tflops"] == pytest.approx(600) and figures["unaligned_matmul_factor"] == pytest.approx(0.25)
    cal = replace(load_calibration("h100_sxm"), unaligned_matmul_factor=0.25)
    aligned_cal = replace(cal, unaligned_matmul_factor=1.0)
    def extra(*overrides: str) -> float:
        lay = Layout.of(cfg := compose("hardware=h100_sxm", "model=gpt2_xl", "model.tie_embeddings=false",
                                       *overrides), validate(cfg, None))
        return matmul_seconds(lay, cal)[0] - matmul_seconds(lay, aligned_cal)[0], lay, cfg

    unaligned, lay, cfg = extra("hardware.gpus_per_node=1")
    head_flops = 6 * cfg.model.vocab * cfg.model.hidden * lay.tokens_per_step
    head_gemm = 2 * lay.microbatch_tokens * cfg.model.vocab * cfg.model.hidden  # at its own size's rate
    assert unaligned == pytest.approx(3 * head_flops / cal.matmul_rate(head_gemm))
    assert extra("hardware.gpus_per_node=1", "model.vocab=50304")[0] == 0.0
    # pp=2: the last stage runs the whole head for every micro-batch and sets the pace: as much as
    # one GPU's (a little more: a micro-batch's smaller GEMM runs below the whole batch's rate)
    assert unaligned <= extra("hardware.gpus_per_node=2", "parallel=pp")[0] < 1.2 * unaligned


def test_calibration_runs_even_where_the_store_has_the_same_config_finished(monkeypatch, tmp_path):
    """resume (on by default) would skip a calibration run whose config a store already holds."""
    import subprocess

    from parbench.calibrate import run_all

    commands = []

    def record(cmd, **_):
        commands.append(cmd)
        (tmp_path / "matmul").mkdir()
        (tmp_path / "matmul" / "results.json").write_text('{"metrics": {}}')
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(subprocess, "run", record)
    run_all(["hardware=cpu"], {"matmul": ["workload=matmul"]}, tmp_path)
    assert "resume=false" in commands[0]


def collective_bytes_per_step(cli, num: int, steps: int) -> dict[str, float]:
    return {kind: nbytes for kind, (_, nbytes) in collectives_per_step(cli, num, steps).items()}


def collectives_per_step(cli, num: int, steps: int) -> dict[str, tuple[float, float]]:
    """Rank 0's (calls, bytes) per collective kind in the profiled window, per step (gloo's reduce-scatter
    runs as an all-reduce of the whole input, so both count under reduce; DDP broadcasts the RoPE
    buffers every forward)."""
    table = pd.read_csv(cli.job_dir(num) / "profile" / "collectives.csv")
    table = table[table["rank"] == 0]
    kinds = table["collective"].replace({"all_reduce": "reduce", "reduce_scatter": "reduce"})
    sums = table.groupby(kinds)[["calls", "bytes"]].sum() / steps
    return {kind: (row.calls, row.bytes) for kind, row in sums.iterrows()}


def predicted_bytes(parallel: str, *overrides: str) -> dict[str, float]:
    return {kind: nbytes for kind, (_, nbytes) in predicted_collectives(parallel, *overrides).items()}


def predicted_collectives(parallel: str, *overrides: str) -> dict[str, tuple[int, float]]:
    """(calls, bytes) per step by collective kind, as collective_bytes_per_step groups them."""
    cfg = compose("hardware=cpu", f"parallel={parallel}", *overrides)
    out: dict[str, tuple[int, float]] = {}
    for c in step_comms(Layout.of(cfg, validate(cfg, None))):
        kind = "reduce" if c.op in ("all_reduce", "reduce_scatter") else c.op
        calls, nbytes = out.get(kind, (0, 0.0))
        out[kind] = (calls + c.calls, nbytes + c.bytes * c.calls)
    return out


def test_memory_and_communication_equal_a_real_2_rank_run(dp_fsdp_sweep):
    """DDP and FSDP2 on 2 gloo ranks: the parameters each rank holds and the bytes of every
    collective in the profiled steps are what the model predicts; the run logs predicted figures."""
    cli, active = dp_fsdp_sweep, 2  # conftest's DP_FSDP: profile.active_steps=2
    runs = cli.runs().dropna(subset=["tags.mlflow.parentRunId"]).reset_index(drop=True)
    for num, parallel in enumerate(("dp", "fsdp")):
        run = runs[runs["params.parallel.name"] == parallel].iloc[0]
        predicted = predict(compose("hardware=cpu", f"parallel={parallel}"),
                            validate(compose("hardware=cpu", f"parallel={parallel}"), None))
        assert run["metrics.params_held_gb"] == pytest.approx(predicted.memory.params_gb, rel=1e-9), parallel
        assert collective_bytes_per_step(cli, num, active) == pytest.approx(predicted_bytes(parallel)), parallel
        assert run["metrics.predicted_step_time_s"] == pytest.approx(predicted.step_time_s)
        assert abs(run["metrics.predicted_step_time_error_pct"]) < 1000


def test_ddp_holds_a_copy_of_every_gradient_in_its_buckets(tmp_path):
    """DDP's reducer allocates a bucket for every gradient when it wraps the model (gradient_as_bucket_view off,
    as parallel/dp.py leaves it): the model's buffers under dp are the bytes DDP reports for its buckets
    (two H200s, the 1B Llama: 52.4 GB predicted against 56.9 measured, 47.5 with two 25 MiB buckets)."""
    cfg = compose("hardware=cpu", "parallel=dp")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        buckets = DistributedDataParallel(build_model(cfg.model, "cpu"))._get_ddp_logging_data()["bucket_sizes"]
    finally:
        dist.barrier()
        dist.destroy_process_group()
    predicted = estimate_memory(Layout.of(cfg, validate(cfg, None))).buffers_gb * 1e9
    assert predicted == pytest.approx(sum(map(int, re.findall(r"\d+", buckets))), rel=1e-9)


@pytest.mark.parametrize("name", ["llama3_2_1b", "gpt2_xl", "qwen3_1_7b", "tiny_moe"])
def test_the_weights_casts_are_the_built_models_matmul_weights_in_bf16(name):
    """Autocast's casts are the weights a matmul reads, 2 B each: nn.Linear's (the tied head once) cached to
    the end of backward without checkpointing, gone by then with it; an MoE's expert stacks (cast anew at
    each use) only at backward's start, without checkpointing; a compiled step's blocks leave the cache to
    the eager head, whatever the checkpointing; none under FSDP2's own mixed precision."""
    gpu = ["hardware=h100_sxm", "hardware.gpus_per_node=1"]
    cfg = compose(f"model={name}", *gpu, "parallel=dp")
    model = build_model(cfg.model, "meta")
    linear = sum({id(m.weight): m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear)}.values())
    experts = sum(p.numel() for p in model.parameters() if p.dim() == 3)
    dims = validate(cfg, None)
    assert weight_cast_bytes(Layout.of(cfg, dims)) == (2 * (linear + experts), 2 * linear)
    full = compose(f"model={name}", *gpu, "workload.activation_checkpointing=full")
    assert weight_cast_bytes(Layout.of(full, dims)) == (2 * linear, 0.0)
    compiled = compose(f"model={name}", *gpu, "workload.compile=true")
    head = 2 * model.output.weight.numel()
    assert weight_cast_bytes(Layout.of(compiled, dims)) == (2 * (linear + experts), head)
    compiled_full = compose(f"model={name}", *gpu, "workload.compile=true", "workload.activation_checkpointing=full")
    assert weight_cast_bytes(Layout.of(compiled_full, dims)) == (2 * linear, head)
    fsdp = compose(f"model={name}", "hardware=h100_sxm", "hardware.gpus_per_node=2", "parallel=fsdp")
    assert weight_cast_bytes(Layout.of(fsdp, validate(fsdp, None))) == (0.0, 0.0)


@pytest.mark.parametrize("name", ["tiny", "tiny_moe"])
def test_a_bf16_step_casts_each_weight_and_its_gradient_once(name):
    """The step's casts (streamed_bytes) are two a weight: autocast's of each matmul weight to bf16 in the forward and
    of its gradient back to fp32 in the backward, an MoE's expert stacks among them (counted in a CPU step's trace)."""
    cfg = compose(f"model={name}")
    model = build_model(cfg.model, "cpu")
    weights = {tuple(p.shape) for p in model.parameters() if p.dim() >= 2 and p is not model.tok_embeddings.weight}
    tokens = torch.randint(0, cfg.model.vocab, (3, 7))
    with torch.profiler.profile(record_shapes=True) as prof:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(tokens).float().square().mean()
        loss.backward()
    casts = [e for e in prof.events() if e.name == "aten::_to_copy" and e.input_shapes and tuple(e.input_shapes[0]) in weights]
    matmul_weights = sum(1 for p in model.parameters() if p.dim() >= 2 and p is not model.tok_embeddings.weight)
    assert len(casts) == 2 * matmul_weights


def test_dry_run_names_what_does_not_fit_and_what_would(cli):
    proc = cli.run("dry_run=true", "model=llama2_70b", "hardware=h100_sxm", "hardware.gpus_per_node=8",
                   "parallel=fsdp", "workload.seq_len=4096", "workload.batch_size=1")
    line = next(l for l in proc.stdout.splitlines() if "does not fit" in l)
    need = float(re.search(r"needs ([\d.,]+) GB per device(?: \(with [\d.]+ GB runtime overhead\))?; 80.0 GB per device "
                           r"\(hardware.memory_gb\); 76.0 GB usable after a 5% margin for the allocator; try ",
                           line).group(1).replace(",", ""))
    assert need > 76 and "GPUs (hardware.nodes=" in line, line
    assert "step" in proc.stdout and "bottleneck" in proc.stdout


def test_fit_check_leaves_the_allocator_margin_and_refuses_before_launch():
    """A point predicted to need 99 % of the device is refused at launch (not in a dry run), one at 90 % fits."""
    cfg = compose("model=llama3_2_1b", "hardware=h100_sxm", "hardware.gpus_per_node=1", "workload.seq_len=1024")
    need = predict(cfg, validate(cfg, None)).memory.total_gb
    cfg.hardware.memory_gb = need / 0.99
    with pytest.raises(ConfigError, match=r"does not fit: .*5% margin for the allocator.*launch.check_fit=false"):
        prediction_plan(cfg, validate(cfg, None))
    cfg.launch.check_fit = False
    assert prediction_plan(cfg, validate(cfg, None))["fit"].startswith("does not fit")
    cfg.hardware.memory_gb = need / 0.90
    assert prediction_plan(cfg, validate(cfg, None))["fit"].startswith("fits: needs")


def test_a_calibration_file_given_on_the_command_line_is_the_one_predicted_with(cli):
    """`calibration=<file>` is a plain value (the shipped profiles live outside Hydra's groups)."""
    shipped = (CONF_DIR / "calibrations" / "cpu.yaml").read_text()
    (cli.root / "mine.yaml").write_text(re.sub(r"(?m)^source: .*$", "source: my own profile", shipped))
    proc = cli.run("dry_run=true", f"calibration={cli.root / 'mine.yaml'}")
    assert "[parbench] predicted (my own profile): step" in proc.stdout, proc.stdout


def plan_output(*overrides: str, tmp: Path) -> str:
    from parbench.planner import main
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["--top", "5", "--out", str(tmp), *overrides])
    return f"{code}\n{out.getvalue()}"


def test_plan_refuses_what_cannot_fit_and_ranks_the_rest_stably(tmp_path):
    args = ("model=llama2_13b", "hardware=h100_sxm", "hardware.gpus_per_node=8", "workload.seq_len=4096",
            "workload.batch_size=1")
    first = plan_output(*args, tmp=tmp_path)
    assert first == plan_output(*args, tmp=tmp_path)  # stable
    code, *lines = first.splitlines()
    rows = [line for line in lines if re.match(r"^\s*\d+(\s+\d+){6}\s", line)]
    assert code == "0" and len(rows) == 5, first
    speeds = [float(re.search(r"([\d,]+) tok/s", r).group(1).replace(",", "")) for r in rows]
    assert speeds == sorted(speeds, reverse=True)
    assert all(float(re.search(r"([\d.]+) GB", r).group(1)) <= 80 for r in rows)
    assert re.search(r"[1-9][\d,]* do not fit \(80.0 GB per device", first) and "+plan=" in first
    # 70B with AdamW states needs more than 8 x 80 GB however it is sharded: nothing to rank
    code, *lines = plan_output("model=llama2_70b", *args[1:], tmp=tmp_path).splitlines()
    assert code == "1" and lines[-1].startswith("nothing fits")


def test_a_calibration_without_a_figure_is_refused_with_the_command_to_make_one():
    cfg = compose("hardware=cpu")
    from parbench.predict.profiles import spec_calibration

    with pytest.raises(ConfigError, match="parbench calibrate hardware=cpu"):
        spec_calibration(cfg.hardware, "fp32")
    assert Calibration(intra_node=LinkFit(1e-5, 10.0)).intra_node.busbw_gbps == 10.0


@pytest.mark.slow
def test_plan_verify_runs_the_top_layouts_as_a_sweep_that_logs_predictions(cli):
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "parbench", "plan", "--verify", "2", "--out", str(cli.root / "presets"),
           "hardware=cpu", "workload.steps=3", "workload.warmup_steps=1", "profile.enabled=false",
           f"tracking.uri={cli.uri}", f"hydra.sweep.dir={cli.root / 'sweep'}"]
    proc = subprocess.run(cmd, cwd=cli.root, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    runs = cli.runs().dropna(subset=["tags.mlflow.parentRunId"])
    assert list(runs.status) == ["FINISHED", "FINISHED"]
    assert (runs["metrics.predicted_step_time_s"] > 0).all() and runs["params.parallel.name"].str.startswith("plan_").all()


@pytest.mark.slow
def test_parameters_held_under_zero_equal_the_prediction(cli):
    """DeepSpeed ZeRO-1 keeps whole parameters on each rank, ZeRO-3 a partition (ds_tensor)."""
    from parbench.parallel.specs import DEEPSPEED_INSTALL_HINT, deepspeed_installed

    assert deepspeed_installed(), f"DeepSpeed is missing: {DEEPSPEED_INSTALL_HINT} (the dev extra installs it)"
    cli.run("parallel=zero1,zero3", "profile.enabled=false", "workload.warmup_steps=1", "workload.steps=2",
            multirun=True)
    runs = cli.runs().dropna(subset=["tags.mlflow.parentRunId"])
    for parallel in ("zero1", "zero3"):
        run = runs[runs["params.parallel.name"] == parallel].iloc[0]
        cfg = compose("hardware=cpu", f"parallel={parallel}")
        assert run["metrics.params_held_gb"] == pytest.approx(predict(cfg, validate(cfg, None)).memory.params_gb)


def test_tensor_and_sequence_parallel_collectives_equal_a_real_2_rank_run(tp_sp_cp_sweep):
    """tp and sp on 2 gloo ranks, fully checkpointed, with Qwen3's q/k norms: every collective call and
    byte of the profiled steps is one the model counts (column-parallel GEMMs' input gradients one by one,
    the embedding, the head, loss_parallel, the recomputed forward, the norms' weight gradients)."""
    active = 2  # conftest's TP_SP_CP: profile.active_steps=2
    for num, parallel in enumerate(("tp", "sp")):
        measured = collectives_per_step(tp_sp_cp_sweep, num, active)
        predicted = predicted_collectives(parallel, *TP_SP_CP_RUN)
        assert measured.keys() == predicted.keys(), parallel
        for kind, (calls, nbytes) in predicted.items():
            assert measured[kind] == (pytest.approx(calls), pytest.approx(nbytes)), (parallel, kind)
