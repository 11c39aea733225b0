"""Training runs: throughput per layout with its interval, speedup and parallel efficiency against
the smallest world in the set (strong or weak scaling, told from the params), MFU, comm %,
bubble %, memory against capacity, the ranking from the intervals and a verdict."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from parbench.report import fmt, training_plots
from parbench.report.document import Figure, Paragraph, Section, Table
from parbench.report.runs import ReportError, RunSet

# Percentages of the profiled step, turned into seconds of it for the breakdown plot.
BREAKDOWN_PCT = {"compute_s": "compute_pct", "exposed_comm_s": "exposed_comm_pct", "memcpy_s": "memcpy_pct",
                 "idle_s": "idle_pct"}
NUMBERS = ("step_time_s", "step_time_s_ci_low", "step_time_s_ci_high", "throughput_tokens_per_s",
           "throughput_tokens_per_s_ci_low", "throughput_tokens_per_s_ci_high", "throughput_tokens_per_s_per_device",
           "mfu", "comm_pct", "exposed_comm_pct", "overlap_pct", "bubble_pct", "mem_peak_allocated_gb")


def training_runs(runs: RunSet) -> pd.DataFrame:
    """Finished training runs that measured a step time."""
    done = runs.of("train")
    if "metrics.step_time_s" not in done:
        return done.iloc[0:0]
    return done[done["metrics.step_time_s"].notna()].reset_index(drop=True)


def _metric(runs: pd.DataFrame, name: str) -> pd.Series:
    return runs.get(f"metrics.{name}", pd.Series(np.nan, index=runs.index)).astype(float)


def _global_batch_declared(runs: pd.DataFrame) -> pd.Series:
    values = runs.get("params.workload.global_batch_size", pd.Series(None, index=runs.index))
    return values.notna() & ~values.isin(["None", "null", ""])


def scaling_kind(runs: pd.DataFrame) -> str | None:
    """'strong' (one global batch: workload.global_batch_size), 'weak' (one per-device batch), or
    None when all runs have one world size. A set that mixes the two is refused."""
    if runs["world_size"].nunique() < 2:
        return None
    strong = _global_batch_declared(runs)
    if strong.any() and not strong.all():
        raise ReportError(
            "these training runs mix strong scaling (workload.global_batch_size set: "
            f"{', '.join(runs.loc[strong, 'label'])}) and weak scaling (per-device workload.batch_size: "
            f"{', '.join(runs.loc[~strong, 'label'])}); speedup means different things for the two: "
            "report one set, e.g. --filter \"params.workload.global_batch_size != 'None'\" (strong) or "
            "\"params.workload.global_batch_size = 'None'\" (weak)")
    tokens = _metric(runs, "plan_tokens_per_step")
    if strong.all():
        if tokens.nunique() > 1:
            raise ReportError("strong scaling needs one global batch, but the runs process "
                              f"{_listing(runs, tokens)} tokens per step: report one global_batch_size at a time "
                              "(--filter \"params.workload.global_batch_size = '...'\")")
        return "strong"
    per_device = tokens / runs["world_size"]
    if per_device.nunique() > 1:
        raise ReportError("weak scaling needs the same tokens per device, but the runs process "
                          f"{_listing(runs, per_device)} tokens per device per step (tensor or pipeline degrees "
                          "split a batch over devices): set workload.global_batch_size for strong scaling, or "
                          "report layouts with one per-device batch (--filter)")
    return "weak"


def _listing(runs: pd.DataFrame, values: pd.Series) -> str:
    return "; ".join(f"{fmt.number(v)} ({', '.join(runs.loc[values == v, 'label'])})" for v in values.unique())


def scaling_table(runs: pd.DataFrame, kind: str | None) -> pd.DataFrame:
    """Numbers per run, fastest first: speedup and efficiency against the fastest run of the smallest
    world size (tokens/s ratios: step-time ratios for strong scaling, scaled speedup for weak)."""
    table = pd.DataFrame({"run": runs["label"], "run_id": runs["run_id"], "devices": runs["world_size"],
                          "layout": runs.get("params.parallel.name", pd.Series("runs", index=runs.index))})
    for name in NUMBERS:
        table[name] = _metric(runs, name)
    capacity = pd.to_numeric(runs.get("params.hardware.memory_gb"), errors="coerce")
    table["memory_capacity_gb"] = capacity if capacity is not None else np.nan
    if kind is not None:
        smallest = table[table["devices"] == table["devices"].min()]
        base = smallest.loc[smallest["throughput_tokens_per_s"].idxmax()]
        table["speedup"] = table["throughput_tokens_per_s"] / base["throughput_tokens_per_s"]
        table["parallel_efficiency"] = table["speedup"] / (table["devices"] / base["devices"])
        table["baseline"] = base["run"]
    table = table.sort_values("throughput_tokens_per_s", ascending=False).reset_index(drop=True)
    table["vs_fastest"] = _ranking(table)
    return table


def _ranking(table: pd.DataFrame) -> list[str]:
    """`fastest`, `indistinguishable` (intervals of tokens/s overlap the fastest's) or `slower`."""
    best = table.iloc[0]
    if pd.isna(best["throughput_tokens_per_s_ci_low"]):
        return ["fastest"] + ["no interval"] * (len(table) - 1)
    return ["fastest"] + ["indistinguishable" if row.throughput_tokens_per_s_ci_high >= best.throughput_tokens_per_s_ci_low
                          else "slower" for row in table.iloc[1:].itertuples()]


def shown_table(table: pd.DataFrame) -> pd.DataFrame:
    """The table for people: only columns that hold a number for some run."""
    columns = {
        "layout": table["run"], "devices": table["devices"].map(str),
        "tokens/s": table["throughput_tokens_per_s"].map(lambda v: fmt.rate(v, "tok/s")),
        "interval": [f"{fmt.number(lo)} – {fmt.number(hi)}" if pd.notna(lo) else fmt.DASH for lo, hi in
                          zip(table["throughput_tokens_per_s_ci_low"], table["throughput_tokens_per_s_ci_high"])],
        "per device": table["throughput_tokens_per_s_per_device"].map(lambda v: fmt.rate(v, "tok/s")),
        "step time": table["step_time_s"].map(fmt.seconds),
    }
    if "speedup" in table:
        columns.update({"speedup": table["speedup"].map(fmt.times),
                        "efficiency": table["parallel_efficiency"].map(fmt.fraction)})
    optional = {"MFU": ("mfu", fmt.fraction), "comm": ("comm_pct", fmt.percent),
                "exposed comm": ("exposed_comm_pct", fmt.percent), "bubble": ("bubble_pct", fmt.percent),
                "peak memory": ("mem_peak_allocated_gb", fmt.gigabytes)}
    for title, (name, render) in optional.items():
        if table[name].notna().any():
            columns[title] = table[name].map(render)
    if table["memory_capacity_gb"].notna().any():
        columns["of capacity"] = (table["mem_peak_allocated_gb"] / table["memory_capacity_gb"]).map(fmt.fraction)
    columns["vs fastest"] = table["vs_fastest"]
    return pd.DataFrame(columns)


def verdict(table: pd.DataFrame, kind: str | None) -> str:
    """The fastest layout, the ones the intervals cannot tell from it, and what limits the others."""
    best = table.iloc[0]
    text = (f"**{best['run']}** is the fastest layout: {fmt.rate(best['throughput_tokens_per_s'], 'tok/s')} "
            f"({fmt.rate(best['throughput_tokens_per_s_per_device'], 'tok/s')} per device"
            + (f", MFU {fmt.fraction(best['mfu'])}" if pd.notna(best["mfu"]) else "") + ").")
    ties = table[table["vs_fastest"] == "indistinguishable"]["run"]
    if len(ties):
        text += f" Indistinguishable from it within the runs' intervals: {', '.join(ties)}."
    limits = [f"{row.run} ({_limit(row)})" for row in table.iloc[1:].itertuples()]
    if limits:
        text += " What limits the others (the largest of exposed communication and bubble): " + "; ".join(limits) + "."
    if kind is not None:
        largest = table.loc[table["devices"].idxmax()]
        text += (f" {kind.capitalize()} scaling against {best.get('baseline', '')}: at {largest['devices']} devices "
                 f"{largest['run']} reaches {fmt.times(largest['speedup'])} "
                 f"({fmt.fraction(largest['parallel_efficiency'])} parallel efficiency).")
    return text


def _limit(row) -> str:
    shares = {"exposed communication": row.exposed_comm_pct, "pipeline bubble": row.bubble_pct}
    measured = {k: v for k, v in shares.items() if pd.notna(v)}
    if not measured:
        return "no breakdown: run with profile.enabled=true to see communication"
    name, value = max(measured.items(), key=lambda kv: kv[1])
    if value < 1:
        return f"compute: {name} only {fmt.percent(value)} of the step"
    return f"{name} {fmt.percent(value)} of the step"


def breakdown_seconds(runs: pd.DataFrame) -> pd.DataFrame:
    """compute/exposed comm/memcpy/idle seconds of a profiled step for each profiled run."""
    needed = [f"metrics.{m}" for m in BREAKDOWN_PCT.values()] + ["metrics.profiled_step_time_s"]
    if not set(needed) <= set(runs.columns):
        return pd.DataFrame()
    profiled = runs.dropna(subset=needed)
    frame = pd.DataFrame({column: profiled[f"metrics.{pct}"] / 100 * profiled["metrics.profiled_step_time_s"]
                          for column, pct in BREAKDOWN_PCT.items()})
    frame.index = list(profiled["label"])
    return frame


def confidence(runs: pd.DataFrame) -> str:
    """The intervals' confidence level (stats.confidence), as the runs logged it."""
    levels = pd.to_numeric(runs.get("params.stats.confidence", pd.Series(dtype=object)), errors="coerce").dropna()
    return " / ".join(fmt.fraction(level) for level in sorted(levels.unique())) or "95 %"


def training_section(runs: RunSet, out: Path, fetch_artifact) -> Section:
    """The Training section, or an empty one when the set has no finished training run."""
    train = training_runs(runs)
    section = Section("Training")
    if train.empty:
        return section
    kind = scaling_kind(train)
    table = scaling_table(train, kind)
    scaling = {"strong": "Strong scaling (one global batch for every world size)",
               "weak": "Weak scaling (one batch per device, the global batch grows with the world)",
               None: "One world size: no scaling figures"}[kind]
    section.add(Paragraph(verdict(table, kind)),
                Paragraph(f"{scaling}. Ranking from the {confidence(train)} intervals of tokens/s (from the "
                          "interval of each run's median step time): a run is *indistinguishable* "
                          "when its interval overlaps the fastest run's."),
                Table(shown_table(table), table, "training.csv", f"{len(table)} training runs, fastest first"),
                Figure(training_plots.throughput(table, out / "training_throughput.png"),
                       f"Throughput per layout (tokens/s), whiskers: its {confidence(train)} interval"))
    if kind is not None:
        section.add(Figure(training_plots.scaling(table, out / "training_scaling.png", kind),
                           f"Speedup against {table['baseline'].iloc[0]} (x), dashed: ideal (linear)"))
    breakdown = breakdown_seconds(train)
    if not breakdown.empty:
        section.add(Figure(training_plots.breakdown(breakdown, out / "training_breakdown.png"),
                           "Profiled step split into compute, exposed communication, memcpy and idle (ms per step)"))
    if table["mem_peak_allocated_gb"].notna().any():
        section.add(Figure(training_plots.memory(table, out / "training_memory.png"),
                           "Peak memory per device (GB, max over ranks)"
                           + (", line: device capacity (hardware.memory_gb)" if table["memory_capacity_gb"].notna().any()
                              else "; no capacity line: hardware.memory_gb is not set for this hardware")))
    heat = training_plots.layer_heatmap(train, fetch_artifact, out / "training_layers.png")
    if heat is not None:
        section.add(Figure(heat, "Time per layer (ms per profiled step, rank 0, forward + backward + optimizer)"))
    return section
