"""A calibration profile on disk: where the shipped and the user's profiles live, and a profile read
(each figure checked, with what to give where one cannot be read) and written."""

from __future__ import annotations

import math
import os
import re
from dataclasses import asdict
from pathlib import Path
from typing import Dict

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from parbench.config import ConfigError
from parbench.paths import CONF_DIR
from parbench.metrics.fits import by_count, two_at_two
from parbench.predict.calibration import ATTENTION_FIELDS, HOST_STRATEGIES, IDLE_UNIT, VERSION, Calibration

CALIBRATION_DIR = CONF_DIR / "calibrations"  # shipped; not a config group: `calibration=<file>` stays a plain value


def user_calibration_dir() -> Path:
    """Where `parbench calibrate` saves this machine's profiles (outside the source tree)."""
    cache = os.environ.get("PARBENCH_CACHE_DIR") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "parbench"
    return Path(cache) / "calibrations"


def calibration_path(ref: str) -> Path:
    """A file path, or a profile name: the user's (user_calibration_dir) before the shipped one."""
    path = Path(ref)
    if path.suffix in (".yaml", ".yml", ".json"):
        return path
    mine = user_calibration_dir() / f"{ref}.yaml"
    return mine if mine.exists() else CALIBRATION_DIR / f"{ref}.yaml"


def load_calibration(ref: str) -> Calibration:
    path = calibration_path(ref)
    if not path.exists():
        raise ConfigError(f"calibration={ref}: {path} does not exist; run `parbench calibrate` or name one of "
                          f"{', '.join(sorted(p.stem for p in CALIBRATION_DIR.glob('*.yaml'))) or 'none yet'}")
    try:
        raw = OmegaConf.load(path)
        if raw.get("version", VERSION) != VERSION:  # before the merge: an older version's fields may be gone
            raise ConfigError(f"calibration file {path} has version {raw.get('version')}, this parbench reads version "
                              f"{VERSION}: run `parbench calibrate` again")
        node = OmegaConf.merge(OmegaConf.structured(Calibration), raw)
    except OmegaConfBaseException as e:
        raise ConfigError(f"calibration file {path}: {e}".splitlines()[0]) from None
    cal: Calibration = OmegaConf.to_object(node)
    check_decode_attention(path, cal.decode_attention_s)
    check_widths(path, "attention_widths", cal.attention_widths, r"[1-9][0-9]*", "'64'", ATTENTION_FIELDS)
    for mode, figures in cal.device_idle_s.items():
        if mode not in IDLE_UNIT or set(figures) != {"per_step", IDLE_UNIT[mode]} or min(figures.values()) < 0:
            raise ConfigError(f"calibration file {path}: device_idle_s[{mode!r}] = {dict(figures)}: give eager with "
                              "per_step and per_dispatch, compiled with per_step and per_layer, none negative, or run "
                              "`parbench calibrate` again")
    check_decode_gemms(path, cal)
    check_prefill_gemms(path, cal.prefill_gemm_s)
    check_host_figures(path, cal)
    check_prefill_kernels(path, cal)
    check_grouped_roofline(path, cal)
    return cal


def check_grouped_roofline(path: Path, cal: Calibration) -> None:
    """A grouped roofline whole where it has a rate: a read above 0 and its rows' exponent 0 to 1, a fixed cost not
    negative, an exponent of 1 or more; no negative rate."""
    whole = (cal.grouped_read_gbps > 0 and 0 <= cal.grouped_read_rows_exp <= 1 and cal.grouped_call_s >= 0
             and cal.grouped_roofline_p >= 1)
    if cal.grouped_matmul_tflops < 0 or (cal.grouped_matmul_tflops and not whole):
        raise ConfigError(f"calibration file {path}: grouped_matmul_tflops = {cal.grouped_matmul_tflops} beside "
                          f"grouped_read_gbps = {cal.grouped_read_gbps}, grouped_call_s = {cal.grouped_call_s}, "
                          f"grouped_roofline_p = {cal.grouped_roofline_p}, grouped_read_rows_exp = "
                          f"{cal.grouped_read_rows_exp}: give a read above 0, its exponent 0 to 1, a call's cost not "
                          "negative and p of 1 or more (or grouped_matmul_tflops: 0), or run `parbench calibrate` again")


def check_prefill_kernels(path: Path, cal: Calibration) -> None:
    """A replayed prefill's kernels a layer, each positive, and its figure per kernel beside one per layer."""
    counts, graph = cal.prefill_kernels_per_layer, cal.prefill_graph_host_s
    if not all(k > 0 for k in counts.values()) or ("per_kernel" in graph and ("per_layer" not in graph or graph["per_kernel"] < 0)):
        raise ConfigError(f"calibration file {path}: prefill_kernels_per_layer = {dict(counts)}, prefill_graph_host_s = "
                          f"{dict(graph)}: give each count above 0 and per_kernel (not negative) only beside per_layer, "
                          "or run `parbench calibrate` again")


def check_host_figures(path: Path, cal: Calibration) -> None:
    """The strategies' costs keyed by HOST_STRATEGIES, the several ranks' figures per step and per dispatch, a
    replayed layer's by checkpointing mode, an MoE layer's, none negative."""
    strategies = cal.host_s_per_dispatch_by_strategy
    if not set(strategies) <= set(HOST_STRATEGIES) or not all(v >= 0 for v in strategies.values()):
        raise ConfigError(f"calibration file {path}: host_s_per_dispatch_by_strategy = {dict(strategies)}: key each "
                          f"figure by a strategy ({', '.join(HOST_STRATEGIES)}), none negative, or run `parbench calibrate` again")
    for name in ("host_s_per_replayed_call", "host_s_per_replayed_layer"):
        figures = getattr(cal, name)
        if not set(figures) <= {"full", "selective"} or not all(v >= 0 for v in figures.values()):
            raise ConfigError(f"calibration file {path}: {name} = {dict(figures)}: key each figure by a checkpointing "
                              "mode (full, selective), none negative, or run `parbench calibrate` again")
    if cal.host_s_per_moe_layer < 0:
        raise ConfigError(f"calibration file {path}: host_s_per_moe_layer = {cal.host_s_per_moe_layer}: give 0 or more, "
                          "or run `parbench calibrate` again")
    several = cal.host_s_several_ranks
    if several and (set(several) != {"per_step", "per_dispatch"} or min(several.values()) < 0):
        raise ConfigError(f"calibration file {path}: host_s_several_ranks = {dict(several)}: give per_step and "
                          "per_dispatch, neither negative, or leave it empty")


def check_decode_gemms(path: Path, cal: Calibration) -> None:
    """decode_gemm_s keyed by a whole number of bytes, each time positive, and a positive bandwidth beyond them."""
    if not cal.decode_gemm_s:
        return
    if (not all(re.fullmatch(r"[1-9][0-9]*", b) for b in cal.decode_gemm_s)
            or not all_positive([*cal.decode_gemm_s.values(), cal.decode_gemm_gbps])):
        raise ConfigError(f"calibration file {path}: decode_gemm_s = {dict(cal.decode_gemm_s)} with decode_gemm_gbps = "
                          f"{cal.decode_gemm_gbps}: give seconds by weight bytes (e.g. '8192': 2.2e-06), all positive, "
                          "and a positive decode_gemm_gbps, or run `parbench calibrate` again")


def check_prefill_gemms(path: Path, table: Dict[str, float]) -> None:
    """prefill_gemm_s readable along both ways (readable_table)."""
    if table and readable_table(table) is None:
        raise ConfigError(f"calibration file {path}: prefill_gemm_s = {dict(table)}: give seconds by 'ROWSxBYTES' "
                          "(e.g. '256x33554432': 1.9e-05), two or more sizes at each of two or more row counts, all "
                          "finite and positive, none below a smaller size's at its row count, or run `parbench "
                          "calibrate` again")


def check_decode_attention(path: Path, table: Dict[str, Dict[str, float]]) -> None:
    """decode_attention_s keyed by kind, each kind's calls readable along both ways (readable_table), none
    faster than the fewest blocks' at its length (the line extended past them would fall to nothing)."""
    for kind, calls in table.items():
        counts = readable_table(calls)
        fewest = dict(counts[min(counts)]) if counts else {}
        if (not re.fullmatch(r"[1-9][0-9]*(/mha)?", kind) or counts is None
                or not all(t >= fewest.get(n, 0.0) for points in counts.values() for n, t in points)):
            raise ConfigError(f"calibration file {path}: decode_attention_s[{kind!r}] = {dict(calls)}: give a kind such as "
                              "'64' or '128/mha' with seconds by 'BLOCKSxPOSITIONS', two or more lengths at each of two "
                              "or more block counts, all finite and positive, none below a shorter call at its block "
                              "count or the fewest blocks' at its length, or run `parbench calibrate` again")


def readable_table(table: Dict[str, float]) -> dict[int, list[tuple[int, float]]] | None:
    """A two-way table (keys 'COUNTxX') by count, where each key is whole numbers, each time finite and positive,
    two or more x at each of two or more counts, and no time below a smaller x's at its count (the end segment
    extended would fall); else None."""
    if not all(re.fullmatch(r"[1-9][0-9]*x[1-9][0-9]*", k) for k in table) or not all_positive(table.values()):
        return None
    counts = by_count(table)
    rising = all(b >= a for points in counts.values() for (_, a), (_, b) in zip(points, points[1:]))
    return counts if two_at_two(table) and rising else None


def all_positive(values) -> bool:
    return all(math.isfinite(v) and v > 0 for v in values)


def check_widths(path: Path, name: str, widths: Dict[str, Dict[str, float]], key: str, example: str,
                 fields: tuple[str, ...]) -> None:
    """Each entry of a per-head-width field keyed as `key` matches, with exactly `fields`, none negative."""
    for width, figures in widths.items():
        if not re.fullmatch(key, width) or set(figures) != set(fields) or not all(v >= 0 for v in figures.values()):
            raise ConfigError(f"calibration file {path}: {name}[{width!r}] = {dict(figures)}: give a head width such "
                              f"as {example} with {', '.join(fields)}, none negative, or run `parbench calibrate` again")


def save_calibration(cal: Calibration, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# parbench calibration profile (docs/plan.md), format version {VERSION}\n"
                    + OmegaConf.to_yaml(OmegaConf.structured(asdict(cal))))
    return path
