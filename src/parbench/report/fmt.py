"""Table cells for people, on top of parbench.fmt: a dash where a run has no value, and the
units of report columns (`43,090 tok/s`, `1.23 s`, `38.5 %`, `512 MiB`)."""

from __future__ import annotations

import math

from parbench.fmt import format_number, format_seconds

DASH = "–"  # a cell without a value


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def number(value) -> str:
    return DASH if _missing(value) else format_number(float(value))


def rate(value, unit: str) -> str:
    return DASH if _missing(value) else f"{format_number(float(value))} {unit}"


def seconds(value) -> str:
    return DASH if _missing(value) else format_seconds(float(value))


def percent(value, signed: bool = False) -> str:
    """A figure already in percent: 38.5 %."""
    if _missing(value):
        return DASH
    return f"{float(value):+.1f} %" if signed else f"{float(value):.1f} %"


def fraction(value) -> str:
    """A 0..1 ratio as percent."""
    return DASH if _missing(value) else percent(100 * float(value))


def times(value) -> str:
    return DASH if _missing(value) else f"{float(value):.2f}x"


def gigabytes(value) -> str:
    return rate(value, "GB")


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
