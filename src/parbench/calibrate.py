"""`parbench calibrate [--out FILE | --ship] [--fresh] [overrides]`: on this machine's devices (resolved
as a run resolves them), run the microbenchmarks (matmul, memory bandwidth; collectives and two
profiled training runs for the overlap where there is more than one device), a model's training
step eager and compiled under each checkpointing mode and at a 4x longer sequence, and the tiny
model at two depths and, on two or more devices, under tp and fsdp (host dispatch); fit the performance model's figures to them
(predict/learn.py), save the profile and log it to MLflow. docs/plan.md describes the fits.

Each finished run's metrics are kept in <work>/measured.json as it ends, so a failure or Ctrl-C
loses nothing and the same command continues with the next run. The profile goes to the user's
profile directory (~/.cache/parbench/calibrations/<hardware>.yaml, which runs read before the
shipped one); `--ship` writes the shipped conf/calibrations/<hardware>.yaml instead."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from parbench.config import ConfigError
from parbench.config.hardware import detect_gpus
from parbench.config.schema import Config, ModelConfig
from parbench.dtypes import ITEMSIZE
from parbench.fmt import format_metric
from parbench.metrics import KERNEL_TIME
from parbench.paths import RESULTS_FILE, write_json_atomic
from parbench.planner import compose_config
from parbench.predict.calibration import HOST_STRATEGIES, Calibration
from parbench.predict.calibration_file import (CALIBRATION_DIR, calibration_path, load_calibration, save_calibration,
                                              user_calibration_dir)
from parbench.predict.profiles import calibration_for
from parbench.predict.host_fit import HostRun, fit_host
from parbench.predict.kernel_census import kernels_per_layer, priced_per_kernel
from parbench.predict.learn import InferenceRun, InferenceRuns, Run, learn, learn_inference
from parbench.predict.microbench_fits import (attention_figures, decode_attention_table, decode_gemm_figures,
                                             elementwise_table, fit_links, grouped_gemm_figures, matmul_figures,
                                             prefill_gemm_figures)
from parbench.calibration_summary import summary
from parbench.calibration_runs import (CENSUS_PREFIX, MOE_CENSUS, EAGER_HOST_RUNS, GROUPS, INFER_GRAPH_PREFIX, INFER_KV_RUN,
                                      INFER_TINY_PREFIX, benchmark_layout, benchmarks, grouped_calls)

FIT_ROUNDS = 12
MEASURED_FILE = "measured.json"


class RunFailed(Exception):
    pass


def run_one(name: str, cmd: list[str], job_dir: Path) -> dict:
    """One benchmark through the real CLI; its metrics."""
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
        raise RunFailed(f"calibration run {name} failed (exit {proc.returncode}); its job dir: {job_dir}\n{tail}")
    return json.loads((job_dir / RESULTS_FILE).read_text())["metrics"]


def same_run(before: list[str] | None, now: list[str]) -> bool:
    """The same overrides in any order, wherever the job dir was (a measured.json moved to another --work)."""
    def what(args: list[str] | None) -> list[str] | None:
        return args and sorted(a for a in args if not a.startswith("hydra.run.dir="))
    return before is not None and what(before) == what(now)


def run_all(overrides: list[str], runs: dict[str, list[str]], work: Path) -> dict[str, dict]:
    """Each benchmark one after the other; name -> its metrics. What <work>/measured.json holds
    from an earlier call with the same command is kept, each new result is added as it ends."""
    work.mkdir(parents=True, exist_ok=True)
    ledger = work / MEASURED_FILE
    measured = json.loads(ledger.read_text()) if ledger.exists() else {}
    results = {}
    for i, (name, extra) in enumerate(runs.items(), 1):
        # resume=false: a calibration measures now, even where the store has the same config FINISHED
        args = [*overrides, *extra, "resume=false", f"hydra.run.dir={work / name}"]
        if same_run(measured.get(name, {}).get("args"), args):
            print(f"[calibrate] {i}/{len(runs)} {name}: measured before, kept ({work / name})", flush=True)
            results[name] = measured[name]["metrics"]
            continue
        print(f"[calibrate] {i}/{len(runs)} {name}: python -m parbench {' '.join(extra)}", flush=True)
        start = time.monotonic()
        results[name] = run_one(name, [sys.executable, "-m", "parbench", *args], work / name)
        measured[name] = {"args": args, "metrics": results[name]}
        write_json_atomic(ledger, measured)
        print(f"[calibrate]   done in {format_metric('duration_s', time.monotonic() - start)}", flush=True)
    return results


def recorded(work: Path, runs: dict[str, list[str]]) -> dict[str, dict]:
    """What <work>/measured.json holds of today's runs, by name, whatever their overrides were
    (--fit-only); the runs a calibration no longer makes are left out, and named."""
    ledger = work / MEASURED_FILE
    if not ledger.exists():
        raise ConfigError(f"--fit-only: {ledger} does not exist; name the --work of a calibration that measured runs")
    measured = json.loads(ledger.read_text())
    if gone := sorted(set(measured) - set(runs)):
        print(f"[calibrate] left out (no longer a calibration run): {', '.join(gone)}", flush=True)
    return {name: entry["metrics"] for name, entry in measured.items() if name in runs}


def fit(cfg: Config, overrides: list[str], results: dict[str, dict], base: Calibration) -> tuple[Calibration, list[str]]:
    """The fitted figures over the base, and notes on what was kept rather than measured. Host
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
    cal = replace(base, source=f"measured {time.strftime('%Y-%m-%d')}: parbench calibrate {' '.join(overrides)}",
                  weight_read_factor=1.0, kv_read_factor=1.0, dtype=cfg.workload.dtype, host_s_several_ranks={},
                  **matmul, **grouped_gemm_figures(grouped_calls(results), GROUPS, ITEMSIZE[cfg.workload.dtype]),
                  **decode_gemm_figures(results.get("decode_matmul", {}), ITEMSIZE[cfg.workload.dtype]),
                  **prefill_gemm_figures(results.get("prefill_matmul", {}), ITEMSIZE[cfg.workload.dtype]),
                  **decode_attention_table(results.get("attention", {})),
                  **attention_figures(results.get("attention", {})),
                  **elementwise_table(results.get("elementwise", {})),
                  membw_gbps=results["membw"]["membw_gbps"], memory_overhead_gb=0.0, **fit_links(cfg.hardware, results, base))
    runs = measured_runs(overrides, results)
    eager = [host_run(overrides, n, results[n]) for n in EAGER_HOST_RUNS if n in results]
    compiled = host_run(overrides, "host_compiled", results["host_compiled"]) if "host_compiled" in results else None
    strategies = {s: host_run(overrides, f"host_{s}", results[f"host_{s}"]) for s in HOST_STRATEGIES if f"host_{s}" in results}
    for _ in range(FIT_ROUNDS):
        host, host_notes = fit_host(eager, compiled, cal, strategies)
        cal, learned = learn(replace(cal, **host), runs)
    infer = {n: InferenceRun(benchmark_layout(overrides, n), m["ttft_s_p50"], m["tpot_s_p50"])
             for n, m in results.items() if n.startswith("infer_")}
    kv_cache = infer.pop(INFER_KV_RUN, None)
    tiny, graphs = ([infer.pop(n) for n in sorted(infer) if n.startswith(p)] for p in (INFER_TINY_PREFIX, INFER_GRAPH_PREFIX))
    cal, inference_notes = learn_inference(cal, InferenceRuns(list(infer.values()), tiny, kv_cache, graphs))
    cal = priced_per_kernel(cal, *prefill_census(overrides, results))
    notes += host_notes + learned + inference_notes
    return replace(cal, notes="; ".join(notes) or None, host_s_several_ranks=several_rank_host(cfg, cal, base)), notes


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


def measured_runs(overrides: list[str], results: dict[str, dict]) -> dict[str, Run]:
    """The training runs the model's terms are fitted to (predict/learn.py)."""
    return {name: Run(benchmark_layout(overrides, name), m["step_time_s"], m["mem_peak_allocated_gb"],
                      {k: v for k, v in m.items() if k == KERNEL_TIME or k.startswith(f"{KERNEL_TIME}/")})
            for name, m in results.items() if name.startswith(("eager_", "compiled_", "host_2"))}


def log_to_mlflow(cfg: Config, cal: Calibration, path: Path) -> None:
    from parbench.tracking.store import Store  # mlflow: only once there is something to record

    store = Store(cfg.tracking.uri, cfg.tracking.experiment)
    run_id = store.create_run(f"calibration {cfg.hardware.name}", {"kind": "calibration",
                                                                 "calibration_source": cal.source}, None)
    store.log_metrics(run_id, {"calibration_matmul_tflops": cal.matmul_tflops, "calibration_membw_gbps": cal.membw_gbps,
                               "calibration_link_busbw_gbps": cal.intra_node.busbw_gbps,
                               "calibration_link_latency_s": cal.intra_node.latency_s,
                               "calibration_host_s_per_step": cal.host_s_per_step,
                               "calibration_host_s_per_dispatch": cal.host_s_per_dispatch,
                               "calibration_host_s_per_moe_layer": cal.host_s_per_moe_layer,
                               **{f"calibration_host_s_per_replayed_{unit}_{mode}": s
                                  for unit, figures in (("layer", cal.host_s_per_replayed_layer),
                                                        ("call", cal.host_s_per_replayed_call))
                                  for mode, s in figures.items()}})
    store.log_artifacts(run_id, [path])
    store.finish(run_id, ok=True)


def base_calibration(cfg: Config) -> Calibration:
    """What the runs do not measure (the other link scope, strategies other than dp/fsdp) comes from the current
    profile, else (one this parbench cannot read, as an older version's) the shipped profile, else the spec figures;
    blank where the hardware config has none."""
    try:
        return replace(calibration_for(cfg.hardware, cfg.workload.dtype, None), hardware=cfg.hardware.name)
    except ConfigError as e:
        shipped = CALIBRATION_DIR / f"{cfg.hardware.name}.yaml"
        if calibration_path(cfg.hardware.name) != shipped and shipped.exists():
            print(f"[calibrate] {e}: what no run here measures starts from {shipped}", flush=True)
            return replace(load_calibration(str(shipped)), hardware=cfg.hardware.name)
        return Calibration(hardware=cfg.hardware.name)


def local_config(overrides: list[str]) -> tuple[Config, list[str]]:
    """The config as a run on this machine resolves it (hardware=auto, gpus_per_node=-1 from the
    local GPUs), and the overrides with the resolved hardware pinned, so that every run and every
    later compose of a run's config agree on it."""
    cfg = compose_config([*overrides, "workload=train"], detect_gpus())
    hw = cfg.hardware
    pinned = [o for o in overrides if not o.startswith(("hardware=", "hardware.gpus_per_node="))]
    chosen = [o for o in overrides if o.startswith("hardware=") and o != "hardware=auto"]
    name = chosen[-1] if chosen else f"hardware={hw.name}"
    return cfg, [name, *pinned, f"hardware.gpus_per_node={hw.gpus_per_node}"]


def profile_path(args: argparse.Namespace, hardware: str) -> Path:
    """--out, else the shipped profile with --ship, else the user's profile directory."""
    if args.out:
        return args.out
    return (CALIBRATION_DIR if args.ship else user_calibration_dir()) / f"{hardware}.yaml"


def calibrate(args: argparse.Namespace) -> int:
    cfg, overrides = local_config(args.overrides)
    work = args.work or Path("outputs/calibrate") / f"{cfg.hardware.name}_{cfg.hardware.nodes}x{cfg.hardware.gpus_per_node}"
    if args.fresh and (work / MEASURED_FILE).exists():
        (work / MEASURED_FILE).unlink()
    runs = benchmarks(cfg)
    try:
        results = recorded(work, runs) if args.fit_only else run_all(overrides, runs, work)
    except KeyboardInterrupt:
        done = len(json.loads((work / MEASURED_FILE).read_text())) if (work / MEASURED_FILE).exists() else 0
        print(f"\n[calibrate] interrupted after {done} of {len(runs)} runs; the same command continues with "
              f"the next (kept in {work / MEASURED_FILE})", file=sys.stderr)
        return 130
    cal, notes = fit(cfg, overrides, results, base_calibration(cfg))
    if args.fit_only:  # the figures are the recorded runs', not today's
        cal = replace(cal, source=cal.source.replace("measured", "runs measured earlier, refitted", 1))
    path = save_calibration(cal, profile_path(args, cfg.hardware.name))
    print(summary(cfg, cal, notes, path), flush=True)
    try:
        log_to_mlflow(cfg, cal, path)
    except Exception as e:  # noqa: BLE001 - the profile is saved; a tracking outage must not hide that
        print(f"[calibrate] not logged to MLflow ({cfg.tracking.uri}): {type(e).__name__}: {e}", file=sys.stderr)
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="parbench calibrate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--out", type=Path, help="profile file (default: the user's profile directory)")
    where.add_argument("--ship", action="store_true", help="write the shipped conf/calibrations/<hardware>.yaml")
    parser.add_argument("--work", type=Path, help="job dirs of the runs and measured.json "
                                                  "(default outputs/calibrate/<hardware>_<nodes>x<gpus>)")
    parser.add_argument("--fresh", action="store_true", help="measure every run again")
    parser.add_argument("--fit-only", action="store_true", help="fit the runs <work>/measured.json holds, run nothing "
                                                                "(a profile again from recorded measurements)")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides: hardware=..., tracking.uri=...")
    args = parser.parse_intermixed_args(argv)
    try:
        return calibrate(args)
    except ConfigError as e:
        print(f"parbench calibrate: {e}", file=sys.stderr)
        return 2
    except RunFailed as e:
        print(f"parbench calibrate: {e}\nthe runs before it are kept: the same command continues from it",
              file=sys.stderr)
        return 1
    except Exception as e:  # noqa: BLE001 - a fit on odd measurements: say what and where, no traceback
        print(f"parbench calibrate: {type(e).__name__}: {e} (the measured runs are kept under --work; "
              "the same command refits them)", file=sys.stderr)
        return 1
