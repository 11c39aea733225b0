"""`parbench calibrate [--out FILE] [overrides]`: run the microbenchmarks (matmul, memory bandwidth,
collectives), two short profiled training runs (dp, fsdp) and a one-rank tiny model at two depths
(host dispatch) on this machine, fit the performance
model's figures to them, save the versioned profile (conf/calibrations/<hardware>.yaml) and log it to
MLflow. docs/plan.md describes the fits."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from parbench.config import ConfigError
from parbench.config.schema import Config
from parbench.fmt import format_metric
from parbench.prepare import validate
from parbench.paths import RESULTS_FILE
from parbench.planner import compose_config
from parbench.predict import predict
from parbench.metrics.fits import fit_alpha_beta, fit_line
from parbench.predict.calibration import CALIBRATION_DIR, Calibration, LinkFit, calibration_for, save_calibration

BUS_FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
              "reduce_scatter": lambda n: (n - 1) / n}
CPU_SIZES = {"matmul": "[[128,128,128],[256,256,256],[512,512,512],[1024,1024,1024]]", "membw_end": "64M",
             "collectives_end": "4M", "model": "tiny", "seq": "64"}
HOST_LAYERS = (2, 4)
GPU_SIZES = {"matmul": "[[1024,1024,1024],[2048,2048,2048],[4096,4096,4096],[8192,8192,8192],[4096,4096,14336]]",
             "membw_end": "1G", "collectives_end": "256M", "model": "llama3_2_1b", "seq": "2048"}


def benchmarks(cfg: Config) -> dict[str, list[str]]:
    """The runs, by name: their overrides on top of the user's."""
    s = CPU_SIZES if cfg.hardware.device_type == "cpu" else GPU_SIZES
    train = ["workload=train", f"model={s['model']}", f"workload.seq_len={s['seq']}", "workload.batch_size=2",
             "workload.steps=8", "profile.enabled=true", "profile.plots=false"]
    return {
        "matmul": ["workload=matmul", f"workload.shapes={s['matmul']}", "workload.iters=20"],
        "membw": ["workload=membw", f"workload.end={s['membw_end']}"],
        "collectives": ["workload=collectives", "workload.ops=[all_reduce,all_gather,reduce_scatter]",
                        f"workload.end={s['collectives_end']}", "workload.factor=4"],
        "train_dp": [*train, "parallel=dp"],
        "train_fsdp": [*train, "parallel=fsdp"],
        # The tiny model at two depths, on the ranks (and so the threads per rank) the other runs use:
        # the host's dispatch per step and per layer.
        **{f"host_{layers}_layers": ["workload=train", "model=tiny", f"model.layers={layers}", "workload.seq_len=64",
                                     "workload.batch_size=2", "workload.steps=30", "profile.enabled=false",
                                     "parallel=dp"] for layers in HOST_LAYERS},
    }


def run_all(overrides: list[str], runs: dict[str, list[str]], work: Path) -> dict[str, dict]:
    """Each benchmark through the real CLI, one after the other; name -> its metrics."""
    results = {}
    for i, (name, extra) in enumerate(runs.items(), 1):
        print(f"[calibrate] {i}/{len(runs)} {name}: python -m parbench {' '.join(extra)}", flush=True)
        start = time.monotonic()
        # resume=false: a calibration measures now, even where the store has the same config FINISHED
        cmd = [sys.executable, "-m", "parbench", *overrides, *extra, "resume=false", f"hydra.run.dir={work / name}"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode:
            raise RuntimeError(f"calibration run {name} failed ({proc.returncode}); its log: {work / name}\n"
                               f"{proc.stderr[-2000:]}")
        results[name] = json.loads((work / name / RESULTS_FILE).read_text())["metrics"]
        print(f"[calibrate]   done in {format_metric('duration_s', time.monotonic() - start)}", flush=True)
    return results


def fit_link(points: list[tuple[float, float]]) -> LinkFit:
    """(bus bytes = size x bus factor, seconds) of the collectives microbenchmark -> latency and bus
    bandwidth of the alpha-beta model (metrics.fits: least squares on relative error)."""
    fit = fit_alpha_beta([b for b, _ in points], [t for _, t in points])
    return LinkFit(latency_s=max(fit.alpha_s, 0.0), busbw_gbps=fit.bandwidth_gbps)


def fit_matmul(points: list[tuple[float, float]]) -> tuple[float, float]:
    """(GEMM FLOPs, achieved TFLOP/s) -> (large-GEMM TFLOP/s, GFLOP at half that rate) of
    rate(F) = R F / (F + H): 1/rate is linear in 1/F with intercept 1/R and slope H/R."""
    line = fit_line([1 / f for f, _ in points], [1 / r for _, r in points])
    if line.intercept <= 0:  # no saturation seen: the best rate measured, no size penalty
        return max(r for _, r in points), 0.0
    return 1 / line.intercept, max(0.0, line.slope / line.intercept / 1e9)


def matmul_points(metrics: dict) -> list[tuple[float, float]]:
    points = []
    for key, tflops in metrics.items():
        if key.startswith("matmul_tflops/"):
            m, k, n = (int(v) for v in key.split("/")[1].split("x"))
            points.append((2.0 * m * k * n, tflops))
    return points


def link_points(metrics: dict, ranks: int) -> list[tuple[float, float]]:
    """(bus bytes, seconds) of every timed collective size."""
    points = []
    for key, us in metrics.items():
        parts = key.split("/")
        if parts[0] == "time_us" and len(parts) == 3 and parts[1] in BUS_FACTOR:
            points.append((int(parts[2]) * BUS_FACTOR[parts[1]](ranks), us * 1e-6))
    return points


def fit(cfg: Config, overrides: list[str], results: dict[str, dict], base: Calibration) -> Calibration:
    """The fitted figures over the base; a single-node run measures the intra-node link (and stands
    in for the inter-node one where nothing else gives it), a multi-node run the inter-node one."""
    hw = cfg.hardware
    tflops, half = fit_matmul(matmul_points(results["matmul"]))
    link = fit_link(link_points(results["collectives"], hw.nodes * hw.gpus_per_node))
    links = {"inter_node": link} if hw.nodes > 1 else {"intra_node": link}
    if not base.inter_node.busbw_gbps:
        links.setdefault("inter_node", link)
    overlap = {**base.overlap, "dp": results["train_dp"].get("overlap_pct", 0.0) / 100,
               "fsdp": results["train_fsdp"].get("overlap_pct", 0.0) / 100}
    overlap["zero"] = overlap["fsdp"]
    cal = replace(base, source=f"measured {time.strftime('%Y-%m-%d')}: parbench calibrate {' '.join(overrides)}",
                  dtype=cfg.workload.dtype, matmul_tflops=tflops, matmul_half_gflop=half,
                  membw_gbps=results["membw"]["membw_gbps"], overlap=overlap, memory_overhead_gb=0.0,
                  host_s_per_step=0.0, host_s_per_layer=0.0, **links)
    per_step, per_layer = fit_host(overrides, results, cal)
    return replace(cal, memory_overhead_gb=memory_overhead(overrides, results["train_dp"], cal),
                   host_s_per_step=per_step, host_s_per_layer=per_layer)


def benchmark_config(overrides: list[str], name: str) -> Config:
    """The resolved config of one calibration run."""
    return compose_config([*overrides, *benchmarks(compose_config([*overrides, "workload=train"]))[name]])


def fit_host(overrides: list[str], results: dict[str, dict], cal: Calibration) -> tuple[float, float]:
    """(seconds per step, per layer) of host dispatch from the tiny model at two depths: on a CPU,
    what a step takes beyond the device model's time; on a GPU, all of it (the tiny model's kernels
    finish long before the host dispatches the next)."""
    host = {}
    for layers in HOST_LAYERS:
        name = f"host_{layers}_layers"
        train = benchmark_config(overrides, name)
        measured = results[name]["step_time_s"]
        device = predict(train, validate(train, None), cal).step_time_s if train.hardware.device_type == "cpu" else 0.0
        host[layers] = measured - device
    shallow, deep = HOST_LAYERS
    per_layer = max(0.0, (host[deep] - host[shallow]) / (deep - shallow))
    return max(0.0, host[shallow] - shallow * per_layer), per_layer


def memory_overhead(overrides: list[str], measured: dict, cal: Calibration) -> float:
    """What the dp run's peak holds beyond the tensors the model predicts (allocator slack, the
    runtime; on CPU the process's resident libraries)."""
    train = benchmark_config(overrides, "train_dp")
    predicted = predict(train, validate(train, None), cal).memory.total_gb
    return max(0.0, measured["mem_peak_allocated_gb"] - predicted)


def log_to_mlflow(cfg: Config, cal: Calibration, path: Path) -> None:
    from parbench.tracking.store import Store  # mlflow: only once there is something to record

    store = Store(cfg.tracking.uri, cfg.tracking.experiment)
    run_id = store.create_run(f"calibration {cfg.hardware.name}", {"kind": "calibration",
                                                                 "calibration_source": cal.source}, None)
    store.log_metrics(run_id, {"calibration_matmul_tflops": cal.matmul_tflops, "calibration_membw_gbps": cal.membw_gbps,
                               "calibration_link_busbw_gbps": cal.intra_node.busbw_gbps,
                               "calibration_link_latency_s": cal.intra_node.latency_s,
                               "calibration_host_s_per_step": cal.host_s_per_step,
                               "calibration_host_s_per_layer": cal.host_s_per_layer})
    store.log_artifacts(run_id, [path])
    store.finish(run_id, ok=True)


def base_calibration(cfg: Config) -> Calibration:
    """What the runs do not measure (the other link scope, strategies other than dp/fsdp) comes
    from the current profile or the spec figures; blank where the hardware config has none."""
    try:
        return replace(calibration_for(cfg.hardware, cfg.workload.dtype, None), hardware=cfg.hardware.name)
    except ConfigError:
        return Calibration(hardware=cfg.hardware.name)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="parbench calibrate", description=__doc__)
    parser.add_argument("--out", type=Path, help="profile file (default conf/calibrations/<hardware>.yaml)")
    parser.add_argument("--work", type=Path, default=Path("outputs/calibrate"), help="job dirs of the runs")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides: hardware=..., tracking.uri=...")
    args = parser.parse_args(argv)
    try:
        cfg = compose_config([*args.overrides, "workload=train"])
    except ConfigError as e:
        print(f"parbench calibrate: {e}", file=sys.stderr)
        return 2
    work = args.work / time.strftime("%Y-%m-%d_%H-%M-%S")
    results = run_all(args.overrides, benchmarks(cfg), work)
    cal = fit(cfg, args.overrides, results, base_calibration(cfg))
    path = save_calibration(cal, args.out or CALIBRATION_DIR / f"{cfg.hardware.name}.yaml")
    log_to_mlflow(cfg, cal, path)
    link = cal.inter_node if cfg.hardware.nodes > 1 else cal.intra_node
    print(f"[calibrate] matmul {format_metric('tflops', cal.matmul_tflops)} (half at {cal.matmul_half_gflop:.3g} "
          f"GFLOP), memory {format_metric('membw_gbps', cal.membw_gbps)}, "
          f"link {format_metric('busbw_gbps', link.busbw_gbps)}"
          f" + {format_metric('latency_s', link.latency_s)}, overlap dp {100 * cal.overlap['dp']:.1f} % fsdp "
          f"{100 * cal.overlap['fsdp']:.1f} %, memory overhead {format_metric('overhead_gb', cal.memory_overhead_gb)}, "
          f"host {format_metric('host_s', cal.host_s_per_step)} per step + "
          f"{format_metric('host_s', cal.host_s_per_layer)} per layer\n"
          f"[calibrate] saved {path}", flush=True)
    return 0
