"""The statistics runs are compared by, shared by `rltui compare` and the runs view: a
debiased EMA (the dashboard chart's smoothing too), the interquartile mean, intervals
(Student's t for a mean, a percentile bootstrap for the IQM, called a range where it spans
the values' minimum to maximum, as it does for a few runs) and curves brought onto a common
grid of env steps. Plain NumPy.

Values come from files, so they may be as large as a float holds: sums and differences of
them overflow to inf (and inf - inf is NaN) quietly, under `_quiet`, and a figure that is
not finite is shown as missing rather than warned about."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np


def ema(values: Sequence[float], weight: float) -> np.ndarray:
    """Exponential moving average with bias correction (as TensorBoard's smoothing): each
    point is the average of those up to it, weighted by `weight` per step back and divided
    by the weights' sum, so the early points are not pulled toward zero. weight 0: the raw
    values. A point that is not a finite number (NaN where no episode ended or no evaluation
    ran) is passed over: it stays NaN and weighs nothing, so a gap does not blank the rest
    of the curve. The one smoother of every view: the dashboard's chart, the runs view and
    `rltui compare`."""
    if not 0 <= weight < 1:
        raise ValueError(f"smoothing weight must be in [0, 1), got {weight}")
    out = np.full(len(values), np.nan)
    acc, norm = 0.0, 0.0
    for i, value in enumerate(np.asarray(values, dtype=float).tolist()):
        if math.isfinite(value):
            acc = weight * acc + (1 - weight) * value
            norm = weight * norm + (1 - weight)
            out[i] = acc / norm
    return out


def _quiet():
    return np.errstate(over="ignore", invalid="ignore", divide="ignore")


def iqm(values: Sequence[float]) -> float:
    """Interquartile mean: the mean of the middle 50% (the 25% at each end trimmed, with
    fractional weights where 25% of the count is not whole)."""
    x = np.sort(np.asarray(values, dtype=float))
    if len(x) == 0:
        return math.nan
    with _quiet():
        return float(_iqm_rows(x[np.newaxis])[0])


def _iqm_rows(rows: np.ndarray) -> np.ndarray:
    """The IQM of each row of `rows`, each sorted: one pass for every bootstrap resample."""
    n = rows.shape[1]
    low, high = 0.25 * n, 0.75 * n
    # Each sorted value covers [i, i+1) of the count; weigh it by how much lies in [low, high).
    edges = np.arange(n + 1)
    weights = np.clip(np.minimum(edges[1:], high) - np.maximum(edges[:-1], low), 0, None)
    kept = weights > 0  # a trimmed inf weighs nothing, rather than 0 x inf = NaN
    return np.sum(rows[:, kept] * weights[kept], axis=1) / np.sum(weights[kept])


def mean(values: Sequence[float]) -> float:
    if not len(values):
        return math.nan
    with _quiet():
        return float(np.mean(values))


STATISTICS: dict[str, Callable[[Sequence[float]], float]] = {"mean": mean, "iqm": iqm}


class Interval(NamedTuple):
    center: float
    low: float
    high: float
    # How low and high were made: "t" (Student's t), "bootstrap", "range" (a bootstrap that
    # spans the values' minimum to maximum: with a few values it can do no better), or
    # "none" (fewer than two values: no spread to go by).
    kind: str = "bootstrap"
    n: int = 0  # how many values


def t_quantile(probability: float, df: int) -> float:
    """The quantile of Student's t distribution with `df` degrees of freedom, for a
    probability in [0.5, 1) (SciPy's, which JAX installs)."""
    if not 0.5 <= probability < 1 or df < 1:
        raise ValueError(f"t quantile: expected a probability in [0.5, 1) and df >= 1, got {probability}, {df}")
    from scipy import stats  # imported by compare's intervals only: it takes a moment

    return float(stats.t.ppf(probability, df))


def t_interval(values: Sequence[float], *, level: float = 0.95) -> Interval:
    """The mean of `values` with its Student's t interval (mean +- t * s / sqrt(n)): what a
    confidence interval of a mean over a few runs can honestly claim, wide as that is."""
    x = np.asarray(values, dtype=float)
    if len(x) == 0:
        return Interval(math.nan, math.nan, math.nan, "none", 0)
    center = mean(x)
    if len(x) == 1:
        return Interval(center, math.nan, math.nan, "none", 1)
    with _quiet():
        half = t_quantile(0.5 + level / 2, len(x) - 1) * float(np.std(x, ddof=1)) / math.sqrt(len(x))
        return Interval(center, center - half, center + half, "t", len(x))


def interval(values: Sequence[float], statistic: str = "mean", *, resamples: int = 2000, level: float = 0.95,
             seed: int = 0) -> Interval:
    """`statistic` (a name in STATISTICS) of `values` with its interval: a t interval for
    the mean, a bootstrap one for the IQM."""
    if statistic == "mean":
        return t_interval(values, level=level)
    return bootstrap(values, STATISTICS[statistic], resamples=resamples, level=level, seed=seed)


def interval_kind(statistic: str) -> str:
    """The interval `interval` gives `statistic`, in a word: "t" or "bootstrap"."""
    return "t" if statistic == "mean" else "bootstrap"


def bootstrap(values: Sequence[float], statistic: Callable[[Sequence[float]], float] = mean, *,
              resamples: int = 2000, level: float = 0.95, seed: int = 0) -> Interval:
    """The statistic of `values` with a percentile bootstrap interval (resampling the runs
    with replacement; a fixed seed, so the same runs give the same band). Its kind is
    "range" where the interval reaches from the values' minimum to their maximum."""
    x = np.asarray(values, dtype=float)
    if len(x) == 0:
        return Interval(math.nan, math.nan, math.nan, "none", 0)
    center = statistic(x)
    if len(x) == 1:
        return Interval(center, center, center, "none", 1)
    rng = np.random.default_rng(seed)
    samples = x[rng.integers(0, len(x), size=(resamples, len(x)))]
    with _quiet():
        if statistic is mean:
            stats = np.mean(samples, axis=1)
        elif statistic is iqm:
            stats = _iqm_rows(np.sort(samples, axis=1))
        else:
            stats = np.array([statistic(s) for s in samples])
        tail = (1 - level) / 2 * 100
        low, high = np.percentile(stats, [tail, 100 - tail])
    spans = low <= np.min(x) and high >= np.max(x)
    return Interval(center, float(low), float(high), "range" if spans else "bootstrap", len(x))


class Band(NamedTuple):
    steps: np.ndarray
    center: np.ndarray
    low: np.ndarray
    high: np.ndarray


def curve_on_grid(steps: Sequence[int], values: Sequence[float], grid: np.ndarray) -> np.ndarray:
    """A run's curve at the grid's env steps (linear between points, NaN outside the run)."""
    if not len(steps):
        return np.full(len(grid), np.nan)
    with _quiet():
        out = np.interp(grid, steps, values)
    out[(grid < steps[0]) | (grid > steps[-1])] = np.nan
    return out


def band(curves: Sequence[tuple[Sequence[int], Sequence[float]]], statistic: str = "mean", *,
         points: int = 100, resamples: int = 1000, level: float = 0.95, seed: int = 0) -> Band:
    """Several runs' curves (already smoothed if wanted) as one: at each of `points` env
    steps up to where the shortest run ends, the statistic across runs and its interval
    (`interval`: t for the mean, bootstrap for the IQM; a single run's band is its curve)."""
    curves = [(np.asarray(s), np.asarray(v)) for s, v in curves if len(s)]
    if not curves:
        empty = np.array([])
        return Band(empty, empty, empty, empty)
    start = max(s[0] for s, _ in curves)
    end = min(s[-1] for s, _ in curves)
    grid = np.linspace(start, end, points) if end > start else np.array([float(end)])
    stacked = np.stack([curve_on_grid(s, v, grid) for s, v in curves])
    if len(curves) == 1:
        return Band(grid, stacked[0], stacked[0], stacked[0])
    intervals = [interval(column, statistic, resamples=resamples, level=level, seed=seed) for column in stacked.T]
    return Band(grid, *(np.array([getattr(i, part) for i in intervals]) for part in ("center", "low", "high")))
