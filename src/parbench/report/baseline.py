"""--baseline: each section's figures beside the same run of another sweep (matched by its label,
the settings that differ inside each set), every change marked significant or not from the runs'
confidence intervals."""

from __future__ import annotations

import pandas as pd

from parbench.report import fmt
from parbench.report.document import Paragraph, Section, Table
from parbench.report.runs import RunSet


def tok_s(value) -> str:
    return fmt.rate(value, "tok/s")


def gb_s(value) -> str:
    return fmt.rate(value, "GB/s")


# Per section: (metric, renderer, the interval that decides significance, or None: none is logged).
# Throughput, MFU and output tokens/s move with the inverse of a timed median, so its interval decides.
COMPARED = {
    "Training": (("step_time_s", fmt.seconds, "step_time_s"), ("throughput_tokens_per_s", tok_s, "step_time_s"),
                 ("throughput_tokens_per_s_per_device", tok_s, "step_time_s"), ("mfu", fmt.fraction, "step_time_s"),
                 ("comm_pct", fmt.percent, None), ("exposed_comm_pct", fmt.percent, None),
                 ("bubble_pct", fmt.percent, None), ("mem_peak_allocated_gb", fmt.gigabytes, None)),
    "Inference": (("ttft_s_p50", fmt.seconds, "ttft_s"), ("tpot_s_p50", fmt.seconds, "tpot_s"),
                  ("e2e_s_p50", fmt.seconds, "e2e_s"), ("output_tokens_per_s", tok_s, "e2e_s"),
                  ("ttft_s_p99", fmt.seconds, None), ("tpot_s_p99", fmt.seconds, None), ("mbu", fmt.fraction, None)),
    "Microbenchmarks": (("busbw_gbps_avg", gb_s, None), ("matmul_tflops", lambda v: fmt.rate(v, "TFLOP/s"), None),
                        ("membw_gbps", gb_s, None)),
}
RENDER = {metric: show for rows in COMPARED.values() for metric, show, _ in rows}


def significance(now: pd.Series, before: pd.Series, interval: str | None) -> str:
    """`significant` when the two intervals do not overlap, `within noise` when they do."""
    if interval is None:
        return "no interval logged"
    low, high = f"metrics.{interval}_ci_low", f"metrics.{interval}_ci_high"
    if any(pd.isna(run.get(key)) for run in (now, before) for key in (low, high)):
        return "no interval logged"
    return "significant" if now[low] > before[high] or now[high] < before[low] else "within noise"


def matched(runs: RunSet, baseline: RunSet) -> list[tuple[pd.Series, pd.Series]]:
    """(this run, its baseline run) for each finished run whose label the baseline has; two single
    runs are compared whatever their names."""
    before = baseline.finished.drop_duplicates("label", keep="last").set_index("label")
    if len(before) == 1 and len(runs.finished) == 1:
        return [(runs.finished.iloc[0], before.iloc[0])]
    return [(now, before.loc[now["label"]]) for _, now in runs.finished.iterrows() if now["label"] in before.index]


def comparison(runs: RunSet, baseline: RunSet) -> pd.DataFrame:
    """One row per (section, matched run, metric both runs logged)."""
    rows = []
    for now, then in matched(runs, baseline):
        for section, compared in COMPARED.items():
            for metric, _, interval in compared:
                a, b = now.get(f"metrics.{metric}"), then.get(f"metrics.{metric}")
                if pd.notna(a) and pd.notna(b):
                    rows.append({"section": section, "run": now["label"], "metric": metric, "baseline": b, "this": a,
                                 "change_pct": 100 * (a / b - 1) if b else float("nan"),
                                 "verdict": significance(now, then, interval),
                                 "run_id": now["run_id"], "baseline_run_id": then["run_id"]})
    return pd.DataFrame(rows)


def baseline_section(runs: RunSet, baseline: RunSet) -> Section:
    section = Section(f"Against the baseline {baseline.title}")
    table = comparison(runs, baseline)
    if table.empty:
        return section.add(Paragraph(f"No run of this set matches a finished run of {baseline.title} by label "
                                     "(the settings that differ between its runs): nothing to put side by side."))
    section.add(Paragraph("A change is significant when the two runs' intervals of the timed median (stats.confidence) "
                          "do not overlap; throughput, MFU and tokens/s follow their time's interval. Figures without "
                          "an interval are shown for reference."))
    for name, rows in table.groupby("section", sort=False):
        shown = pd.DataFrame({"run": rows["run"], "metric": rows["metric"],
                              "baseline": [RENDER[m](v) for m, v in zip(rows["metric"], rows["baseline"])],
                              "this": [RENDER[m](v) for m, v in zip(rows["metric"], rows["this"])],
                              "change": rows["change_pct"].map(lambda v: fmt.percent(v, signed=True)),
                              "verdict": rows["verdict"]})
        section.add(Table(shown, rows, f"baseline_{name.lower()}.csv", f"{name}: this set against the baseline"))
    return section
