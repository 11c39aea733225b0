"""Inference runs: latency tables over input length x batch x output length, lines fitted to
TTFT and E2E against input length, TTFT/TPOT percentiles, tp/pp overhead and efficiency against
the matching single-device run, and prefill/decode op shares."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from parbench.report import fmt
from parbench.report.document import Figure, Paragraph, Section, Table
from parbench.metrics.fits import fit_line
from parbench.metrics.plots import heatmap, layers_in_order, plot_phase_pies
from parbench.paths import INFERENCE_LAYERS_FILE
from parbench.report.inference_plots import plot_latency_vs_input, plot_throughput_bars, plot_vs_batch
from parbench.report.runs import RunSet
from parbench.tracking.store import Store

# Runs that differ only in the layout are compared: these params must match.
SAME_REQUEST = ("params.workload.engine", "params.workload.input_len", "params.workload.output_len",
                "params.workload.batch_size", "params.workload.dtype", "decode_mode",
                "params.model.name", "params.hardware.name")
# (metric, lower is better): overhead % = layout / single device - 1, sign so that + is worse.
COMPARED = (("ttft_s_p50", True), ("tpot_s_p50", True), ("e2e_s_p50", True), ("output_tokens_per_s", False))


def inference_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """Finished inference runs with their layout (tp, pp, devices, a 'tpX_ppY' label, prefixed by the
    engine when it is not the native one) as columns."""
    if runs.empty or "params.workload.name" not in runs:
        return runs.iloc[0:0]
    done = runs[(runs["params.workload.name"] == "inference") & (runs["status"] == "FINISHED")].copy()
    if done.empty:  # e.g. a training sweep: its runs lack the inference params
        return done
    done["tp"] = done["params.parallel.tp"].astype(int)
    done["pp"] = done["params.parallel.pp"].astype(int)
    done["devices"] = done["tp"] * done["pp"]
    done["layout"] = "tp" + done["tp"].astype(str) + "_pp" + done["pp"].astype(str)
    if "params.workload.engine" in done:  # both engines in one sweep: their series apart
        other = done["params.workload.engine"].fillna("native") != "native"
        done.loc[other, "layout"] = done.loc[other, "params.workload.engine"].astype(str) + "_" + done.loc[other, "layout"].astype(str)
    done["decode_mode"] = decode_modes(done)
    fast = done["decode_mode"] != "eager"
    done.loc[fast, "layout"] += "_" + done.loc[fast, "decode_mode"]
    for key in ("input_len", "output_len", "batch_size"):
        done[key] = done[f"params.workload.{key}"].astype(int)
    return done


def decode_modes(runs: pd.DataFrame) -> pd.Series:
    """Each run's resolved decode mode (the `decode_mode` tag). Runs logged before it existed
    decoded op by op (eager), or as a CUDA graph where their workload.cuda_graph was true."""
    modes = runs["tags.decode_mode"] if "tags.decode_mode" in runs else pd.Series(None, index=runs.index)
    modes = modes.fillna("eager")
    if "params.workload.cuda_graph" in runs:
        modes = modes.mask(runs["params.workload.cuda_graph"] == "True", "graph")
    return modes


def scaling_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per multi-device run that has a matching tp=1,pp=1 run in the same sweep:
    overhead % per compared metric and scaling efficiency = throughput / (single x devices)."""
    rows = []
    baselines = runs[runs["devices"] == 1]
    for _, run in runs[runs["devices"] > 1].iterrows():
        match = baselines
        for key in SAME_REQUEST:
            if key in runs:  # runs logged before a param existed lack its column
                match = match[match[key] == run[key]]
        if match.empty:
            continue
        base = match.iloc[-1]
        row = {"run_id": run["run_id"], "layout": run["layout"], "input_len": run["input_len"],
               "batch_size": run["batch_size"], "baseline_run_id": base["run_id"]}
        for metric, lower_better in COMPARED:
            value, ref = run.get(f"metrics.{metric}"), base.get(f"metrics.{metric}")
            if pd.notna(value) and pd.notna(ref) and ref:
                ratio = value / ref
                row[f"overhead_pct_{metric}"] = 100 * (ratio - 1 if lower_better else 1 / ratio - 1)
        throughput, ref = run.get("metrics.output_tokens_per_s"), base.get("metrics.output_tokens_per_s")
        if pd.notna(throughput) and pd.notna(ref) and ref:
            row["scaling_efficiency"] = throughput / (ref * run["devices"])
        rows.append(row)
    return pd.DataFrame(rows)


def log_scaling(store: Store, table: pd.DataFrame) -> None:
    """Each multi-device run gets its overhead and efficiency as its own MLflow metrics."""
    for _, row in table.iterrows():
        metrics = {k: v for k, v in row.items()
                   if (k.startswith("overhead_pct_") or k == "scaling_efficiency") and pd.notna(v)}
        store.log_metrics(row["run_id"], metrics)


REQUEST = ["layout", "input_len", "batch_size", "output_len"]
MAX_PIES = 4  # op-share figures shown (one per layout); every run's shares are in its own metrics


def latency_table(runs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Medians per (layout, input length, batch, output length): numbers and their display."""
    data = runs.sort_values(REQUEST)[["run_id", "label", *REQUEST]].copy()
    for metric in ("ttft_s_p50", "tpot_s_p50", "e2e_s_p50", "output_tokens_per_s", "mbu"):
        data[metric] = runs.get(f"metrics.{metric}", pd.Series(index=runs.index, dtype=float))
    shown = pd.DataFrame({"layout": data["layout"], "input": data["input_len"].map(fmt.number),
                          "batch": data["batch_size"].map(str), "output": data["output_len"].map(str),
                          "TTFT": data["ttft_s_p50"].map(fmt.seconds), "TPOT": data["tpot_s_p50"].map(fmt.seconds),
                          "E2E": data["e2e_s_p50"].map(fmt.seconds),
                          "output tokens/s": data["output_tokens_per_s"].map(lambda v: fmt.rate(v, "tok/s"))})
    if data["mbu"].notna().any():
        shown["MBU"] = data["mbu"].map(fmt.fraction)
    return shown, data


def percentile_table(runs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    names = [f"{m}_p{q}" for m in ("ttft_s", "tpot_s", "e2e_s") for q in (50, 90, 99)]
    data = runs.sort_values(REQUEST)[["run_id", *REQUEST]].copy()
    for name in names:
        data[name] = runs.get(f"metrics.{name}", pd.Series(index=runs.index, dtype=float))
    shown = pd.DataFrame({"layout": data["layout"], "input": data["input_len"].map(fmt.number),
                          "batch": data["batch_size"].map(str), "output": data["output_len"].map(str)})
    for name in names:
        metric, q = name.rsplit("_p", 1)
        shown[f"{metric.removesuffix('_s').upper()} p{q}"] = data[name].map(fmt.seconds)
    return shown, data


# Each axis of the latency grid: the two held fixed along its lines, and the latencies fitted against it.
FIT_AXES = {"input_len": (("batch_size", "output_len"), ("ttft_s_p50", "e2e_s_p50")),
            "batch_size": (("input_len", "output_len"), ("ttft_s_p50", "tpot_s_p50", "e2e_s_p50")),
            "output_len": (("input_len", "batch_size"), ("e2e_s_p50",))}
AXIS_UNITS = {"input_len": "input token", "batch_size": "request", "output_len": "output token"}
AXIS_NAMES = {"input_len": "input length", "batch_size": "batch size", "output_len": "output length"}


def fit_table(runs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A line per axis (input length, batch, output length), layout, values of the other two axes
    and metric, where the axis has 2 values or more."""
    rows = []
    for axis, (fixed, metrics) in FIT_AXES.items():
        for (layout, *held), group in runs.groupby(["layout", *fixed]):
            for metric in metrics:
                line = fit_line(group[axis], group[f"metrics.{metric}"])
                if line is not None:
                    rows.append({"against": axis, "layout": layout, **dict(zip(fixed, held)), "metric": metric,
                                 "slope_s_per_unit": line.slope, "intercept_s": line.intercept, "r2": line.r2,
                                 "points": line.points})
    data = pd.DataFrame(rows, columns=["against", "layout", *FIT_AXES, "metric", "slope_s_per_unit", "intercept_s",
                                       "r2", "points"])
    if data.empty:
        return data, data
    held = lambda name: data[name].map(lambda v: "-" if pd.isna(v) else str(int(v)))
    shown = pd.DataFrame({"against": data["against"].map(AXIS_NAMES),
                          "layout": data["layout"], "input": held("input_len"), "batch": held("batch_size"),
                          "output": held("output_len"),
                          "latency": data["metric"].map({"ttft_s_p50": "TTFT", "tpot_s_p50": "TPOT", "e2e_s_p50": "E2E"}),
                          "slope": [fmt.seconds(v) + f" / {AXIS_UNITS[a]}" for v, a in zip(data["slope_s_per_unit"], data["against"])],
                          "intercept": data["intercept_s"].map(fmt.seconds), "R²": data["r2"].map(lambda v: f"{v:.3f}"),
                          "points": data["points"].map(str)})
    return shown, data


def overhead_shown(table: pd.DataFrame) -> pd.DataFrame:
    shown = pd.DataFrame({"layout": table["layout"], "input": table["input_len"].map(fmt.number),
                          "batch": table["batch_size"].map(str)})
    for metric, title in (("ttft_s_p50", "TTFT"), ("tpot_s_p50", "TPOT"), ("e2e_s_p50", "E2E"),
                          ("output_tokens_per_s", "tokens/s")):
        column = f"overhead_pct_{metric}"
        if column in table:
            shown[f"{title} overhead"] = table[column].map(lambda v: fmt.percent(v, signed=True))
    if "scaling_efficiency" in table:
        shown["efficiency vs 1 device"] = table["scaling_efficiency"].map(fmt.fraction)
    return shown


def op_shares(run: pd.Series) -> dict[str, dict[str, float]]:
    """{'prefill': {'attention': 41.0, ...}, 'decode': {...}} from the run's *_op_pct_* metrics."""
    shares: dict[str, dict[str, float]] = {}
    for phase in ("prefill", "decode"):
        prefix = f"metrics.{phase}_op_pct_"
        table = {k.removeprefix(prefix): float(v) for k, v in run.items()
                 if k.startswith(prefix) and pd.notna(v) and v > 0}
        if table:
            shares[phase] = dict(sorted(table.items(), key=lambda kv: -kv[1]))
    return shares


def pie_runs(runs: pd.DataFrame) -> list[tuple[pd.Series, dict]]:
    """One profiled run per layout (its longest input, largest batch), at most MAX_PIES."""
    chosen = []
    for _, group in runs.sort_values(["input_len", "batch_size"], ascending=False).groupby("layout", sort=False):
        profiled = [(row, op_shares(row)) for _, row in group.iterrows()]
        chosen += [p for p in profiled if p[1]][:1]
    return chosen[:MAX_PIES]


def layer_grids(path: Path) -> dict[str, pd.DataFrame]:
    """{phase: layers (rows) x op types (columns, largest first), ms per step} from the native
    engine's inference_layers.csv."""
    table = pd.read_csv(path)
    grids = {}
    for phase in ("prefill", "decode"):
        rows = table[table["phase"] == phase]
        if not rows.empty:
            grid = rows.pivot_table(index="layer", columns="op_type", values="ms_per_step", aggfunc="sum", fill_value=0.0)
            grids[phase] = layers_in_order(grid[grid.sum().sort_values(ascending=False).index])
    return grids


def layer_heatmaps(row: pd.Series, fetch_artifact, out: Path) -> list[Figure]:
    """Time per layer and op type of a profiled native run, one heat map per phase."""
    path = fetch_artifact(row["run_id"], INFERENCE_LAYERS_FILE)
    if path is None:
        return []
    return [Figure(heatmap(grid, out / f"inference_layers_{phase}_{row['run_id'][:8]}.png",
                           f"{phase}: time per layer and op type", "ms per step", 2),
                   f"{phase.capitalize()}: ms per step of each layer (rows) by op type (columns), {row['label']}, "
                   "mean over the ranks that ran the layer")
            for phase, grid in layer_grids(path).items()]


def inference_section(runs: RunSet, out: Path, fetch_artifact) -> Section:
    """The Inference section, or an empty one when the set has no finished inference run."""
    done = inference_runs(runs.of("inference"))
    section = Section("Inference")
    if done.empty:
        return section
    shown, data = latency_table(done)
    section.add(Paragraph("Medians over the measured requests (vLLM's definitions: TTFT to the first token, "
                          "TPOT = (E2E - TTFT) / (output length - 1), E2E to the last token)."),
                Table(shown, data, "inference_latency.csv", "Latency per layout, input length, batch and output length"))
    shown, data = fit_table(done)
    if not data.empty:
        section.add(Table(shown, data, "inference_fits.csv",
                          "Least-squares lines of latency against input length, batch size and output length "
                          "(one axis at a time, the other two held: '-' marks the axis)"))
    plot = plot_latency_vs_input(done, out / "inference_latency_vs_input.png")
    if plot is not None:
        section.add(Figure(plot, "TTFT and E2E (s) against input length (tokens), points measured, lines fitted"))
    shown, data = percentile_table(done)
    section.add(Table(shown, data, "inference_percentiles.csv", "Latency percentiles over requests"))
    overhead = scaling_table(done)
    if not overhead.empty:
        section.add(Paragraph("Each tp/pp run against the single-device run with the same request, engine, model "
                              "and dtype: overhead + is slower (tokens/s: + is less throughput); efficiency = "
                              "tokens/s / (single-device tokens/s x devices)."),
                    Table(overhead_shown(overhead), overhead, "inference_overhead.csv", "tp/pp overhead against one device"))
    for plot, name, caption in ((plot_vs_batch, "inference_vs_batch.png", "TTFT and TPOT (s) against batch size"),
                                (plot_throughput_bars, "inference_throughput.png", "Output tokens/s per layout")):
        path = plot(done, out / name)
        if path is not None:
            section.add(Figure(path, caption))
    for row, shares in pie_runs(done):
        path = plot_phase_pies(shares, out / f"inference_ops_{row['run_id'][:8]}.png", row["label"])
        data = op_share_table(shares)
        section.add(Figure(path, f"Prefill vs decode: share of op time (%) by op type, {row['label']} (rank 0)"),
                    Table(data.map(fmt.percent).reset_index(), data.reset_index(), f"inference_ops_{row['run_id'][:8]}.csv",
                          f"Share of op time (%) by op type, {row['label']}"),
                    *layer_heatmaps(row, fetch_artifact, out))
    return section


def op_share_table(shares: dict[str, dict[str, float]]) -> pd.DataFrame:
    """Op types as rows (largest first over the phases), one column per phase, in percent."""
    table = pd.DataFrame(shares).fillna(0.0)
    table.index.name = "op type"
    return table.loc[table.max(axis=1).sort_values(ascending=False).index]
