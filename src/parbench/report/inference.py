"""Inference sweeps from MLflow: tp/pp overhead and scaling efficiency against the matching
single-device run, and plots (latency vs input length with a fitted curve, TTFT/TPOT vs batch,
throughput per layout, prefill/decode op-type pies)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from parbench.report.summary import format_runs  # noqa: E402
from parbench.tracking.store import Store  # noqa: E402

# Runs that differ only in the layout are compared: these params must match.
SAME_REQUEST = ("params.workload.engine", "params.workload.input_len", "params.workload.output_len",
                "params.workload.batch_size", "params.workload.dtype", "decode_mode",
                "params.model.name", "params.hardware.name")
# (metric, lower is better): overhead % = layout / single device - 1, sign so that + is worse.
COMPARED = (("ttft_s_p50", True), ("tpot_s_p50", True), ("e2e_s_p50", True), ("output_tokens_per_s", False))
SCALING_CSV = "inference_scaling.csv"


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
        done.loc[other, "layout"] = done.loc[other, "params.workload.engine"] + "_" + done.loc[other, "layout"]
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


def fit_curve(x: np.ndarray, y: np.ndarray) -> np.poly1d | None:
    """Least-squares a + b*L + c*L^2 (attention is quadratic in length, the rest linear);
    a line with fewer than 4 points, nothing with fewer than 2."""
    if len(np.unique(x)) < 2:
        return None
    return np.poly1d(np.polyfit(x, y, 2 if len(np.unique(x)) >= 4 else 1))


def plot_latency_vs_input(runs: pd.DataFrame, path: Path) -> Path | None:
    """TTFT and E2E against input length, one series per layout and batch size, with fitted curves."""
    if runs["input_len"].nunique() < 2:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, metric in zip(axes, ("ttft_s_p50", "e2e_s_p50")):
        for (layout, batch), group in runs.groupby(["layout", "batch_size"]):
            group = group.sort_values("input_len")
            x, y = group["input_len"].to_numpy(float), group[f"metrics.{metric}"].to_numpy(float)
            points = ax.plot(x, y, "o", label=f"{layout} b={batch}")[0]
            curve = fit_curve(x, y)
            if curve is not None:
                grid = np.linspace(x.min(), x.max(), 100)
                ax.plot(grid, curve(grid), "-", color=points.get_color(), alpha=0.7)
        ax.set(xlabel="input length (tokens)", ylabel=f"{metric} (s)", title=f"{metric} vs input length")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    return save(fig, path)


def plot_vs_batch(runs: pd.DataFrame, path: Path) -> Path | None:
    """TTFT and TPOT against batch size, one series per layout and input length."""
    if runs["batch_size"].nunique() < 2:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, metric in zip(axes, ("ttft_s_p50", "tpot_s_p50")):
        for (layout, length), group in runs.groupby(["layout", "input_len"]):
            group = group.sort_values("batch_size")
            ax.plot(group["batch_size"], group[f"metrics.{metric}"], "o-", label=f"{layout} in={length}")
        ax.set(xlabel="batch size", ylabel=f"{metric} (s)", title=f"{metric} vs batch size", xscale="log", yscale="log")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    return save(fig, path)


def plot_throughput_bars(runs: pd.DataFrame, path: Path) -> Path | None:
    """Output tokens/s per layout, grouped by (input length, batch size)."""
    table = runs.pivot_table(index=["input_len", "batch_size"], columns="layout",
                             values="metrics.output_tokens_per_s", aggfunc="median")
    if table.empty:
        return None
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(table) * len(table.columns)), 4.5))
    table.plot.bar(ax=ax)
    ax.set(xlabel="(input length, batch size)", ylabel="output tokens/s", title="Throughput per tp/pp layout")
    ax.grid(axis="y", alpha=0.3)
    return save(fig, path)


def save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def inference_sweep_report(store: Store, parent_id: str, runs: pd.DataFrame, out_dir: Path) -> list[Path]:
    """At a sweep's end: overhead/efficiency metrics on its tp/pp runs, a CSV and the plots,
    logged on the parent run. Nothing when the sweep has no finished inference run."""
    runs = inference_runs(runs)
    if runs.empty:
        return []
    files = []
    table = scaling_table(runs)
    if not table.empty:
        log_scaling(store, table)
        table.to_csv(out_dir / SCALING_CSV, index=False)
        files.append(out_dir / SCALING_CSV)
        print(format_runs(table.drop(columns=["run_id", "baseline_run_id"]),
                          title="tp/pp against the matching single-device run (overhead %: + is worse)"))
    files += [p for p in (plot_latency_vs_input(runs, out_dir / "latency_vs_input_len.png"),
                          plot_vs_batch(runs, out_dir / "ttft_tpot_vs_batch.png"),
                          plot_throughput_bars(runs, out_dir / "throughput_by_layout.png")) if p is not None]
    store.log_artifacts(parent_id, files, "inference")
    return files
