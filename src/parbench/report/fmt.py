"""Numbers for people: `43,090 tok/s`, `1.23 s`, `38.5 %`, `512 MiB`."""

from __future__ import annotations

import math


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def number(value, digits: int = 3) -> str:
    """Thousands separators above 1,000; `digits` significant figures below."""
    if _missing(value):
        return "–"
    value = float(value)
    if abs(value) >= 1000 or value.is_integer():
        return f"{value:,.0f}"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    return f"{value:,.{decimals}f}"


def rate(value, unit: str) -> str:
    return "–" if _missing(value) else f"{number(value)} {unit}"


def seconds(value) -> str:
    """1.23 s, 45.6 ms, 789 µs: the unit that keeps the figure between 1 and 1,000."""
    if _missing(value):
        return "–"
    value = float(value)
    for scale, unit in ((1, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if abs(value) >= scale or unit == "µs":
            return f"{number(value / scale)} {unit}"
    raise AssertionError("unreachable")


def percent(value, signed: bool = False) -> str:
    """A figure already in percent: 38.5 %."""
    if _missing(value):
        return "–"
    return f"{float(value):+.1f} %" if signed else f"{float(value):.1f} %"


def fraction(value) -> str:
    """A 0..1 ratio as percent."""
    return "–" if _missing(value) else percent(100 * float(value))


def times(value) -> str:
    return "–" if _missing(value) else f"{float(value):.2f}x"


def gigabytes(value) -> str:
    return "–" if _missing(value) else f"{number(value)} GB"


def size(num_bytes) -> str:
    """Binary units as nccl-tests prints them: 1 KiB, 64 MiB, 1 GiB."""
    value = float(num_bytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:g} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")
