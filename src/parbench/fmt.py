"""Numbers for people: a metric's value with its unit, chosen from the metric's name
(`43,090 tok/s`, `1.23 s`, `38.5 %`, never `4.309e+04`)."""

from __future__ import annotations

import math
import re

# (name pattern, formatter); the first match wins. Names are MLflow metric names; a `/` suffix
# (e.g. busbw_gbps/all_reduce/1MiB) takes the unit of its first segment.
FRACTIONS = re.compile(r"^(mfu|mfu_nocausal|hfu|mbu|.*_fraction)$")
RULES: tuple[tuple[re.Pattern, str], ...] = tuple((re.compile(p), unit) for p, unit in (
    (r"(.*_pct(_.*)?|overhead_pct_.*)$", "%"), (r".*tokens_per_s.*", "tok/s"), (r".*samples_per_s$", "samples/s"),
    (r".*requests_per_s$", "req/s"), (r".*tokens_per_joule$", "tok/J"), (r".*_gbps(_.*)?$", "GB/s"),
    (r".*tflops.*", "TFLOP/s"), (r".*_gb$", "GB"), (r".*_j$", "J"), (r".*_w$", "W"), (r".*_ms$", "ms"),
    (r".*(_s|_s_.+)$", "s"),
))


def format_metric(name: str, value: float) -> str:
    """The value of metric `name` with its unit."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    head = name.split("/")[0]
    if FRACTIONS.match(head):
        return f"{100 * value:.1f} %"
    unit = next((unit for pattern, unit in RULES if pattern.match(head)), "")
    if unit == "s":
        return format_seconds(value)
    if unit == "%":
        return f"{value:.1f} %"
    return f"{format_number(value)} {unit}".rstrip()


def format_seconds(seconds: float) -> str:
    if abs(seconds) >= 1 or seconds == 0:
        return f"{format_number(seconds)} s"
    if abs(seconds) >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} µs"


def format_number(value: float) -> str:
    """Thousands separated from 1,000 up; three significant digits below, never an exponent."""
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if value == int(value):
        return f"{int(value)}"
    if abs(value) >= 1e-4:
        digits = max(0, 2 - math.floor(math.log10(abs(value))))
        return f"{value:.{digits}f}"
    return f"{value:.2e}"


def plural(count: int, noun: str) -> str:
    """'1 rank', '2 ranks': a count and its noun, for people."""
    return f"{format_number(count)} {noun}{'' if count == 1 else 's'}"
