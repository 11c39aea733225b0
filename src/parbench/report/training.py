"""Training runs: throughput per layout with its interval, speedup and parallel efficiency against
the smallest world in the set (strong or weak scaling, told from the params), MFU, comm %,
bubble %, memory against capacity, the ranking from the intervals and a verdict."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from parbench.report import fmt, noise, training_plots
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
    """Numbers per run, by device count, fastest first within it (ranked only against runs on as
    many devices); speedup and efficiency, with their intervals, against one baseline: the fastest
    run of the smallest world size (tokens/s ratios: step-time ratios for strong scaling, scaled
    speedup for weak); `notes` flags what the figures cannot support."""
    table = pd.DataFrame({"run": runs["label"], "run_id": runs["run_id"], "devices": runs["world_size"],
                          "layout": runs.get("params.parallel.name", pd.Series("runs", index=runs.index))})
    for name in NUMBERS:
        table[name] = _metric(runs, name)
    capacity = pd.to_numeric(runs.get("params.hardware.memory_gb"), errors="coerce")
    table["memory_capacity_gb"] = capacity if capacity is not None else np.nan
    table = table.sort_values(["devices", "throughput_tokens_per_s"], ascending=[True, False]).reset_index(drop=True)
    if kind is not None:
        _add_speedup(table)
    low, high = table["throughput_tokens_per_s_ci_low"], table["throughput_tokens_per_s_ci_high"]
    table["vs_fastest"] = pd.concat([noise.ranking(group, low[group.index], high[group.index])
                                     for _, group in table.groupby("devices")["throughput_tokens_per_s"]])
    table["notes"] = [noise.notes(noise.wide_note(row.throughput_tokens_per_s, row.throughput_tokens_per_s_ci_low,
                                                  row.throughput_tokens_per_s_ci_high),
                                  noise.efficiency_note(getattr(row, "parallel_efficiency", np.nan),
                                                        getattr(row, "parallel_efficiency_ci_low", np.nan)))
                      for row in table.itertuples()]
    return table


def _add_speedup(table: pd.DataFrame) -> None:
    """speedup, parallel_efficiency and their _ci_low/_ci_high against the baseline run."""
    smallest = table[table["devices"] == table["devices"].min()]
    base = smallest.loc[smallest["throughput_tokens_per_s"].idxmax()]
    scale = table["devices"] / base["devices"]
    table["speedup"] = table["throughput_tokens_per_s"] / base["throughput_tokens_per_s"]
    bounds = [noise.ratio_interval(row.throughput_tokens_per_s_ci_low, row.throughput_tokens_per_s_ci_high,
                                   base["throughput_tokens_per_s_ci_low"], base["throughput_tokens_per_s_ci_high"])
              for row in table.itertuples()]
    table["speedup_ci_low"], table["speedup_ci_high"] = [b[0] for b in bounds], [b[1] for b in bounds]
    table.loc[table["run_id"] == base["run_id"], ["speedup_ci_low", "speedup_ci_high"]] = 1.0
    for bound in ("", "_ci_low", "_ci_high"):
        table[f"parallel_efficiency{bound}"] = table[f"speedup{bound}"] / scale
    table["baseline"] = base["run"]


def shown_table(table: pd.DataFrame) -> pd.DataFrame:
    """The table for people: only columns that hold a number for some run."""
    tok_s = lambda v: fmt.rate(v, "tok/s")  # noqa: E731
    columns = {
        "layout": table["run"], "devices": table["devices"].map(str),
        "tokens/s": table["throughput_tokens_per_s"].map(tok_s),
        "interval": [noise.interval_text(lo, hi, fmt.number) for lo, hi in
                     zip(table["throughput_tokens_per_s_ci_low"], table["throughput_tokens_per_s_ci_high"])],
        "per device": table["throughput_tokens_per_s_per_device"].map(tok_s),
        "step time": table["step_time_s"].map(fmt.seconds),
    }
    if "speedup" in table:
        columns.update({"speedup": [f"{fmt.times(v)} (" + ("baseline" if run == base else noise.interval_text(lo, hi, fmt.times)) + ")"
                                    for run, base, v, lo, hi in zip(table["run"], table["baseline"], table["speedup"],
                                                                    table["speedup_ci_low"], table["speedup_ci_high"])],
                        "efficiency": table["parallel_efficiency"].map(fmt.fraction)})
    optional = {"MFU": ("mfu", fmt.fraction), "comm": ("comm_pct", fmt.percent),
                "exposed comm": ("exposed_comm_pct", fmt.percent), "bubble": ("bubble_pct", fmt.percent),
                "peak memory": ("mem_peak_allocated_gb", fmt.gigabytes)}
    for title, (name, render) in optional.items():
        if table[name].notna().any():
            columns[title] = table[name].map(render)
    if table["memory_capacity_gb"].notna().any():
        columns["of capacity"] = (table["mem_peak_allocated_gb"] / table["memory_capacity_gb"]).map(fmt.fraction)
    columns["rank (same devices)"] = table["vs_fastest"]
    columns["flags"] = table["notes"].replace("", fmt.DASH)
    return pd.DataFrame(columns)


def verdict(table: pd.DataFrame, kind: str | None) -> list[str]:
    """Per device count, the fastest layout only where the intervals support one; then the scaling
    against the baseline."""
    lines = [_device_verdict(group) for _, group in table.groupby("devices")]
    if kind is not None:
        lines.append(_scaling_verdict(table, kind))
    return lines


def limits(table: pd.DataFrame) -> str:
    """What limits each multi-device run that is not the clear fastest of its device count."""
    named = [f"{row.run} ({_limit(row)})" for row in table.itertuples()
             if row.vs_fastest not in ("fastest", "only run") and row.devices > 1]  # one device: nothing to share
    return ("What limits the others (the largest of exposed communication and bubble): " + "; ".join(named) + "."
            if named else "")


def _device_verdict(group: pd.DataFrame) -> str:
    devices = group["devices"].iloc[0]
    best = group.iloc[0]
    figure = (f"{fmt.rate(best['throughput_tokens_per_s'], 'tok/s')} "
              f"({noise.interval_text(best['throughput_tokens_per_s_ci_low'], best['throughput_tokens_per_s_ci_high'], fmt.number)})"
              + (f", MFU {fmt.fraction(best['mfu'])}" if pd.notna(best["mfu"]) else ""))
    where = f"On {fmt.count(int(devices), 'device')}"
    if best["vs_fastest"] == "only run":
        return f"{where}: only **{best['run']}** ran, {figure}; nothing to rank it against."
    if best["vs_fastest"] == "fastest":
        return f"{where}: **{best['run']}** is the fastest, {figure}; its interval clears every other run's."
    tied = group[group["vs_fastest"] == "tied for fastest"]["run"]
    return (f"{where}: no winner; {', '.join(f'**{r}**' for r in tied)} cannot be told apart (their intervals "
            f"overlap; the best median is {best['run']}'s, {figure}).")


def _scaling_verdict(table: pd.DataFrame, kind: str) -> str:
    base = table.loc[table["run"] == table["baseline"].iloc[0]].iloc[0]
    larger = table[table["devices"] > base["devices"]]
    parts = [f"{row.run} {fmt.times(row.speedup)} ({noise.interval_text(row.speedup_ci_low, row.speedup_ci_high, fmt.times)}"
             f", efficiency {fmt.fraction(row.parallel_efficiency)}"
             + (", above 100 %: see the caveats" if "efficiency above" in row.notes else "") + ")"
             for row in larger.itertuples()]
    return (f"{kind.capitalize()} scaling against one baseline, {base['run']} on {fmt.count(int(base['devices']), 'device')} "
            f"({fmt.rate(base['throughput_tokens_per_s'], 'tok/s')}): " + "; ".join(parts) + ".")


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


def twins_caveat(table: pd.DataFrame) -> list[str]:
    """Single-device runs split nothing, so their layouts run nearly the same step: when their
    intervals do not overlap, the runs are noisier than their intervals say."""
    single = table[table["devices"] == 1]
    if len(single) < 2 or not (single["vs_fastest"] == "slower").any():
        return []
    runs = ", ".join(f"{r.run} {fmt.rate(r.throughput_tokens_per_s, 'tok/s')}" for r in single.itertuples())
    return [f"**One device, different figures** ({runs}). On one device no layout splits anything, yet these "
            "runs differ beyond their intervals: run-to-run noise (a busy machine, one-time costs of a sweep's "
            "first point) is larger than each run's own interval. Treat differences of this size as noise; "
            "rerun them (`resume=false`) with more steps."]


def intro(table: pd.DataFrame, kind: str | None, train: pd.DataFrame) -> list[Paragraph]:
    """The verdict, the caveats, and how the ranking is made."""
    scaling = {"strong": "Strong scaling (one global batch for every world size)",
               "weak": "Weak scaling (one batch per device, the global batch grows with the world)",
               None: "One world size: no scaling figures"}[kind]
    how = (f"{scaling}. Runs are ranked only against runs on as many devices, from the {confidence(train)} "
           "intervals of tokens/s (from the interval of each run's median step time): a winner is named only "
           "when its interval clears every other's. Speedup intervals combine the run's and the baseline's.")
    caveats = noise.caveats(table) + twins_caveat(table)
    return [Paragraph(" ".join([*verdict(table, kind), limits(table)])), *[Paragraph(c) for c in caveats], Paragraph(how)]


def training_section(runs: RunSet, out: Path, fetch_artifact) -> Section:
    """The Training section, or an empty one when the set has no finished training run."""
    train = training_runs(runs)
    section = Section("Training")
    if train.empty:
        return section
    kind = scaling_kind(train)
    table = scaling_table(train, kind)
    level = confidence(train)
    section.add(*intro(table, kind, train),
                Table(shown_table(table), table, "training.csv",
                      f"{len(table)} training runs by device count, fastest first within each"),
                Figure(training_plots.throughput(table, out / "training_throughput.png"),
                       f"Throughput per layout (tokens/s, all devices), whiskers: its {level} interval"))
    if kind is not None:
        section.add(Figure(training_plots.scaling(table, out / "training_scaling.png", kind),
                           f"Speedup against one baseline, {table['baseline'].iloc[0]} (x), whiskers: its {level} "
                           "interval; dashed: ideal (linear)"))
    breakdown = breakdown_seconds(train).reindex([r for r in table["run"] if r in set(train["label"])]).dropna()
    if not breakdown.empty:
        section.add(Figure(training_plots.breakdown(breakdown, out / "training_breakdown.png"),
                           "Profiled step split into compute, exposed communication, memcpy and idle (ms per step)"))
    if table["mem_peak_allocated_gb"].notna().any():
        section.add(Figure(training_plots.memory(table, out / "training_memory.png"),
                           "Peak memory per device (GB, max over ranks)"
                           + (", line: device capacity (hardware.memory_gb)" if table["memory_capacity_gb"].notna().any()
                              else "; no capacity line: hardware.memory_gb is not set for this hardware")))
    heat = training_plots.layer_heatmap(train, fetch_artifact, out / "training_layers.png", list(table["run"]))
    if heat is not None:
        section.add(Figure(heat, "Time per layer (ms per profiled step, rank 0, forward + backward + optimizer)"))
    return section
