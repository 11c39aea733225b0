"""--baseline: each run's headline figures beside the same run of another sweep (matched by its
label, the settings that differ inside each set), every change marked significant or not from
the runs' confidence intervals."""

from __future__ import annotations

import pandas as pd

from parbench.report import fmt
from parbench.report.document import Paragraph, Section, Table
from parbench.report.runs import RunSet

# (metric, unit renderer, interval metric prefix or None: no interval is logged for it)
COMPARED = (("throughput_tokens_per_s", lambda v: fmt.rate(v, "tok/s"), "throughput_tokens_per_s"),
            ("mfu", fmt.fraction, None),
            ("ttft_s_p50", fmt.seconds, None), ("tpot_s_p50", fmt.seconds, None), ("e2e_s_p50", fmt.seconds, None),
            ("output_tokens_per_s", lambda v: fmt.rate(v, "tok/s"), None),
            ("busbw_gbps_avg", lambda v: fmt.rate(v, "GB/s"), None),
            ("matmul_tflops", lambda v: fmt.rate(v, "TFLOP/s"), None),
            ("membw_gbps", lambda v: fmt.rate(v, "GB/s"), None))


def significance(now: pd.Series, before: pd.Series, interval: str | None) -> str:
    """`significant` when the two intervals do not overlap, `within noise` when they do."""
    if interval is None:
        return "no interval logged"
    low, high = f"metrics.{interval}_ci_low", f"metrics.{interval}_ci_high"
    if any(pd.isna(run.get(key)) for run in (now, before) for key in (low, high)):
        return "no interval logged"
    return "significant" if now[low] > before[high] or now[high] < before[low] else "within noise"


def comparison(runs: RunSet, baseline: RunSet) -> pd.DataFrame:
    """One row per (run present in both sets, metric both logged)."""
    before = baseline.finished.drop_duplicates("label", keep="last").set_index("label")
    rows = []
    for _, now in runs.finished.iterrows():
        key = now["label"] if now["label"] in before.index else None
        if key is None and len(before) == 1 and len(runs.finished) == 1:
            key = before.index[0]  # two single runs: compare them whatever their names
        if key is None:
            continue
        then = before.loc[key]
        for metric, _, interval in COMPARED:
            a, b = now.get(f"metrics.{metric}"), then.get(f"metrics.{metric}")
            if pd.notna(a) and pd.notna(b) and b:
                rows.append({"run": now["label"], "metric": metric, "baseline": b, "this": a,
                             "change_pct": 100 * (a / b - 1), "verdict": significance(now, then, interval),
                             "run_id": now["run_id"], "baseline_run_id": then["run_id"]})
    return pd.DataFrame(rows)


def baseline_section(runs: RunSet, baseline: RunSet) -> Section:
    section = Section(f"Against the baseline {baseline.title}")
    table = comparison(runs, baseline)
    if table.empty:
        return section.add(Paragraph(f"No run of this set matches a finished run of {baseline.title} by label "
                                     "(the settings that differ between its runs): nothing to put side by side."))
    render = {metric: show for metric, show, _ in COMPARED}
    shown = pd.DataFrame({"run": table["run"], "metric": table["metric"],
                          "baseline": [render[m](v) for m, v in zip(table["metric"], table["baseline"])],
                          "this": [render[m](v) for m, v in zip(table["metric"], table["this"])],
                          "change": table["change_pct"].map(lambda v: fmt.percent(v, signed=True)),
                          "verdict": table["verdict"]})
    return section.add(Paragraph("A change is significant when the two runs' intervals (stats.confidence) do not overlap; "
                                 "metrics without an interval are shown for reference."),
                       Table(shown, table, "baseline.csv", "This set against the baseline, matched by run label"))
