"""The profile from a calibration's measured runs (`parbench calibrate`): every figure fitted over a base profile
(`fit`), or only the host's dispatch (`fit_host_only`, `--host`: the runs whose time is the host's, training steps
and the native engine's small batches, the base's device figures kept; on another host of the same GPU those steps
move by up to 1.8x where the GPU's do not, docs/results/2026-12-07_host_probe31.md)."""

from __future__ import annotations

import time
from dataclasses import replace

from parbench.calibration_runs import (CENSUS_PREFIX, EAGER_HOST_RUNS, GROUPS, INFER_GRAPH_PREFIX, INFER_KV_RUN,
                                      INFER_TINY_PREFIX, MOE_CENSUS, benchmark_layout, benchmarks, grouped_calls,
                                      is_engine_host_run)
from parbench.config.schema import Config, ModelConfig
from parbench.dtypes import ITEMSIZE
from parbench.metrics import KERNEL_TIME
from parbench.predict.calibration import HOST_STRATEGIES, Calibration
from parbench.predict.host_fit import HostRun, fit_host
from parbench.predict.kernel_census import kernels_per_layer, priced_per_kernel
from parbench.predict.learn import InferenceRun, InferenceRuns, Run, inference_host, learn, learn_inference
from parbench.predict.step import predict_step
from parbench.predict.microbench_fits import (attention_figures, decode_attention_table, decode_gemm_figures,
                                             elementwise_table, fit_links, grouped_gemm_figures, matmul_figures,
                                             prefill_gemm_figures)

FIT_ROUNDS = 12
HOST_SOURCE = "; host figures: "


def measured_today() -> str:
    return f"measured {time.strftime('%Y-%m-%d')}"


def fit(cfg: Config, overrides: list[str], results: dict[str, dict], base: Calibration,
        when: str | None = None) -> tuple[Calibration, list[str]]:
    """The fitted figures over the base, and notes on what was kept rather than measured; `when` the runs were
    measured, for the profile's source (today, unless refitted from recorded runs). Host
    dispatch and the step's terms depend on each other on a CPU (dispatch adds to the step there):
    a few rounds settle them."""
    kept = "no link, overlap or host figures on several ranks" if base.host_s_several_ranks else "no link or overlap"
    notes = [] if "collectives" in results else [f"one device: {kept} to measure, kept from {base.label(cfg.hardware.name)}"]
    if cfg.hardware.device_type == "cuda" and "decode_matmul" not in results:
        notes.append("no decode_matmul run: a decode step's weights at the memory's bandwidth")
    if cfg.hardware.device_type == "cuda" and "prefill_matmul" not in results:
        notes.append("no prefill_matmul run: a prefill GEMM's memory side at the memory's bandwidth")
    if cfg.hardware.device_type == "cuda" and not decode_attention_table(results.get("attention", {}))["decode_attention_s"]:
        notes.append("no decode attention calls (two or more lengths at each of two or more block counts of a kind): "
                     "a decode step's KV cache at the memory's bandwidth")
    if cfg.hardware.device_type == "cuda" and f"{CENSUS_PREFIX}{MOE_CENSUS}" not in results:
        notes.append(f"no {CENSUS_PREFIX}{MOE_CENSUS} run (an MoE's prefill replays on sm90+): a replayed MoE prefill "
                     "at the calibration model's figure per layer")
    if cfg.hardware.device_type == "cuda" and not grouped_calls(results):
        notes.append("no grouped_matmul and grouped_decode_matmul runs: an MoE's experts as plain GEMMs")
    if not results.get("elementwise"):
        notes.append("no elementwise run: every element-wise kernel at the memory's bandwidth")
    matmul = matmul_figures(results["matmul"])
    # the read factors reset: without the runs that fit them the base's would stand in for this machine's; the
    # host's figures on several ranks are set once the plain ones are fitted (several_rank_host)
    cal = replace(base, source=f"{when or measured_today()}: parbench calibrate {' '.join(overrides)}",
                  weight_read_factor=1.0, kv_read_factor=1.0, dtype=cfg.workload.dtype, host_s_several_ranks={},
                  **matmul, **grouped_gemm_figures(grouped_calls(results), GROUPS, ITEMSIZE[cfg.workload.dtype]),
                  **decode_gemm_figures(results.get("decode_matmul", {}), ITEMSIZE[cfg.workload.dtype]),
                  **prefill_gemm_figures(results.get("prefill_matmul", {}), ITEMSIZE[cfg.workload.dtype]),
                  **decode_attention_table(results.get("attention", {})),
                  **attention_figures(results.get("attention", {})),
                  **elementwise_table(results.get("elementwise", {})),
                  membw_gbps=results["membw"]["membw_gbps"], memory_overhead_gb=0.0, **fit_links(cfg.hardware, results, base))
    runs = measured_runs(overrides, results)
    eager, compiled, strategies = host_runs(overrides, results)
    for _ in range(FIT_ROUNDS):
        host, host_notes = fit_host(eager, compiled, cal, strategies)
        cal, learned = learn(replace(cal, **host), runs)
    cal, inference_notes = learn_inference(cal, inference_runs(overrides, results))
    cal = priced_per_kernel(cal, *prefill_census(overrides, results))
    notes += host_notes + learned + inference_notes
    return replace(cal, notes="; ".join(notes) or None, host_s_several_ranks=several_rank_host(cfg, cal, base)), notes


def inference_runs(overrides: list[str], results: dict[str, dict]) -> InferenceRuns:
    """The native engine's runs among `results` as predict/learn.py takes them."""
    infer = {n: InferenceRun(benchmark_layout(overrides, n), m["ttft_s_p50"], m["tpot_s_p50"])
             for n, m in results.items() if n.startswith("infer_")}
    kv_cache = infer.pop(INFER_KV_RUN, None)
    tiny, graphs = ([infer.pop(n) for n in sorted(infer) if n.startswith(p)] for p in (INFER_TINY_PREFIX, INFER_GRAPH_PREFIX))
    return InferenceRuns(list(infer.values()), tiny, kv_cache, graphs)


def prefill_census(overrides: list[str], results: dict[str, dict]) -> tuple[dict[str, float], ModelConfig | None]:
    """Kernels a layer by block structure (predict/kernel_census.py), from the calibration model's depths replaying
    their prefills and the census runs of other structures; and the calibration model (None without those depths)."""
    def counts(prefix: str) -> list[tuple[ModelConfig, float]]:
        return [(benchmark_layout(overrides, n).cfg.model, m["prefill_kernels"])
                for n, m in sorted(results.items()) if n.startswith(prefix) and "prefill_kernels" in m]

    depths = counts(INFER_GRAPH_PREFIX)
    return kernels_per_layer(depths, counts(CENSUS_PREFIX)), (depths[0][0] if depths else None)


def several_rank_host(cfg: Config, cal: Calibration, base: Calibration) -> dict[str, float]:
    """host_s_several_ranks of the fitted profile: on several ranks its own figures per step and per dispatch, on one
    device the base's (one device cannot measure them)."""
    if cfg.hardware.nodes * cfg.hardware.gpus_per_node > 1:
        return {"per_step": cal.host_s_per_step, "per_dispatch": cal.host_s_per_dispatch}
    return dict(base.host_s_several_ranks)


def host_run(overrides: list[str], name: str, metrics: dict) -> HostRun:
    return HostRun(benchmark_layout(overrides, name), metrics["step_time_s"], metrics.get("host_dispatch_s"))


def host_runs(overrides: list[str], results: dict[str, dict]) -> tuple[list[HostRun], HostRun | None, dict[str, HostRun]]:
    """The host runs among `results` as predict/host_fit.py takes them: eager, compiled, and by strategy."""
    eager = [host_run(overrides, n, results[n]) for n in EAGER_HOST_RUNS if n in results]
    compiled = host_run(overrides, "host_compiled", results["host_compiled"]) if "host_compiled" in results else None
    strategies = {s: host_run(overrides, f"host_{s}", results[f"host_{s}"]) for s in HOST_STRATEGIES if f"host_{s}" in results}
    return eager, compiled, strategies


def fit_host_only(cfg: Config, overrides: list[str], results: dict[str, dict], base: Calibration,
                  when: str | None = None) -> tuple[Calibration, list[str]]:
    """The base profile with this host's dispatch figures: a host-bound step (eager, checkpointed, a small model)
    is the host's, while the GPU's figures stay the base's."""
    eager, compiled, strategies = host_runs(overrides, results)
    host, notes = fit_host(eager, compiled, base, strategies)
    cal = replace(base, **host)
    notes = [f"--host: the host's dispatch measured, every other figure kept from {base.label(cfg.hardware.name)}",
             *([host_speed(eager, base)] if eager else []), *notes]
    if missing := sorted(n for n in benchmarks(cfg) if is_engine_host_run(n) and n not in results):
        # each of the engine's figures is fitted from several of its runs: a partial set would drop or misplace some
        notes.append(f"the engine's host figures kept: no {', '.join(missing)} measured")
    else:  # the engine's host time per step and per layer, as `fit` has it
        counted, model = prefill_census(overrides, results)
        cal = priced_per_kernel(inference_host(cal, inference_runs(overrides, results)),
                                {**base.prefill_kernels_per_layer, **counted}, model)
    if cfg.hardware.device_type == "cpu":  # a CPU's step is its host's work: its terms and dispatch are fitted together
        notes.append("on a CPU the host runs the device's work too: the whole `parbench calibrate` fits both together")
    kept = base.source.split(HOST_SOURCE)[0]  # an earlier --host's figures are replaced, not listed
    source = f"{kept}{HOST_SOURCE}{when or measured_today()}: parbench calibrate --host {' '.join(overrides)}"
    return replace(cal, source=source, notes="; ".join(notes),
                   host_s_several_ranks=several_rank_host(cfg, cal, base)), notes


def host_speed(runs: list[HostRun], base: Calibration) -> str:
    """How this host's training steps compare with the whole step (device and host) the base profile predicts."""
    ratios = sorted(run.step_time_s / predict_step(run.layout, base).step_time_s for run in runs)
    return (f"this host's {len(ratios)} training steps took {ratios[0]:.2f}-{ratios[-1]:.2f}x (median "
            f"{ratios[len(ratios) // 2]:.2f}x) the time the profile gave them")


def measured_runs(overrides: list[str], results: dict[str, dict]) -> dict[str, Run]:
    """The training runs the model's terms are fitted to (predict/learn.py)."""
    return {name: Run(benchmark_layout(overrides, name), m["step_time_s"], m["mem_peak_allocated_gb"],
                      {k: v for k, v in m.items() if k == KERNEL_TIME or k.startswith(f"{KERNEL_TIME}/")})
            for name, m in results.items() if name.startswith(("eager_", "compiled_", "host_2"))}
