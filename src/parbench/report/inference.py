"""Inference runs: latency tables over input length x batch x output length, lines fitted to
TTFT and E2E against input length, TTFT/TPOT percentiles, tp/pp overhead and efficiency against
the matching single-device run, and prefill/decode op shares (inference_ops.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from parbench.metrics.fits import fit_line
from parbench.report import fmt, noise
from parbench.report.document import Figure, Paragraph, Section, Table
from parbench.report.inference_ops import layer_heatmaps, op_share_blocks, pie_runs, run_name
from parbench.report.inference_plots import plot_latency_vs_input, plot_throughput_bars, plot_vs_batch
from parbench.report.inference_verdict import scaling_table, verdict, with_intervals
from parbench.report.runs import RunSet

MIN_FIT_INPUTS = 3  # distinct values along an axis a line needs: any two points fit one exactly (R² = 1)


def inference_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """Finished inference runs with their model, layout (tp, pp, devices) and series label (`layout`,
    layout_labels) as columns."""
    if runs.empty or "params.workload.name" not in runs:
        return runs.iloc[0:0]
    done = runs[(runs["params.workload.name"] == "inference") & (runs["status"] == "FINISHED")].copy()
    if done.empty:  # e.g. a training sweep: its runs lack the inference params
        return done
    done["tp"] = done["params.parallel.tp"].astype(int)
    done["pp"] = done["params.parallel.pp"].astype(int)
    done["devices"] = done["tp"] * done["pp"]
    done["model"] = done.get("params.model.name", pd.Series("", index=done.index)).fillna("").astype(str)
    done["decode_mode"] = decode_modes(done)
    done["layout"] = layout_labels(done)
    for key in ("input_len", "output_len", "batch_size"):
        done[key] = done[f"params.workload.{key}"].astype(int)
    done["samples"] = timed_samples(done)
    return done.sort_values(["devices", "layout", "input_len", "batch_size", "output_len"])


def layout_labels(runs: pd.DataFrame) -> pd.Series:
    """Each run's series on the page: its layout as the run names name it (`tp2`, `pp2`, `1 rank`),
    after its engine when not the native one and after its model when the runs hold several (every
    table, line and plot series keeps one model's runs apart), then its decode mode unless eager."""
    layout = pd.Series([" ".join(f"{d}{n}" for d, n in (("tp", tp), ("pp", pp)) if n > 1) or "1 rank"
                        for tp, pp in zip(runs["tp"], runs["pp"])], index=runs.index, dtype=str)
    engine = runs.get("params.workload.engine", pd.Series("native", index=runs.index)).fillna("native").astype(str)
    layout = layout.where(engine == "native", engine + " " + layout)
    if runs["model"].nunique() > 1:
        layout = (runs["model"] + " " + layout).str.strip()
    return layout.where(runs["decode_mode"] == "eager", layout + " " + runs["decode_mode"])


def timed_samples(runs: pd.DataFrame) -> pd.Series:
    """Independent latency samples per run: the native engine times a batch's requests together
    (one sample per measured batch), vLLM each request."""
    requests = runs.get("metrics.requests_measured", pd.Series(np.nan, index=runs.index)).astype(float)
    native = runs.get("params.workload.engine", pd.Series("native", index=runs.index)).fillna("native") == "native"
    return (requests / runs["batch_size"]).where(native, requests).round()


def decode_modes(runs: pd.DataFrame) -> pd.Series:
    """Each run's resolved decode mode (the `decode_mode` tag). Runs logged before it existed
    decoded op by op (eager), or as a CUDA graph where their workload.cuda_graph was true. As str,
    whatever the tag column held (none at all for vLLM runs: object): the modes are appended to the
    str layout labels, and pandas 3.0 refuses str + object, even on no rows."""
    modes = runs["tags.decode_mode"] if "tags.decode_mode" in runs else pd.Series(None, index=runs.index, dtype=object)
    modes = modes.fillna("eager")
    if "params.workload.cuda_graph" in runs:
        modes = modes.mask(runs["params.workload.cuda_graph"] == "True", "graph")
    return modes.astype(str)


REQUEST = ["model", "layout", "input_len", "batch_size", "output_len"]
LATENCIES = ("ttft_s", "tpot_s", "e2e_s")


def _with_interval(value, low, high, render) -> str:
    return render(value) if pd.isna(low) else f"{render(value)} ({noise.interval_text(low, high, render)})"


def _request_columns(data: pd.DataFrame) -> dict[str, pd.Series]:
    return {"layout": data["layout"], "input": data["input_len"].map(fmt.number), "batch": data["batch_size"].map(str),
            "output": data["output_len"].map(str)}


def latency_table(runs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Medians per (layout, input length, batch, output length) with their intervals: numbers and display."""
    runs = with_intervals(runs)
    data = runs[["run_id", "label", *REQUEST, "samples", "notes"]].copy()
    for name in LATENCIES:
        for suffix in ("_p50", "_ci_low", "_ci_high"):
            data[name + suffix] = runs.get(f"metrics.{name}{suffix}", pd.Series(np.nan, index=runs.index))
    for name in ("output_tokens_per_s", "output_tokens_per_s_ci_low", "output_tokens_per_s_ci_high"):
        data[name] = runs[name]
    data["mbu"] = runs.get("metrics.mbu", pd.Series(np.nan, index=runs.index))
    data["ci_level"] = noise.interval_levels(runs, LATENCIES)
    shown = pd.DataFrame(_request_columns(data))
    for title, name in (("TTFT", "ttft_s"), ("TPOT", "tpot_s"), ("E2E", "e2e_s")):
        shown[title] = [_with_interval(v, lo, hi, fmt.seconds) for v, lo, hi in
                        zip(data[f"{name}_p50"], data[f"{name}_ci_low"], data[f"{name}_ci_high"])]
    shown["output tokens/s"] = [_with_interval(v, lo, hi, fmt.number) for v, lo, hi in
                                zip(data["output_tokens_per_s"], data["output_tokens_per_s_ci_low"],
                                    data["output_tokens_per_s_ci_high"])]
    if data["mbu"].notna().any():
        shown["MBU"] = data["mbu"].map(fmt.fraction)
    if data["ci_level"].nunique(dropna=False) > 1:  # runs of different batch counts: each row says its own
        shown["interval"] = data["ci_level"].map(fmt.fraction)
    shown["samples"] = data["samples"].map(fmt.number)
    shown["flags"] = data["notes"].replace("", fmt.DASH)
    return shown, data


def percentile_table(runs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """p50/p90/p99 of each latency where the samples support the percentile (p90 from 10, p99 from
    100): a p99 of 5 samples is their maximum, not a tail."""
    names = [f"{m}_p{q}" for m in LATENCIES for q in noise.PERCENTILES]
    data = runs[["run_id", *REQUEST, "samples"]].copy()
    shown = pd.DataFrame({**_request_columns(data), "samples": data["samples"].map(fmt.number)})
    for name in names:
        metric, q = name.rsplit("_p", 1)
        values = runs.get(f"metrics.{name}", pd.Series(np.nan, index=runs.index))
        data[name] = values.where(data["samples"] >= noise.samples_for(int(q)))
        shown[f"{metric.removesuffix('_s').upper()} p{q}"] = data[name].map(fmt.seconds)
    return shown, data


# Each axis of the latency grid: the two held fixed along its lines, and the latencies fitted against it.
FIT_AXES = {"input_len": (("batch_size", "output_len"), ("ttft_s_p50", "e2e_s_p50")),
            "batch_size": (("input_len", "output_len"), ("ttft_s_p50", "tpot_s_p50", "e2e_s_p50")),
            "output_len": (("input_len", "batch_size"), ("e2e_s_p50",))}
AXIS_UNITS = {"input_len": "input token", "batch_size": "request", "output_len": "output token"}
AXIS_NAMES = {"input_len": "input length", "batch_size": "batch size", "output_len": "output length"}


def fit_table(runs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A line per axis (input length, batch, output length), model, layout, values of the other two
    axes and metric (never through two models' points), where the axis has MIN_FIT_INPUTS distinct
    values or more (any two points fit a line exactly, R² = 1), with its slope's 95 % interval (Student's
    t) and whether the slope differs from 0."""
    rows = []
    for axis, (fixed, metrics) in FIT_AXES.items():
        for (model, layout, *held), group in runs.groupby(["model", "layout", *fixed]):
            if group[axis].nunique() < MIN_FIT_INPUTS:
                continue
            for metric in metrics:
                line = fit_line(group[axis], group[f"metrics.{metric}"])
                rows.append({"against": axis, "model": model, "layout": layout, **dict(zip(fixed, held)), "metric": metric,
                             "slope_s_per_unit": line.slope, "slope_ci_low": line.slope_low,
                             "slope_ci_high": line.slope_high, "intercept_s": line.intercept, "r2": line.r2,
                             "points": line.points, "trend": trend(line.slope_low, line.slope_high)})
    data = pd.DataFrame(rows, columns=["against", "model", "layout", *FIT_AXES, "metric", "slope_s_per_unit", "slope_ci_low",
                                       "slope_ci_high", "intercept_s", "r2", "points", "trend"])
    if data.empty:
        return data, data
    held = lambda name: data[name].map(lambda v: "-" if pd.isna(v) else str(int(v)))  # noqa: E731
    shown = pd.DataFrame({"against": data["against"].map(AXIS_NAMES),
                          "layout": data["layout"], "input": held("input_len"), "batch": held("batch_size"),
                          "output": held("output_len"),
                          "latency": data["metric"].map({"ttft_s_p50": "TTFT", "tpot_s_p50": "TPOT", "e2e_s_p50": "E2E"}),
                          "slope": [_with_interval(v, lo, hi, fmt.seconds) + f" / {AXIS_UNITS[a]}" for v, lo, hi, a in
                                    zip(data["slope_s_per_unit"], data["slope_ci_low"], data["slope_ci_high"],
                                        data["against"])],
                          "intercept": data["intercept_s"].map(fmt.seconds), "R²": data["r2"].map(lambda v: f"{v:.3f}"),
                          "points": data["points"].map(str), "trend": data["trend"]})
    return shown, data


def trend(low: float, high: float) -> str:
    if pd.isna(low):
        return "no interval"
    return "grows" if low > 0 else "falls (implausible: noise?)" if high < 0 else "none beyond noise"


def overhead_shown(table: pd.DataFrame) -> pd.DataFrame:
    shown = pd.DataFrame({"layout": table["layout"], "input": table["input_len"].map(fmt.number),
                          "batch": table["batch_size"].map(str)})
    for metric, title in (("ttft_s_p50", "TTFT"), ("tpot_s_p50", "TPOT"), ("e2e_s_p50", "E2E"),
                          ("output_tokens_per_s", "tokens/s")):
        column = f"overhead_pct_{metric}"
        if column in table:
            shown[f"{title} overhead"] = table[column].map(lambda v: fmt.percent(v, signed=True))
    if "scaling_efficiency" in table:
        shown["efficiency vs 1 device"] = [_with_interval(v, lo, hi, fmt.fraction) for v, lo, hi in zip(
            table["scaling_efficiency"], table["scaling_efficiency_ci_low"], table["scaling_efficiency_ci_high"])]
        shown["flags"] = table["notes"].fillna("").replace("", fmt.DASH)
    return shown


def intro(done: pd.DataFrame, overhead: pd.DataFrame) -> list[Paragraph]:
    """The verdict per request shape, then the caveats the figures call for."""
    lines = verdict(done)
    text = " ".join(lines) if lines else "Each request shape ran one layout only: nothing to rank."
    flagged = with_intervals(done).assign(run=[run_name(r) for _, r in done.iterrows()])
    if not overhead.empty and "notes" in overhead:
        flagged = pd.concat([flagged, overhead.assign(run=overhead["layout"], notes=overhead["notes"].fillna(""))])
    return [Paragraph(text), *[Paragraph(c) for c in noise.caveats(flagged)]]


def latency_note(runs: pd.DataFrame) -> Paragraph:
    """How to read the latency table, with the level its intervals have as the runs logged it."""
    levels = noise.interval_levels(runs, LATENCIES)
    named = noise.levels_text(levels)
    interval = (f"interval over the measured batches, at the level in its row's 'interval' column ({named}: the "
                "coverage the order statistics of the run's batches reach)" if levels.nunique(dropna=False) > 1 else
                f"{named} interval over the measured batches" if named else
                "interval over the measured batches (its level was not logged)")
    return Paragraph("Medians over the measured requests (vLLM's definitions: TTFT to the first token, TPOT = "
                     "(E2E - TTFT) / (output length - 1), E2E to the last token), in brackets their "
                     f"{interval}; tokens/s follows the E2E interval.")


def inference_section(runs: RunSet, out: Path, fetch_artifact) -> Section:
    """The Inference section, or an empty one when the set has no finished inference run."""
    done = inference_runs(runs.of("inference"))
    section = Section("Inference")
    if done.empty:
        return section
    overhead = scaling_table(done)
    shown, data = latency_table(done)
    section.add(*intro(done, overhead), latency_note(done),
                Table(shown, data, "inference_latency.csv", "Latency per layout, input length, batch and output length"))
    shown, data = fit_table(done)
    if not data.empty:
        section.add(Table(shown, data, "inference_fits.csv",
                          "Least-squares lines of latency against input length, batch size and output length (one "
                          "axis at a time, the other two held: '-' marks the axis; slope with its 95 % interval; "
                          f"only along an axis with {MIN_FIT_INPUTS} values or more)"))
    path = plot_latency_vs_input(done, out / "inference_latency_vs_input.png", MIN_FIT_INPUTS)
    if path is not None:
        section.add(Figure(path, "TTFT and E2E (ms) against input length (tokens): points measured with their "
                                 f"intervals; a fitted line where {MIN_FIT_INPUTS} input lengths or more were measured "
                                 "and its slope differs from 0 beyond its interval"))
    shown, data = percentile_table(done)
    section.add(Table(shown, data, "inference_percentiles.csv", "Latency percentiles over the timed samples (a "
                      "percentile is shown only from the samples it needs: p90 from 10, p99 from 100)"))
    if not overhead.empty:
        section.add(Paragraph("Each tp/pp run against the single-device run with the same request, engine, model "
                              "and dtype: overhead + is slower (tokens/s: + is less throughput); efficiency = "
                              "tokens/s / (single-device tokens/s x devices), with the interval of both runs."),
                    Table(overhead_shown(overhead), overhead, "inference_overhead.csv", "tp/pp overhead against one device"))
    for plot, name, caption in ((plot_vs_batch, "inference_vs_batch.png", "TTFT and TPOT (ms) against batch size"),
                                (plot_throughput_bars, "inference_throughput.png",
                                 "Output tokens/s per layout and request shape, whiskers: the interval from E2E")):
        path = plot(with_intervals(done), out / name)
        if path is not None:
            section.add(Figure(path, caption))
    for row, shares in pie_runs(done):
        section.add(*op_share_blocks(row, shares, out), *layer_heatmaps(row, fetch_artifact, out))
    return section
