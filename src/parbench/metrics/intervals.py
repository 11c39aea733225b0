"""Interval algebra on [start, end) pairs: what trace analysis needs to measure time sets
(union of overlapping kernels, the part of communication not hidden by compute, ...)."""

from __future__ import annotations

from typing import Iterable

Interval = tuple[float, float]


def union(intervals: Iterable[Interval]) -> list[Interval]:
    """Sorted, disjoint intervals covering exactly the same time as the input."""
    merged: list[Interval] = []
    for start, end in sorted(i for i in intervals if i[1] > i[0]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def length(intervals: Iterable[Interval]) -> float:
    """Total time covered (overlaps counted once)."""
    return sum(end - start for start, end in union(intervals))


def intersect(a: Iterable[Interval], b: Iterable[Interval]) -> list[Interval]:
    """Time covered by both a and b."""
    ua, ub = union(a), union(b)
    out: list[Interval] = []
    i = j = 0
    while i < len(ua) and j < len(ub):
        start, end = max(ua[i][0], ub[j][0]), min(ua[i][1], ub[j][1])
        if end > start:
            out.append((start, end))
        if ua[i][1] < ub[j][1]:
            i += 1
        else:
            j += 1
    return out


def subtract(a: Iterable[Interval], b: Iterable[Interval]) -> list[Interval]:
    """Time covered by a and not by b."""
    out: list[Interval] = []
    holes = union(b)
    first = 0  # holes before this one end before every remaining interval of a
    for start, end in union(a):
        while first < len(holes) and holes[first][1] <= start:
            first += 1
        cursor, k = start, first
        while k < len(holes) and holes[k][0] < end:
            if holes[k][0] > cursor:
                out.append((cursor, holes[k][0]))
            cursor = max(cursor, holes[k][1])
            k += 1
        if cursor < end:
            out.append((cursor, end))
    return out


def clip(intervals: Iterable[Interval], window: Interval) -> list[Interval]:
    """The part of the intervals inside the window."""
    return intersect(intervals, [window])
