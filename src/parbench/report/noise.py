"""What the report may conclude from noisy runs: intervals, how wide they are, whether two runs
can be told apart, which percentiles a sample count supports, and the flags that say when a
figure is not to be trusted (efficiency above 100 %, a wide interval), with their likely cause."""

from __future__ import annotations

import math

import pandas as pd

from parbench.report import fmt

# An interval wider than this share of its median (low to high) is flagged: the runs beside it
# cannot be ranked by differences smaller than that.
WIDE_SHARE = 0.25
PERCENTILES = (50, 90, 99)


def relative_width(value: float, low: float, high: float) -> float:
    """(high - low) / value; NaN without an interval."""
    if any(pd.isna(v) for v in (value, low, high)) or not value:
        return float("nan")
    return (high - low) / value


def is_wide(value: float, low: float, high: float) -> bool:
    return relative_width(value, low, high) > WIDE_SHARE


def overlaps(low_a: float, high_a: float, low_b: float, high_b: float) -> bool:
    """Two intervals share a value (a missing interval overlaps everything: nothing is known)."""
    if any(pd.isna(v) for v in (low_a, high_a, low_b, high_b)):
        return True
    return low_a <= high_b and low_b <= high_a


def ranking(values: pd.Series, low: pd.Series, high: pd.Series) -> pd.Series:
    """Per run (higher is better): `fastest` (the best, and its interval clears every other run's),
    `tied for fastest` (the best, or a run whose interval overlaps the best's), `slower`, or
    `only run` for a group of one."""
    if len(values) == 1:
        return pd.Series(["only run"], index=values.index)
    best = values.idxmax()
    tied = [i for i in values.index if i != best and overlaps(low[i], high[i], low[best], high[best])]
    labels = pd.Series("slower", index=values.index)
    labels[best] = "tied for fastest" if tied else "fastest"
    labels[tied] = "tied for fastest"
    return labels


def interval_levels(runs: pd.DataFrame, names: tuple[str, ...]) -> pd.Series:
    """Each run's interval level as it logged it (`<name>_ci_level`: the coverage the order statistics
    of its samples reach, 93.75 % from 5, 75 % from 3, not the stats.confidence asked for), the
    lowest over these metrics; NaN where the run logged none."""
    columns = [f"metrics.{name}_ci_level" for name in names if f"metrics.{name}_ci_level" in runs]
    return runs[columns].astype(float).min(axis=1) if columns else pd.Series(float("nan"), index=runs.index)


def levels_text(levels: pd.Series) -> str:
    """The levels to name the intervals by, lowest first: `93.8 %`, `75.0 % / 93.8 %`; '' if none."""
    return " / ".join(fmt.fraction(level) for level in sorted(levels.dropna().unique()))


def interval_text(low: float, high: float, render) -> str:
    return fmt.DASH if pd.isna(low) or pd.isna(high) else f"{render(low)} – {render(high)}"


def ratio_interval(value_low: float, value_high: float, base_low: float, base_high: float) -> tuple[float, float]:
    """The interval of value / base from the two intervals (the extremes of the ratio)."""
    if any(pd.isna(v) for v in (value_low, value_high, base_low, base_high)) or base_low <= 0:
        return float("nan"), float("nan")
    return value_low / base_high, value_high / base_low


def efficiency_note(efficiency: float, efficiency_low: float) -> str:
    """A flag for an efficiency above 100 % (beyond the intervals or within them), else ''."""
    if pd.isna(efficiency) or efficiency <= 1:
        return ""
    if pd.notna(efficiency_low) and efficiency_low > 1:
        return "efficiency above 100 %"
    return "efficiency above 100 % (within noise)"


def wide_note(value: float, low: float, high: float) -> str:
    width = relative_width(value, low, high)
    if math.isnan(width):
        return "no interval"
    return f"wide interval (±{50 * width:.0f} %)" if width > WIDE_SHARE else ""


def notes(*flags: str) -> str:
    return "; ".join(f for f in flags if f)


def samples_for(q: int) -> int:
    """Samples a percentile needs before it differs from the maximum: p90 10, p99 100."""
    return math.ceil(100 / (100 - q)) if q < 100 else 1


def supported_percentiles(samples: int) -> tuple[int, ...]:
    return tuple(q for q in PERCENTILES if samples >= samples_for(q))


CAVEATS = {
    "wide interval": ("**Wide intervals** ({runs}: wider than ±{half:.1f} % of the median). The timed "
                      "steps varied a lot, as on a busy or shared machine; differences smaller than the "
                      "interval mean nothing. Rerun with more measured steps or repeats (`workload.steps`, "
                      "`workload.repeats`) on an idle machine."),
    "efficiency above 100 %": ("**Efficiency above 100 %** ({runs}). More than linear scaling is not "
                               "expected of these layouts: the likely cause is a baseline run that ran slow (the "
                               "first point of a sweep, a busy machine), not a faster layout. Rerun the baseline "
                               "and this point (`resume=false`) with more `workload.steps` (training) or "
                               "`workload.repeats` (inference)."),
    "no interval": ("**No interval** ({runs}): too few measured steps for a confidence interval; these runs "
                    "are not ranked against the others. Rerun with more measured steps."),
}


def caveats(table: pd.DataFrame, label: str = "run") -> list[str]:
    """One paragraph per kind of flag in the table's `notes`, naming the runs it applies to."""
    texts = []
    for flag, text in CAVEATS.items():
        flagged = table[table["notes"].str.contains(flag, regex=False)]
        if len(flagged):
            texts.append(text.format(runs=", ".join(flagged[label].astype(str)), half=50 * WIDE_SHARE))
    return texts
