"""`parbench plan [--top N] [--verify K] [overrides]`: every layout of the model on the hardware,
checked as a job would be, the ones that do not fit dropped with the reason, the rest ranked by
predicted tokens/s; then the sweep that verifies the top K (run with --verify K). docs/plan.md."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from parbench.config import ConfigError, resolve
from parbench.config.hardware import GpuInfo
from parbench.config.hf_model import source_tags
from parbench.config.host import device_capacity
from parbench.config.schema import Config, HardwareConfig
from parbench.config.store import register_schema
from parbench.fmt import format_metric, format_number
from parbench.models import describe
from parbench.prepare import validate
from parbench.paths import CONF_DIR
from parbench.predict import is_training, predict
from parbench.predict.calibration import Calibration
from parbench.predict.profiles import calibration_for
from parbench.predict.search import Option, global_batch, options
from parbench.predict.step import Prediction
from parbench.workloads.registry import typed_config

PLAN_GROUP = "plan"  # the config group of the layout presets a verify sweep selects


@dataclass(frozen=True)
class Ranked:
    option: Option
    prediction: Prediction


@dataclass
class Outcome:
    ranked: list[Ranked]
    too_big: list[tuple[Option, float]]  # (layout, GB per device it needs)
    invalid: Counter  # reason -> layouts refused by the checks


def compose_config(overrides: list[str], gpus: list[GpuInfo] | None = None) -> Config:
    """The resolved config of these overrides; `gpus`: the local GPUs a run here would use (none:
    planning for a machine given by the overrides)."""
    register_schema()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        node = compose("config", overrides=overrides)
    return resolve.resolve(typed_config(node), gpus or [])


def search(cfg: Config, cal: Calibration) -> Outcome:
    """Every layout through the job's checks and the model; sorted by predicted tokens/s, then label."""
    out = Outcome([], [], Counter())
    cap = device_capacity(cfg.hardware)
    limit = cap.usable_gb if cap else float("inf")
    for option in options(cfg):
        candidate = option.apply(cfg)
        try:
            dims = validate(candidate, None)
        except ConfigError as e:
            out.invalid[str(e).split(":")[0]] += 1
            continue
        p = predict(candidate, dims, cal)
        if p.memory.total_gb > limit:
            out.too_big.append((option, p.memory.total_gb))
        else:
            out.ranked.append(Ranked(option, p))
    out.ranked.sort(key=lambda r: (-r.prediction.tokens_per_s, r.option.label()))
    out.too_big.sort(key=lambda t: (t[1], t[0].label()))
    return out


def row(i: int, r: Ranked, devices: int) -> list[str]:
    p, o = r.prediction, r.option.parallel
    pipe = f"{o.pp_schedule} x{o.pp_microbatches}" if o.pp > 1 else "-"
    return [str(i), str(o.dp), str(o.fsdp), str(o.tp), str(o.pp), str(o.cp), str(o.ep), pipe,
            r.option.activation_checkpointing, format_metric("tokens_per_s", p.tokens_per_s),
            format_metric("tokens_per_s", p.tokens_per_s / devices), format_metric("step_time_s", p.step_time_s),
            format_metric("mem_gb", p.memory.total_gb), p.bottleneck]


def table(rows: list[list[str]]) -> str:
    head = ["#", "dp", "fsdp", "tp", "pp", "cp", "ep", "pipeline", "ac", "tokens/s", "per GPU", "step",
            "mem/GPU", "bottleneck"]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    return "\n".join("  ".join(c.rjust(w) if c[:1].isdigit() else c.ljust(w) for c, w in zip(r, widths)).rstrip()
                     for r in [head, *rows])


def header(cfg: Config, cal: Calibration, outcome: Outcome) -> str:
    hw, w = cfg.hardware, cfg.workload
    devices, gbs = hw.nodes * hw.gpus_per_node, global_batch(cfg)
    source = (f"spec figures of hardware={hw.name} (no calibration profile: `parbench calibrate "
              f"hardware={hw.name}` measures one)") if cal.is_spec else f"calibration {cal.source}"
    tried = len(outcome.ranked) + len(outcome.too_big) + sum(outcome.invalid.values())
    return (f"parbench plan: model={cfg.model.name} on {devices} x {hw.name} ({hw.nodes} node(s) x "
            f"{hw.gpus_per_node}), seq {w.seq_len}, global batch {gbs} sequences "
            f"({format_number(gbs * w.seq_len)} tokens/step), {w.dtype}\n"
            f"architecture: {describe(cfg.model)}{config_line(cfg)}\n"
            f"model: {source}\n"
            f"{format_number(tried)} layouts: {format_number(len(outcome.ranked))} fit, "
            f"{format_number(len(outcome.too_big))} do not fit ({capacity_words(hw)}), "
            f"{format_number(sum(outcome.invalid.values()))} refused by the checks")


def config_line(cfg: Config) -> str:
    """model=hf: the config.json read and its hash."""
    tags = source_tags(cfg.model)
    return f"\n  from {tags['model.config_json']} (sha256 {tags['model.config_sha256'][:12]})" if tags else ""


def capacity_words(hw: HardwareConfig) -> str:
    cap = device_capacity(hw)
    return cap.describe() if cap else f"hardware={hw.name} gives no memory_gb"


def dropped(outcome: Outcome, cfg: Config) -> str:
    lines = []
    if outcome.too_big:
        option, need = outcome.too_big[0]
        lines.append(f"smallest that does not fit: {option.label()} needs {format_metric('mem_gb', need)} per device, "
                     f"{capacity_words(cfg.hardware)}")
    for reason, n in sorted(outcome.invalid.items(), key=lambda t: (-t[1], t[0]))[:3]:
        lines.append(f"refused ({format_number(n)}): {reason}")
    return "\n".join(lines)


def write_presets(ranked: list[Ranked], where: Path) -> Path:
    """The top layouts as config presets under where/plan/, for a sweep over +plan=..."""
    group = where / PLAN_GROUP
    group.mkdir(parents=True, exist_ok=True)
    for r in ranked:
        yaml = OmegaConf.to_yaml(OmegaConf.create(r.option.preset()))
        (group / f"{r.option.label()}.yaml").write_text(f"# @package _global_\n# parbench plan\n{yaml}")
    return where


def verify_command(overrides: list[str], ranked: list[Ranked], where: Path) -> list[str]:
    labels = ",".join(r.option.label() for r in ranked)
    return [sys.executable, "-m", "parbench", "-m", *overrides, f"hydra.searchpath=[file://{where.resolve()}]",
            f"+{PLAN_GROUP}={labels}"]


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="parbench plan", description=__doc__)
    parser.add_argument("--top", type=int, default=10, help="rows of the table (default 10)")
    parser.add_argument("--verify", type=int, default=0, metavar="K", help="run the top K as a sweep")
    parser.add_argument("--out", type=Path, default=Path("outputs/plan"), help="where the layout presets go")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, as for python -m parbench")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    try:
        cfg = compose_config(args.overrides)
        if not is_training(cfg):
            raise ConfigError(f"workload={cfg.workload.name}: parbench plan ranks training layouts (workload=train)")
        cal = calibration_for(cfg.hardware, cfg.workload.dtype, cfg.calibration)
    except ConfigError as e:
        print(f"parbench plan: {e}", file=sys.stderr)
        return 2
    outcome = search(cfg, cal)
    devices = cfg.hardware.nodes * cfg.hardware.gpus_per_node
    print(header(cfg, cal, outcome))
    if not any(o.startswith("workload.seq_len=") for o in args.overrides):
        print(f"seq {cfg.workload.seq_len}: model={cfg.model.name}'s default sequence length (workload.seq_len=N plans another)")
    print(table([row(i, r, devices) for i, r in enumerate(outcome.ranked[:args.top], 1)]))
    print(dropped(outcome, cfg))
    if not outcome.ranked:
        print("nothing fits: add GPUs (hardware.nodes), or shorten workload.seq_len / the global batch")
        return 1
    top = outcome.ranked[:args.verify or 3]
    command = verify_command(args.overrides, top, write_presets(top, args.out))
    print(f"\nverify the top {len(top)} (or rerun with --verify K):\n  python -m parbench " + " ".join(command[3:]))
    if args.verify:
        return subprocess.run(command).returncode
    return 0
