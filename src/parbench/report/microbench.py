"""Microbenchmark runs: collective bandwidth against message size per collective and group size
with a fitted alpha-beta model (its alpha and beta go on the sweep's parent run), matmul TFLOP/s
against size with the peak, the GPU-to-GPU copy matrix and memory bandwidth against the spec."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from parbench.report import fmt, microbench_plots
from parbench.report.document import Figure, Paragraph, Section, Table
from parbench.report.fits import fit_alpha_beta
from parbench.report.runs import RunSet

POINT = re.compile(r"metrics\.(time_us|algbw_gbps|busbw_gbps)/(\w+)/(\d+)$")
SHAPE = re.compile(r"metrics\.matmul_tflops/(\d+)x(\d+)x(\d+)$")
MEMBW = re.compile(r"metrics\.membw_gbps/(\d+)$")
P2P = re.compile(r"metrics\.p2p_gbps/gpu(\d+)_to_gpu(\d+)$")
UNSAFE = re.compile(r"[^\w.=-]")  # characters MLflow metric names refuse


def _param(run: pd.Series, key: str) -> float | None:
    value = pd.to_numeric(run.get(f"params.{key}"), errors="coerce")
    return None if pd.isna(value) or value <= 0 else float(value)


def _runs_if_several(shown: pd.DataFrame) -> pd.DataFrame:
    """A `run` column says something only when the table holds several runs."""
    return shown.drop(columns="run") if shown["run"].nunique() <= 1 else shown


def _sorted(rows: list[dict], by: str) -> pd.DataFrame:
    """Rows as a frame ordered by run, then `by`; empty without rows."""
    return pd.DataFrame(rows).sort_values(["run", by]).reset_index(drop=True) if rows else pd.DataFrame()


def collective_points(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (run, collective, size): time_us, algbw_gbps, busbw_gbps, group size."""
    rows: dict[tuple, dict] = {}
    for _, run in runs.iterrows():
        for column, value in run.items():
            match = POINT.match(column)
            if match and pd.notna(value):
                key = (run["run_id"], match[2], int(match[3]))
                rows.setdefault(key, {"run_id": key[0], "run": run["label"], "group_size": run["world_size"],
                                      "collective": key[1], "size_bytes": key[2]})[match[1]] = float(value)
    return pd.DataFrame(rows.values()).sort_values(["collective", "group_size", "run", "size_bytes"]) if rows \
        else pd.DataFrame()


def alpha_beta_table(points: pd.DataFrame) -> pd.DataFrame:
    """alpha (µs per call), bandwidth 1/beta (GB/s, algorithm bytes) and R² per collective and run."""
    rows = []
    for (collective, group, run), curve in points.groupby(["collective", "group_size", "run"], sort=False):
        fit = fit_alpha_beta(curve["size_bytes"], curve["time_us"] * 1e-6)
        if fit is not None:
            rows.append({"collective": collective, "group_size": group, "run": run, "alpha_us": fit.alpha_s * 1e6,
                         "beta_s_per_byte": fit.beta_s_per_byte, "bandwidth_gbps": fit.bandwidth_gbps,
                         "r2": fit.r2, "points": fit.points})
    return pd.DataFrame(rows)


def parent_metrics(fits: pd.DataFrame) -> dict[str, float]:
    """alpha_us/<collective>/n<group> and beta_gbps/<collective>/n<group> (the bandwidth 1/beta);
    with several runs of one collective and group size (e.g. two dtypes) the run's label is added."""
    metrics = {}
    counts = fits.groupby(["collective", "group_size"])["run"].transform("count")
    for row, count in zip(fits.itertuples(), counts):
        suffix = f"{row.collective}/n{row.group_size}" + (f"/{UNSAFE.sub('_', row.run)}" if count > 1 else "")
        metrics[f"alpha_us/{suffix}"] = row.alpha_us
        metrics[f"beta_gbps/{suffix}"] = row.bandwidth_gbps
    return metrics


def collectives_subsection(runs: pd.DataFrame, out: Path, metrics: dict[str, float]) -> Section:
    section = Section("Collectives")
    points = collective_points(runs)
    if points.empty or "time_us" not in points:
        return section
    fits = alpha_beta_table(points)
    metrics.update(parent_metrics(fits))
    shown = pd.DataFrame({"collective": fits["collective"], "ranks": fits["group_size"].map(str), "run": fits["run"],
                          "alpha (latency)": (fits["alpha_us"] * 1e-6).map(fmt.seconds),
                          "1/beta (bandwidth)": fits["bandwidth_gbps"].map(lambda v: fmt.rate(v, "GB/s")),
                          "R² (log time)": fits["r2"].map(lambda v: f"{v:.3f}"), "sizes": fits["points"].map(str)})
    return section.add(
        Paragraph("time(size) = alpha + beta x size, fitted by least squares on relative error over every measured "
                  "size; 1/beta is the algorithm bandwidth (size / time) of large messages. On the sweep's parent "
                  "run: metrics `alpha_us/<collective>/n<ranks>` and `beta_gbps/<collective>/n<ranks>`."),
        Table(_runs_if_several(shown), fits, "collectives_alpha_beta.csv", "Latency-bandwidth model per collective and group size"),
        Figure(microbench_plots.bandwidth_curves(points, fits, out / "collectives_bandwidth.png"),
               "Bus bandwidth (solid) and algorithm bandwidth (dashed) in GB/s against message size; "
               "dotted: the alpha-beta model's algbw"))


def matmul_subsection(runs: pd.DataFrame, out: Path) -> Section:
    section = Section("Matmul")
    rows = []
    for _, run in runs.iterrows():
        dtype = run.get("params.workload.dtype")
        peak = _param(run, f"hardware.peak_tflops.{dtype}")
        for column, value in run.items():
            match = SHAPE.match(column)
            if match and pd.notna(value):
                m, k, n = (int(g) for g in match.groups())
                rows.append({"run": run["label"], "dtype": dtype, "shape": f"{m}x{k}x{n}", "flops": 2.0 * m * k * n,
                             "tflops": float(value), "peak_tflops": peak,
                             "peak_fraction": float(value) / peak if peak else None})
    data = _sorted(rows, "flops")
    if data.empty:
        return section
    shown = pd.DataFrame({"run": data["run"], "dtype": data["dtype"], "M x K x N": data["shape"],
                          "TFLOP/s": data["tflops"].map(fmt.number), "peak": data["peak_tflops"].map(fmt.number),
                          "of peak": data["peak_fraction"].map(fmt.fraction)})
    return _with_figure(section, shown, data, "Achieved TFLOP/s per shape (2MKN / median time)",
                        microbench_plots.matmul, out / "matmul_tflops.png",
                        "Matmul TFLOP/s against size (M x K x N), dashed: the dtype's dense peak")


def _with_figure(section: Section, shown: pd.DataFrame, data: pd.DataFrame, caption: str, plot, png: Path,
                 figure_caption: str) -> Section:
    """A table (its numbers in <png name>.csv) and the figure drawn from the same numbers."""
    return section.add(Table(_runs_if_several(shown), data, png.with_suffix(".csv").name, caption),
                       Figure(plot(data, png), figure_caption))


def membw_subsection(runs: pd.DataFrame, out: Path) -> Section:
    section = Section("Memory bandwidth")
    rows = [{"run": run["label"], "size_bytes": int(match[1]), "gbps": float(value),
             "spec_gbps": _param(run, "hardware.hbm_bandwidth_gbps")}
            for _, run in runs.iterrows() for column, value in run.items()
            if (match := MEMBW.match(column)) and pd.notna(value)]
    data = _sorted(rows, "size_bytes")
    if data.empty:
        return section
    data["spec_fraction"] = data["gbps"] / data["spec_gbps"]
    shown = pd.DataFrame({"run": data["run"], "size": data["size_bytes"].map(fmt.size),
                          "copy bandwidth": data["gbps"].map(lambda v: fmt.rate(v, "GB/s")),
                          "spec": data["spec_gbps"].map(lambda v: fmt.rate(v, "GB/s")),
                          "of spec": data["spec_fraction"].map(fmt.fraction)})
    return _with_figure(section, shown, data, "Device copy bandwidth (read + write bytes / time)",
                        microbench_plots.membw, out / "membw.png",
                        "Copy bandwidth (GB/s) against size, " + ("dashed: the spec (hardware.hbm_bandwidth_gbps)"
                                                                   if data["spec_gbps"].notna().any() else
                                                                   "no spec line: hardware.hbm_bandwidth_gbps is not set"))


def p2p_subsection(runs: pd.DataFrame, out: Path) -> Section:
    section = Section("GPU-to-GPU copies")
    for _, run in runs.iterrows():
        cells = {(int(m[1]), int(m[2])): float(v) for c, v in run.items() if (m := P2P.match(c)) and pd.notna(v)}
        if not cells:
            continue
        size = 1 + max(max(pair) for pair in cells)
        matrix = pd.DataFrame([[cells.get((i, j)) for j in range(size)] for i in range(size)],
                              index=[f"gpu{i}" for i in range(size)], columns=[f"gpu{j}" for j in range(size)])
        name = f"p2p_{run['run_id'][:8]}"
        section.add(Table(matrix.reset_index(names="source").map(lambda v: v if isinstance(v, str) else fmt.number(v)),
                          matrix.reset_index(names="source"), f"{name}.csv", f"Copy bandwidth (GB/s), {run['label']}"),
                    Figure(microbench_plots.p2p_heatmap(matrix, out / f"{name}.png"),
                           f"GPU-to-GPU copy bandwidth (GB/s, one direction), source x destination, {run['label']}"))
    return section


def microbench_section(runs: RunSet, out: Path, metrics: dict[str, float]) -> Section:
    """The Microbenchmarks section; `metrics` receives the alpha-beta fits for the parent run."""
    section = Section("Microbenchmarks")
    subsections = [collectives_subsection(runs.of("collectives"), out, metrics),
                   matmul_subsection(runs.of("matmul"), out), p2p_subsection(runs.of("p2p"), out),
                   membw_subsection(runs.of("membw"), out)]
    section.subsections = [s for s in subsections if s]
    return section
