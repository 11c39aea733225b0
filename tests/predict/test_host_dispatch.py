"""Host dispatch in the model: each family's calls and ops counted from its own modules, their
cost fitted from the calibration's tiny runs and what a checkpointed layer adds from its Llama and
GPT-2 blocks checkpointed (on a GPU at their real widths), and on a GPU the host counted only where
it outlasts the device's work as far ahead as the launch queue lets it run. measured.json files from before the checkpointed runs still fit."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from parbench import calibrate, calibration_runs
from parbench.predict.calibration import HOST_STRATEGIES
from parbench.models.dispatch_table import dispatch_signature, family_dispatch
from parbench.paths import CONF_DIR
from parbench.prepare import validate
from parbench.config import ConfigError
from parbench.predict.calibration_file import load_calibration, save_calibration
from parbench.predict.costs import Compute
from parbench.predict.host import LAUNCH_QUEUE, Host, exposed_host_seconds, host_seconds
from parbench.metrics import KERNEL_TIME
from parbench.predict.host_fit import HostRun, fit_host
from parbench.predict.learn import Run, device_terms
from parbench.predict.layout import Layout
from parbench.predict.step import predict_step
from conftest import compose

H100 = str(CONF_DIR / "calibrations" / "h100_sxm.yaml")
RECORDED = Path(__file__).parents[2] / "docs/results/2026-11-24_predictor_accuracy/measured.json"
RECORDED_COMMAND = ["hardware=h100_sxm", "tracking.uri=sqlite:////tmp/mlflow.db", "hardware.gpus_per_node=1"]


def layout(*overrides: str) -> Layout:
    cfg = compose(*overrides)
    return Layout.of(cfg, validate(cfg, None))


def test_the_table_holds_what_each_model_dispatches_now():
    """dispatch_counts.json against a fresh count of every conf/model/*.yaml (after a change to a
    model's code: python -m parbench.models.dispatch)."""
    from parbench.models.dispatch import conf_models, count

    for name, m in conf_models().items():
        assert family_dispatch(m).signature == dispatch_signature(m), name
        fresh = count(m)
        table = family_dispatch(m)
        assert (table.per_layer.forward_calls, table.per_layer.backward_ops) == (
            fresh["per_layer"]["forward_calls"], fresh["per_layer"]["backward_ops"]), name


def test_qwen3_blocks_dispatch_more_than_llama_and_gpt2_fewer():
    llama, qwen3, gpt2 = (family_dispatch(compose(f"model={m}").model).per_layer
                          for m in ("llama3_2_1b", "qwen3_1_7b", "gpt2_xl"))
    assert qwen3.forward_calls > llama.forward_calls > gpt2.forward_calls  # q/k norms; no RoPE, fused LayerNorm
    assert qwen3.backward_ops > llama.backward_ops > gpt2.backward_ops


def test_a_checkpointed_layer_adds_its_modes_cost_per_layer_and_per_replayed_call_to_the_backward():
    cal = replace(load_calibration(H100), host_s_per_dispatch=10e-6, host_s_per_replayed_call={"full": 60e-6},
                  host_s_per_replayed_layer={"full": 2e-3})
    base = ["hardware=h100_sxm", "hardware.gpus_per_node=1", "model=qwen3_1_7b"]
    none, full, selective = (host_seconds(layout(*base, f"workload.activation_checkpointing={ac}"), cal)
                             for ac in ("none", "full", "selective"))
    calls = family_dispatch(compose(*base).model).per_layer.forward_calls
    assert full.forward_s == none.forward_s
    assert full.backward_s - none.backward_s == pytest.approx(28 * (2e-3 + 60e-6 * calls))
    assert (selective.forward_s, selective.backward_s, selective.step_s) == (none.forward_s, none.backward_s, none.step_s)
    assert selective.backward_dispatches > none.backward_dispatches  # no figure for the mode: nothing added, but it queues the replay


def test_an_moe_layer_adds_its_figure_split_as_its_calls_and_ops_and_a_replay_repeats_the_forward_share():
    cal = replace(load_calibration(H100), host_s_per_dispatch=10e-6, host_s_per_replayed_call={}, host_s_per_replayed_layer={})
    base = ["hardware=h100_sxm", "hardware.gpus_per_node=1", "model=moe_2_5b"]
    counted, none, full = (host_seconds(layout(*base, f"workload.activation_checkpointing={ac}"), replace(cal, host_s_per_moe_layer=m))
                           for ac, m in (("none", 0.0), ("none", 3e-3), ("full", 3e-3)))
    layer = family_dispatch(compose(*base).model).per_layer
    share = layer.forward_calls / (layer.forward_calls + layer.backward_ops)
    assert none.forward_s - counted.forward_s == pytest.approx(16 * 3e-3 * share)
    assert none.backward_s - counted.backward_s == pytest.approx(16 * 3e-3 * (1 - share))
    assert full.backward_s - none.backward_s == pytest.approx(16 * 3e-3 * share)  # no figure of its own for the mode
    for unchanged in (layout("hardware=h100_sxm", "hardware.gpus_per_node=1", "model=llama3_2_1b"),
                      layout(*base, "workload.compile=true")):  # a dense model; a compiled step's figure per layer
        assert host_seconds(unchanged, replace(cal, host_s_per_moe_layer=3e-3)) == host_seconds(unchanged, cal)


def test_an_moe_the_table_lacks_takes_another_moe_entry_of_its_family():
    moe = compose("model=moe_2_5b").model
    for features in ({"experts": 16}, {"top_k": 1}, {"qk_norm": True}):
        assert "+moe" in family_dispatch(replace(moe, **features)).signature, features
    assert family_dispatch(compose("model=qwen3_1_7b").model).signature == "llama+qk_norm"


def synthetic_runs(cal, names: tuple[str, ...], overrides: list[str]) -> list[HostRun]:
    return [HostRun(lay := calibration_runs.benchmark_layout(overrides, n), predict_step(lay, cal).step_time_s) for n in names]


def test_the_host_fit_recovers_per_step_per_dispatch_and_per_checkpointed_layer_costs():
    """CPU steps made by the model with known costs give them back: a replayed layer's cost per layer and per call
    from the Llama's, GPT-2's, Qwen3's and the MoE's checkpointed blocks (the MoE's own figure beyond its counts
    first), per call alone from one family's; checkpointed runs alone
    cannot fix a cost per dispatch, and say so."""
    per_call, per_layer = {"full": 40e-6, "selective": 90e-6}, {"full": 1.5e-3, "selective": 3e-3}
    truth = replace(load_calibration("cpu"), host_s_per_step=3e-3, host_s_per_dispatch=8e-6,
                    host_s_per_replayed_call=per_call, host_s_per_replayed_layer=per_layer, host_s_per_moe_layer=2e-3)
    runs = synthetic_runs(truth, calibration_runs.EAGER_HOST_RUNS, ["hardware=cpu"])
    fitted, notes = fit_host(runs, None, replace(truth, host_s_per_moe_layer=0.0))
    assert [fitted["host_s_per_step"], fitted["host_s_per_dispatch"]] == pytest.approx([3e-3, 8e-6], rel=1e-6)
    assert fitted["host_s_per_replayed_call"] == pytest.approx(per_call, rel=1e-6)
    assert fitted["host_s_per_replayed_layer"] == pytest.approx(per_layer, rel=1e-6)
    assert fitted["host_s_per_moe_layer"] == pytest.approx(2e-3, rel=1e-6)  # the MoE's run left out of the dense fit
    assert not notes
    fitted, notes = fit_host([r for r in runs if not r.layout.cfg.model.experts], None, truth)
    assert "host_s_per_moe_layer" not in fitted and notes == ["host dispatch: no host_moe run; kept 2 ms"]
    llama_only = [r for r in runs if r.layout.dispatch.signature == "llama" or r.layout.activation_checkpointing == "none"]
    fitted, _ = fit_host(llama_only, None, truth)
    calls = family_dispatch(compose("model=tiny").model).per_layer.forward_calls
    assert fitted["host_s_per_replayed_layer"] == {"full": 0.0, "selective": 0.0}
    assert fitted["host_s_per_replayed_call"] == pytest.approx({m: per_call[m] + per_layer[m] / calls for m in per_call})
    checkpointed = [r for r in runs if r.layout.activation_checkpointing != "none"]
    fitted, notes = fit_host(checkpointed, None, truth)
    assert not fitted and "do not fix a cost per step and per dispatch" in notes[0]


def test_the_host_fit_recovers_what_tp_and_fsdp_add_per_dispatch():
    """On two CPU ranks the calibration runs the deeper tiny host run under tp and fsdp as well; made by the model
    with known costs per dispatch beyond a plain step's, they give them back. A dp step takes neither, a tp step
    its own per dispatch; one rank has no such runs."""
    assert {f"host_{s}" for s in HOST_STRATEGIES} <= set(calibrate.benchmarks(compose("hardware=cpu")))
    assert not {f"host_{s}" for s in HOST_STRATEGIES} & set(calibrate.benchmarks(compose("hardware=cpu", "hardware.gpus_per_node=1")))
    extra = {"tp": 60e-6, "sp": 90e-6, "fsdp": 12e-6, "cp": 30e-6}
    truth = replace(load_calibration("cpu"), host_s_per_step=3e-3, host_s_per_dispatch=8e-6, host_s_per_dispatch_by_strategy=extra,
                    host_s_per_moe_layer=1e-3)
    runs = synthetic_runs(truth, calibration_runs.EAGER_HOST_RUNS, ["hardware=cpu"])
    strategies = dict(zip(HOST_STRATEGIES, synthetic_runs(truth, tuple(f"host_{s}" for s in HOST_STRATEGIES), ["hardware=cpu"])))
    fitted, notes = fit_host(runs, None, replace(truth, host_s_per_dispatch_by_strategy={}), strategies)
    assert fitted["host_s_per_dispatch_by_strategy"] == pytest.approx(extra, rel=1e-6) and not notes
    plain = replace(truth, host_s_per_dispatch_by_strategy={})
    assert host_seconds(layout("hardware=cpu"), truth) == host_seconds(layout("hardware=cpu"), plain)  # dp
    unit = replace(plain, host_s_per_dispatch=1.0, host_s_per_step=0.0)
    for parallel, strategies in (("tp", ["tp"]), ("sp", ["sp"]), ("cp", ["cp"]), ("fsdp_tp", ["tp", "fsdp"])):
        lay = layout("hardware=cpu", "hardware.gpus_per_node=4", f"parallel={parallel}")
        added = host_seconds(lay, truth).total_s - host_seconds(lay, plain).total_s
        assert added == pytest.approx(sum(extra[s] for s in strategies) * host_seconds(lay, unit).total_s), parallel


def test_a_step_on_several_ranks_takes_the_several_ranks_host_figures():
    """A profile that holds the host's figures on several ranks (a two-GPU calibration's) prices a two-rank eager step
    with them, the strategies' costs on top, and a one-rank step with its own; without them both take the plain ones."""
    plain = replace(load_calibration(H100), host_s_per_step=5e-3, host_s_per_dispatch=5e-6,
                    host_s_per_dispatch_by_strategy={"tp": 50e-6})
    several = replace(plain, host_s_several_ranks={"per_step": 3e-3, "per_dispatch": 13e-6})
    one = layout("hardware=h100_sxm", "hardware.gpus_per_node=1", "model=llama3_2_1b")
    assert host_seconds(one, several) == host_seconds(one, plain)
    unit = replace(plain, host_s_per_step=0.0, host_s_per_dispatch=1.0, host_s_per_dispatch_by_strategy={})
    for parallel, extra in (("dp", 0.0), ("tp", 50e-6)):
        two = layout("hardware=h100_sxm", "hardware.gpus_per_node=2", "model=llama3_2_1b", f"parallel={parallel}")
        dispatches = host_seconds(two, unit).total_s
        assert host_seconds(two, plain).total_s == pytest.approx(5e-3 + (5e-6 + extra) * dispatches), parallel
        assert host_seconds(two, several).total_s == pytest.approx(3e-3 + (13e-6 + extra) * dispatches), parallel


@pytest.mark.parametrize("figures", [{"per_step": 3e-3}, {"per_step": 3e-3, "per_dispatch": -1e-6},
                                     {"per_step": 3e-3, "per_layer": 1e-6}])
def test_a_profile_whose_several_ranks_figures_are_not_a_step_and_a_dispatch_is_refused(tmp_path, figures):
    path = save_calibration(replace(load_calibration("cpu"), host_s_several_ranks=figures), tmp_path / "bad.yaml")
    with pytest.raises(ConfigError, match=r"host_s_several_ranks = .*give per_step and per_dispatch"):
        load_calibration(str(path))


def test_on_a_gpu_the_dispatch_counts_only_where_it_outlasts_the_kernels():
    """1B Llama, seq 2048 x 2: at the H100's cost per dispatch its kernels hide the host; at ten
    times that the step lasts at least its whole dispatch. A CPU adds all of it."""
    lay = layout("hardware=h100_sxm", "hardware.gpus_per_node=1", "model=llama3_2_1b", "workload.seq_len=2048",
                 "workload.batch_size=2")
    shipped = load_calibration(H100)
    assert predict_step(lay, shipped).host_s == 0.0
    compiled = layout("hardware=h100_sxm", "hardware.gpus_per_node=1", "model=qwen3_1_7b", "workload.seq_len=8192",
                      "workload.batch_size=1", "workload.compile=true", "workload.activation_checkpointing=selective")
    assert not predict_step(compiled, shipped).host_bound  # the step less its device work is not a rounding's waits
    slow = replace(shipped, host_s_per_dispatch=10 * shipped.host_s_per_dispatch)
    p = predict_step(lay, slow)
    assert p.host_s > 0 and p.step_time_s >= host_seconds(lay, slow).total_s and p.bottleneck == "host dispatch"
    cpu = layout("hardware=cpu")
    assert predict_step(cpu, slow).host_s == pytest.approx(host_seconds(cpu, slow).total_s)  # a CPU: all of it


@pytest.mark.parametrize("change", [("model.layers=2", "model.layers=4"),
                                    ("workload.activation_checkpointing=none", "workload.activation_checkpointing=full")])
def test_the_host_term_moves_the_tiny_models_step_in_the_measured_direction(change):
    """The shipped H100 profile: the tiny model (all host on a GPU) measured 5.8 ms at 2 layers and
    10.6 ms at 4 in its calibration (docs/results/2026-12-07_loop31.md); deeper and checkpointed steps dispatch more. The
    host costs are fitted by least squares over four tiny runs (two depths, GPT-2 and Qwen3 shapes)
    whose step times spread 10-25 % from p10 to p90, so the two runs are met within 20 %, not exactly."""
    cal = load_calibration(H100)
    before, after = (predict_step(layout("hardware=h100_sxm", "hardware.gpus_per_node=1", c), cal).step_time_s
                     for c in change)
    assert after > before
    if change[0] == "model.layers=2":
        assert (before, after) == pytest.approx((5.8e-3, 10.6e-3), rel=0.2)


def test_a_measured_json_from_before_the_new_host_runs_fits_and_resumes_with_only_those(monkeypatch, tmp_path, capsys):
    """The recorded H100 measured.json (13 runs): --fit-only makes a profile with a cost per
    dispatch; the calibrate command that made it measures only runs it does not hold as they are now."""
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(RECORDED, work / calibrate.MEASURED_FILE)
    out = tmp_path / "h100.yaml"
    args = [*RECORDED_COMMAND, "--work", str(work), "--out", str(out)]
    assert calibrate.main([*args, "--fit-only"]) == 0
    assert load_calibration(str(out)).host_s_per_dispatch > 0
    ran = []

    def fake(cmd, **kwargs):
        if "parbench" not in cmd:
            return subprocess.CompletedProcess(cmd, 0, "", "")
        ran.append(cmd)
        raise KeyboardInterrupt  # stop at the first run it would measure
    monkeypatch.setattr(subprocess, "run", fake)
    assert calibrate.main(args) == 130
    name = Path(next(a for a in ran[0] if a.startswith("hydra.run.dir="))).name
    before = json.loads(RECORDED.read_text()).get(name, {}).get("args")
    assert not calibrate.same_run(before, ran[0][ran[0].index("parbench") + 1:])


@pytest.mark.parametrize("compiled", [False, True])
def test_a_gpus_idle_gaps_add_per_step_and_per_dispatch_or_layer_pass(compiled):
    """An eager step idles per dispatch (its calls, ops and a full checkpoint's replayed calls), a
    compiled one per layer pass; a profile without the figures (every CPU's) adds nothing."""
    case = layout("hardware=h100_sxm", "hardware.gpus_per_node=1", "parallel=dp", "model=llama3_2_1b",
                  "workload.seq_len=2048", "workload.batch_size=2", f"workload.compile={str(compiled).lower()}",
                  "workload.activation_checkpointing=full")
    idle = {"eager": {"per_step": 2e-3, "per_dispatch": 1e-6}, "compiled": {"per_step": 1e-3, "per_layer": 2e-4}}
    bare = replace(load_calibration(H100), device_idle_s={})
    with_idle = predict_step(case, replace(bare, device_idle_s=idle))
    counts = case.dispatch
    layers = case.cfg.model.layers
    dispatches = (2 * counts.per_layer.forward_calls + counts.per_layer.backward_ops) * layers + \
        counts.per_step.forward_calls + counts.per_step.backward_ops
    expected = 1e-3 + 2e-4 * layers if compiled else 2e-3 + 1e-6 * dispatches
    assert with_idle.idle_s == pytest.approx(expected) and predict_step(case, bare).idle_s == 0
    assert with_idle.step_time_s - predict_step(case, bare).step_time_s == pytest.approx(expected)  # device-bound


def test_a_host_bound_step_has_its_launch_gaps_inside_its_dispatch():
    """128 tokens of the tiny model, eager: the device waits on the host's dispatch, so the gaps between
    its kernels add nothing."""
    bare = replace(load_calibration(H100), device_idle_s={})
    idle = replace(bare, device_idle_s={"eager": {"per_step": 0.0, "per_dispatch": 1e-6}})
    tiny = layout("hardware=h100_sxm", "hardware.gpus_per_node=1", "parallel=dp", "model=tiny", "workload.seq_len=128",
                  "workload.batch_size=1")
    assert predict_step(tiny, idle).host_bound
    assert predict_step(tiny, idle).step_time_s == pytest.approx(predict_step(tiny, bare).step_time_s)


# A step of 100 ms of kernels: 40 in the forward (2,048 of them, so the queue holds half: 20 ms), 60 in the backward.
STEP_COMPUTE = Compute(matmul_s=0.090, attention_s=0.0, elementwise_s=0.0, optimizer_s=0.010, recompute_s=0.0)


@pytest.mark.parametrize("host_forward, host_backward, host_step, step", [
    (0.010, 0.050, 0.0, 0.100), (0.010, 0.075, 0.0, 0.100), (0.010, 0.090, 0.0, 0.110), (0.010, 0.150, 0.0, 0.170),
    (0.080, 0.010, 0.0, 0.125), (0.080, 0.010, 0.005, 0.130)])
def test_the_host_runs_ahead_by_what_the_launch_queue_holds(host_forward, host_backward, host_step, step):
    """A fast forward's dispatch (10 ms) puts the host ahead; a slow backward's is covered while the forward's
    queued kernels (20 ms of them) last: up to 80 ms with the device's 60 ms, and 90 ms waits 10. A dispatch
    longer than the step's kernels is the step, with the 10 ms the host waits in the forward for room in the queue.
    A slow forward's dispatch (80 ms) starts once a quarter of the backward's kernels (15 ms) are left, after the
    loop's and the optimizer's launch (step_s)."""
    assert LAUNCH_QUEUE == 1024
    host = Host(host_forward, host_backward, host_step, forward_dispatches=2048, backward_dispatches=4096)
    assert STEP_COMPUTE.total_s + exposed_host_seconds(STEP_COMPUTE, 0.0, host, on_cpu=False) == pytest.approx(step)


def test_exposed_communication_follows_the_backwards_wait_for_its_dispatch():
    """The backward's last kernels wait for the host (110 ms of kernels and dispatch, as above); the gradients'
    all-reduce that nothing hides (5 ms) runs after them."""
    host = Host(0.010, 0.090, 0.0, forward_dispatches=2048, backward_dispatches=4096)
    assert STEP_COMPUTE.total_s + 0.005 + exposed_host_seconds(STEP_COMPUTE, 0.005, host, on_cpu=False) \
        == pytest.approx(0.115)


def test_a_dispatch_not_split_by_phase_counts_against_the_whole_step():
    """A compiled step's dispatch (or a family's without counts) is one figure: the longer of it and the kernels."""
    for host_s, step in ((0.080, 0.100), (0.130, 0.130)):
        assert STEP_COMPUTE.total_s + exposed_host_seconds(STEP_COMPUTE, 0.0, Host(0.0, 0.0, host_s), on_cpu=False) \
            == pytest.approx(step)


def test_the_idle_fit_leaves_out_what_the_model_counts_as_communication():
    """On two GPUs the profiled runs' step beyond their kernels holds the exposed all-reduce too: the fit
    takes the model's exposed communication off before it sets the idle figures."""
    truth = replace(load_calibration(H100), optimizer_factor=1.2,
                    device_idle_s={"eager": {"per_step": 2e-3, "per_dispatch": 0.8e-6},
                                   "compiled": {"per_step": 1.5e-3, "per_layer": 0.15e-3}})
    two = ["hardware=h100_sxm", "hardware.gpus_per_node=2"]
    runs = {}
    for name in ("eager_none", "eager_deep", "compiled_none", "compiled_deep"):
        run_layout = calibration_runs.benchmark_layout(two, name)
        p = predict_step(run_layout, truth)
        assert p.exposed_comm_s > 0
        runs[name] = Run(run_layout, p.step_time_s, p.memory.total_gb,
                         {KERNEL_TIME: p.compute.total_s, f"{KERNEL_TIME}/optimizer": p.compute.optimizer_s})
    fitted, notes = device_terms(replace(truth, optimizer_factor=1.0, device_idle_s={}), runs)
    assert not notes and fitted.optimizer_factor == pytest.approx(1.2)
    for mode, figures in truth.device_idle_s.items():
        assert fitted.device_idle_s[mode] == pytest.approx(figures, rel=1e-6), mode


def test_a_gpu_calibration_without_kernel_times_keeps_the_device_figures_and_says_so():
    one = ["hardware=h100_sxm", "hardware.gpus_per_node=1"]
    shipped = load_calibration(H100)
    runs = {"eager_none": Run(calibration_runs.benchmark_layout(one, "eager_none"), 0.1, 30.0)}
    cal, notes = device_terms(shipped, runs)
    assert cal == shipped and "no run timed its kernels" in notes[0]


def test_the_optimizer_factor_scales_the_optimizers_time():
    case = layout("hardware=h100_sxm", "hardware.gpus_per_node=1", "parallel=dp", "model=llama3_2_1b")
    bare = load_calibration(H100)
    slow = predict_step(case, replace(bare, optimizer_factor=2 * bare.optimizer_factor)).compute.optimizer_s
    assert slow == pytest.approx(2 * predict_step(case, bare).compute.optimizer_s)


def test_a_gpu_calibration_profiles_its_none_runs_and_runs_them_at_twice_the_depth():
    gpu = calibrate.benchmarks(compose("hardware=h100_sxm", "hardware.gpus_per_node=1", "workload=train"))
    for mode in ("eager", "compiled"):
        deep = gpu[f"{mode}_deep"]
        keys = [o.split("=", 1)[0] for o in deep]
        assert len(keys) == len(set(keys)) and "model.layers=16" in deep and "profile.enabled=true" in deep
        assert "profile.enabled=true" in gpu[f"{mode}_none"] and "profile.enabled=false" in gpu[f"{mode}_qk_norm"]
    cpu = calibrate.benchmarks(compose("hardware=cpu", "workload=train"))
    assert "eager_deep" not in cpu and "profile.enabled=false" in cpu["eager_none"]


@pytest.mark.parametrize("costs", [{"dp": 1e-6}, {"tp": -1e-6}])
def test_a_profile_whose_strategy_costs_name_no_strategy_or_go_negative_is_refused(tmp_path, costs):
    path = save_calibration(replace(load_calibration("cpu"), host_s_per_dispatch_by_strategy=costs), tmp_path / "bad.yaml")
    with pytest.raises(ConfigError, match=r"host_s_per_dispatch_by_strategy = .*key each figure by a strategy"):
        load_calibration(str(path))


@pytest.mark.parametrize("field,figures", [("host_s_per_replayed_call", {"ful": 1e-6}),
                                           ("host_s_per_replayed_layer", {"selective": -1e-3})])
def test_a_profile_whose_replay_figures_name_no_mode_or_go_negative_is_refused(tmp_path, field, figures):
    path = save_calibration(replace(load_calibration("cpu"), **{field: figures}), tmp_path / "bad.yaml")
    with pytest.raises(ConfigError, match=rf"{field} = .*key each figure by a checkpointing mode"):
        load_calibration(str(path))


def test_a_profile_whose_moe_layer_figure_goes_negative_is_refused(tmp_path):
    path = save_calibration(replace(load_calibration("cpu"), host_s_per_moe_layer=-1e-3), tmp_path / "bad.yaml")
    with pytest.raises(ConfigError, match=r"host_s_per_moe_layer = -0.001: give 0 or more"):
        load_calibration(str(path))


def test_a_gpus_checkpointed_host_runs_are_four_block_structures_at_their_widths():
    """On a GPU a replay costs more at a real width than at the tiny model's: the checkpointed host runs take the
    1B Llama's, GPT-2 XL's, Qwen3 1.7B's and the 2.5B MoE's own blocks (55, 25, 61 and 117 calls a layer), 4 layers
    each; a CPU takes the tiny shapes."""
    gpu = calibrate.benchmarks(compose("hardware=h100_sxm", "hardware.gpus_per_node=1", "workload=train"))
    cpu = calibrate.benchmarks(compose("hardware=cpu", "workload=train"))
    for mode in ("full", "selective"):
        for name, model in ((f"host_{mode}", "llama3_2_1b"), (f"host_gpt2_{mode}", "gpt2_xl"),
                            (f"host_qwen3_{mode}", "qwen3_1_7b"), (f"host_moe_{mode}", "moe_2_5b")):
            assert [o for o in gpu[name] if o.startswith("model")] == [f"model={model}", "model.layers=4"], name
            assert f"workload.activation_checkpointing={mode}" in gpu[name] and "model.hidden=64" not in gpu[name]
        assert "model=tiny" in cpu[f"host_{mode}"] and "model.hidden=64" in cpu[f"host_gpt2_{mode}"]
        assert "model.qk_norm=true" in cpu[f"host_qwen3_{mode}"] and "model=tiny_moe" in cpu[f"host_moe_{mode}"]


@pytest.mark.parametrize("gpt2_beyond", [0.0, 4e-3])
def test_checkpointed_runs_that_price_a_replay_at_nothing_keep_the_replay_figures_and_say_so(gpt2_beyond):
    """Runs no slower than their plain dispatch, or whose line through the two families prices a replayed layer at
    nothing (the Llama's faster than its plain dispatch, GPT-2's slower: a CPU's noise), keep the figures there were."""
    truth = replace(load_calibration("cpu"), host_s_per_step=3e-3, host_s_per_dispatch=8e-6,
                    host_s_per_replayed_call={}, host_s_per_replayed_layer={})
    runs = [replace(r, step_time_s=r.step_time_s + (gpt2_beyond if r.layout.cfg.model.family == "gpt2" else -gpt2_beyond))
            if r.layout.activation_checkpointing != "none" else r
            for r in synthetic_runs(truth, calibration_runs.EAGER_HOST_RUNS, ["hardware=cpu"])]
    kept = {"full": 50e-6}
    fitted, notes = fit_host(runs, None, replace(truth, host_s_per_replayed_call=kept))
    assert fitted["host_s_per_replayed_call"] == kept and fitted["host_s_per_replayed_layer"] == {}
    replay_notes = [n for n in notes if "replay" in n]  # beside the MoE's: its run no slower than its counts (truth: 0)
    assert len(replay_notes) == 2 and all("kept the replay figures" in n for n in replay_notes)
