"""Least-squares models drawn over measured points: a line (latency against input length) and
the latency-bandwidth (alpha-beta) model of a collective, time = alpha + bytes / bandwidth."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares


# Student's t, two-sided 95 %, by degrees of freedom (a df between two rows takes the smaller one:
# the wider interval); beyond the table, the normal 1.96.
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
       12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042}


def t95(df: int) -> float:
    return T95[max(k for k in T95 if k <= df)] if df <= 30 else 1.96


@dataclass(frozen=True)
class LineFit:
    slope: float
    intercept: float
    r2: float
    points: int
    slope_low: float = float("nan")  # the slope's 95 % interval; NaN with 2 points (no residual to judge)
    slope_high: float = float("nan")

    def __call__(self, x):
        return self.intercept + self.slope * np.asarray(x, dtype=float)


def fit_line(x, y) -> LineFit | None:
    """y = intercept + slope x by least squares, with R^2 and, from 3 points, the slope's 95 %
    interval (standard error times Student's t); None with fewer than 2 distinct x."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(np.unique(x)) < 2:
        return None
    slope, intercept = np.polyfit(x, y, 1)
    residual = float(np.sum((y - (intercept + slope * x)) ** 2))
    total = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - residual / total if total > 0 else 1.0
    if len(x) < 3:
        return LineFit(float(slope), float(intercept), r2, len(x))
    error = t95(len(x) - 2) * np.sqrt(residual / (len(x) - 2) / float(np.sum((x - x.mean()) ** 2)))
    return LineFit(float(slope), float(intercept), r2, len(x), float(slope - error), float(slope + error))


@dataclass(frozen=True)
class AlphaBeta:
    """time = alpha_s + size_bytes / bandwidth_Bps: alpha is the fixed cost of one call (latency),
    beta = 1 / bandwidth the cost of each byte."""
    alpha_s: float
    beta_s_per_byte: float
    r2: float
    points: int

    @property
    def bandwidth_gbps(self) -> float:
        return 1e-9 / self.beta_s_per_byte if self.beta_s_per_byte > 0 else float("inf")

    def __call__(self, size_bytes):
        return self.alpha_s + self.beta_s_per_byte * np.asarray(size_bytes, dtype=float)


MIN_CONDITIONING = 1e-6  # smallest over largest singular value of a design fit_relative solves


def fit_relative(columns: list, time_s) -> np.ndarray | None:
    """Coefficients of time = sum of coefficient x column (a column: one value per point, or a
    constant) by least squares on relative error, each point divided by its time: times that span
    decades, where an absolute fit would let the longest decide the fixed cost, which only the short
    ones show. None where the columns do not tell the coefficients apart."""
    time_s = np.asarray(time_s, dtype=float)
    if not (np.isfinite(time_s).all() and (time_s > 0).all()) or len(time_s) < len(columns):
        return None
    design = np.stack([np.broadcast_to(np.asarray(c, dtype=float), time_s.shape) for c in columns], axis=1)
    design = design / time_s[:, None]
    scale = np.linalg.norm(design, axis=0)  # columns of like size: a conditioning that ignores no column's scale
    if not scale.all():
        return None
    singular = np.linalg.svd(design / scale, compute_uv=False)
    if singular[-1] < MIN_CONDITIONING * singular[0]:  # (nearly) collinear columns: no coefficients to tell apart
        return None
    coefficients, *_ = np.linalg.lstsq(design / scale, np.ones_like(time_s), rcond=None)
    return coefficients / scale


def fit_alpha_beta(size_bytes, time_s) -> AlphaBeta | None:
    """time = alpha + beta x size on relative error (fit_relative): sizes span decades."""
    size_bytes, time_s = np.asarray(size_bytes, dtype=float), np.asarray(time_s, dtype=float)
    if len(np.unique(size_bytes)) < 2:
        return None
    coefficients = fit_relative([1.0, size_bytes], time_s)
    if coefficients is None:
        return None
    alpha, beta = coefficients
    predicted = alpha + beta * size_bytes
    log_residual = np.log(time_s) - np.log(np.clip(predicted, 1e-30, None))
    log_total = np.log(time_s) - np.log(time_s).mean()
    total = float(np.sum(log_total**2))
    r2 = 1.0 - float(np.sum(log_residual**2)) / total if total > 0 else 1.0
    return AlphaBeta(float(alpha), float(beta), r2, len(size_bytes))


@dataclass(frozen=True)
class SmoothRoofline:
    """time = fixed_s + ((flops / rate)^p + (bytes / (read x rows^read_exp))^p)^(1/p): the smooth maximum of a call's
    compute and memory times (p = 1 adds them; a large p takes the longer) plus its fixed cost; the read faster as a
    power of the rows each matrix takes (a grouped GEMM's tiles: H200, 1-16 rows a group read at 2.0-2.6 TB/s, 64 at
    2.9-3.1), `read` at one row."""
    flops_per_s: float
    bytes_per_s: float
    fixed_s: float
    p: float
    read_exp: float = 0.0

    def __call__(self, flops, nbytes, rows=1.0):
        read = self.bytes_per_s * np.asarray(rows, dtype=float) ** self.read_exp
        compute, memory = np.asarray(flops, dtype=float) / self.flops_per_s, np.asarray(nbytes, dtype=float) / read
        return self.fixed_s + (compute ** self.p + memory ** self.p) ** (1 / self.p)


ROOFLINE_P = (1.0, 16.0)  # the bounds of a fit's exponent: the sum of the two times to all but their maximum


def fit_smooth_roofline(flops, nbytes, rows, time_s) -> SmoothRoofline | None:
    """The SmoothRoofline through calls' (FLOPs, bytes, rows a matrix, seconds) by least squares on log time (relative
    error: calls that span decades), the fixed cost at most the shortest call's, the read's exponent 0 to 1; calls of
    no time (or not a number) left out; None with fewer calls than its 5 figures, or where least squares fails."""
    flops, nbytes, rows, us = (np.asarray(x, dtype=float) for x in (flops, nbytes, rows, 1e6 * np.asarray(time_s, dtype=float)))
    timed = np.isfinite(us) & (us > 0)
    flops, nbytes, rows, us = flops[timed], nbytes[timed], rows[timed], us[timed]
    if len(us) < 5:
        return None

    def model(x: np.ndarray) -> SmoothRoofline:  # log FLOP/µs, log bytes/µs, fixed µs, p, the read's exponent
        return SmoothRoofline(np.exp(x[0]), np.exp(x[1]), x[2], x[3], x[4])

    start = [np.log(max(flops / us)), np.log(max(nbytes / us)), 0.0, 2.0, 0.0]
    bounds = ([-np.inf, -np.inf, 0.0, ROOFLINE_P[0], 0.0], [np.inf, np.inf, min(us), ROOFLINE_P[1], 1.0])
    result = least_squares(lambda x: np.log(model(x)(flops, nbytes, rows) / us), start, bounds=bounds)
    if not result.success:
        return None
    x = result.x
    return SmoothRoofline(float(np.exp(x[0])) * 1e6, float(np.exp(x[1])) * 1e6, float(x[2]) * 1e-6, float(x[3]), float(x[4]))


def on_line(x: float, x0: float, y0: float, x1: float, y1: float) -> float:
    """y at x on the line through (x0, y0) and (x1, y1) (y0 where x0 == x1)."""
    return y0 if x1 == x0 else y0 + (y1 - y0) * (x - x0) / (x1 - x0)


def along(points: list[tuple[float, float]], x: float) -> float:
    """y at x on the polyline through (x, y) points, beyond either end on its end segment (one point: its y)."""
    points = sorted(points)
    if len(points) == 1:
        return points[0][1]
    i = next((i for i in range(1, len(points) - 1) if x <= points[i][0]), len(points) - 1)
    return on_line(x, *points[i - 1], *points[i])


def by_count(table: dict[str, float]) -> dict[int, list[tuple[int, float]]]:
    """A two-way table keyed 'COUNTxX' (decode attention calls, prefill GEMMs) as each count's (x, seconds)."""
    points: dict[int, list[tuple[int, float]]] = defaultdict(list)
    for shape, seconds in table.items():
        count, x = (int(v) for v in shape.split("x"))
        points[count].append((x, seconds))
    return {count: sorted(xs) for count, xs in sorted(points.items())}


def two_at_two(table: dict[str, float]) -> bool:
    """Two or more counts, each at two or more x: a table read along both."""
    counts = by_count(table)
    return len(counts) > 1 and min(map(len, counts.values())) > 1
