"""`parbench calibrate [--out FILE | --ship] [--fresh] [--host] [overrides]`: on this machine's devices (resolved
as a run resolves them), run the microbenchmarks (matmul, memory bandwidth; collectives and two
profiled training runs for the overlap where there is more than one device), a model's training
step eager and compiled under each checkpointing mode and at a 4x longer sequence, and the tiny
model at two depths and, on two or more devices, under tp and fsdp (host dispatch); fit the performance model's figures to them
(predict/learn.py), save the profile and log it to MLflow. docs/plan.md describes the fits.

Each finished run's metrics are kept in <work>/measured.json as it ends, so a failure or Ctrl-C
loses nothing and the same command continues with the next run. The profile goes to the user's
profile directory (~/.cache/parbench/calibrations/<hardware>.yaml, which runs read before the
shipped one); `--ship` writes the shipped conf/calibrations/<hardware>.yaml instead. `--host` makes only the
runs whose time is the host's dispatch (calibration_runs.is_host_run: small models' training steps, the native
engine's small batches; a few minutes) and fits only the host's figures over the current profile: the remedy for a
host-bound step far off a profile measured on another host of the same GPU (calibration_fit.py)."""

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
from parbench.config.schema import Config
from parbench.fmt import format_metric
from parbench.paths import RESULTS_FILE, write_json_atomic
from parbench.planner import compose_config
from parbench.predict.calibration import Calibration
from parbench.predict.calibration_file import (CALIBRATION_DIR, calibration_path, load_calibration, save_calibration,
                                              user_calibration_dir)
from parbench.predict.profiles import calibration_for
from parbench.calibration_fit import fit, fit_host_only
from parbench.calibration_summary import summary
from parbench.calibration_runs import benchmarks, is_host_run

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
    ledger = work / MEASURED_FILE
    if args.fresh and ledger.exists():
        ledger.unlink()
    every = benchmarks(cfg)  # what the ledger may hold: a whole calibration's runs, whichever this call makes
    runs = {name: extra for name, extra in every.items() if not args.host or is_host_run(name)}
    try:
        results = ({name: m for name, m in recorded(work, every).items() if name in runs} if args.fit_only
                   else run_all(overrides, runs, work))
    except KeyboardInterrupt:
        done = len(set(json.loads(ledger.read_text())) & set(runs)) if ledger.exists() else 0
        print(f"\n[calibrate] interrupted after {done} of {len(runs)} runs; the same command continues with "
              f"the next (kept in {ledger})", file=sys.stderr)
        return 130
    when = f"runs measured earlier, refitted {time.strftime('%Y-%m-%d')}" if args.fit_only else None
    cal, notes = (fit_host_only if args.host else fit)(cfg, overrides, results, base_calibration(cfg), when)
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
    parser.add_argument("--host", action="store_true", help="only the host's dispatch: its runs measured, its figures "
                                                            "fitted over the current profile")
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
