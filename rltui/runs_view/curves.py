"""The curves of the runs picked: one line per run (per member of a population), smoothed
with the raw values kept beside, or one band per value of a config key (the mean or IQM
with a t or bootstrap interval), each at most as many points as the chart can show."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from rltui.runfiles.comparison import FINAL_WINDOW, best_final, group_by, member_value, show_value
from rltui.runfiles.loading import LoadedRun
from rltui.runfiles.reader import member_tag
from rltui.runfiles.statistics import STATISTICS, band, ema, mean

X_AXES = ("steps", "time")
SMOOTHING = (0.0, 0.6, 0.8, 0.9, 0.95, 0.99)  # the EMA weights `w` steps through; 0 is off
STATISTIC_NAMES = tuple(sorted(STATISTICS))


class Line(NamedTuple):
    label: str
    xs: np.ndarray
    ys: np.ndarray  # smoothed (or raw when smoothing is off)
    raw: np.ndarray | None  # the raw values under a smoothed line


class GroupBand(NamedTuple):
    label: str
    key: Any  # the group's value of the grouping key
    members: tuple[str, ...]  # run names
    xs: np.ndarray
    center: np.ndarray
    low: np.ndarray
    high: np.ndarray


class Overlay(NamedTuple):
    metric: str
    x_axis: str
    smoothing: float
    lines: tuple[Line, ...]
    bands: tuple[GroupBand, ...]
    group: str | None
    statistic: str
    seconds: float  # what computing it took


def bucket(xs: np.ndarray, ys: np.ndarray, points: int) -> tuple[np.ndarray, np.ndarray]:
    """At most `points` points: the means of equal runs of consecutive ones (a chart cell
    cannot show more)."""
    if len(xs) <= points:
        return xs, ys
    starts = (np.arange(points) * len(xs)) // points
    counts = np.diff(np.append(starts, len(xs)))
    return np.add.reduceat(xs, starts) / counts, np.add.reduceat(ys, starts) / counts


def overlay(runs: Sequence[LoadedRun], metric: str, *, x_axis: str = "steps", smoothing: float = 0.6,
            group: str | None = None, statistic: str = "mean", points: int = 200) -> Overlay:
    """The runs' curves of `metric`: one line each (EMA-smoothed, the raw values kept
    beside; a population one line per member), or with `group`, one band per value of
    that config key (comparison.group_by): the mean across the group's runs with a 95% t
    interval, or the IQM with a bootstrap one (statistics.band). As in `rltui compare`, a
    population takes part in a group by its best member: that member's value of the key
    and its curve."""
    clock = time.perf_counter()
    lines: list[Line] = []
    bands: list[GroupBand] = []
    if group:
        best = {run.path: best_member(run, metric) for run in runs}
        groups = group_by(runs, group, lambda run: member_value(run.member_table, best[run.path], group,
                                                                run.config.get(group)))
        for value, members in groups.items():
            curves = []
            for run in members:
                column = metric if best[run.path] is None else member_tag(best[run.path], metric)
                xs, ys = run.curve(column, x_axis)
                if len(xs):
                    curves.append((xs, ema(ys, smoothing) if smoothing else ys))
            b = band(curves, statistic, points=points, resamples=500)
            if len(b.steps):
                label = f"{group}={show_value(value)} ({len(members)})"
                bands.append(GroupBand(label, value, tuple(r.name for r in members), b.steps, b.center, b.low, b.high))
    else:
        for run in runs:
            for label, name in _series(run, metric):
                xs, ys = run.curve(name, x_axis)
                if not len(xs):
                    continue
                smoothed = ema(ys, smoothing) if smoothing else ys
                bx, by = bucket(xs, smoothed, points)
                raw = bucket(xs, ys, points)[1] if smoothing else None
                lines.append(Line(label, bx, by, raw))
    return Overlay(metric, x_axis, smoothing, tuple(lines), tuple(bands), group, statistic,
                   time.perf_counter() - clock)


def best_member(run: LoadedRun, metric: str) -> int | None:
    """A population's member whose final `metric` (the mean of its last FINAL_WINDOW finite
    values) is highest (a loss's lowest), the lowest index on a tie, as `rltui compare` picks
    it; None for a run of one configuration."""
    finals = {}
    for m in range(run.members if run.is_population else 0):
        values = run.curve(member_tag(m, metric))[1][-FINAL_WINDOW:]
        if len(values):
            finals[m] = mean(values)
    return best_final(finals, metric)


def _series(run: LoadedRun, metric: str) -> list[tuple[str, str]]:
    """The (label, column) lines a run draws for `metric`: a population one per member
    ("NAME m0", ...) where its members have the metric, anything else its own column."""
    if run.is_population:
        members = [(f"{run.name} m{m}", member_tag(m, metric)) for m in range(run.members)]
        members = [(label, name) for label, name in members if name in run.columns]
        if members:
            return members
    return [(run.name, metric)]


def metric_choices(runs: Sequence[LoadedRun]) -> list[str]:
    """The metrics the runs have: the declared chart metrics first, then the rest, the
    seeds' series last."""
    from trainers import metrics_spec

    seen: dict[str, None] = {}
    for run in runs:
        for name in run.columns:
            seen.setdefault(name, None)
    declared = [spec.name for spec in metrics_spec.CHART_METRICS if spec.name in seen]
    rest = [n for n in seen if n not in declared and "/seed_" not in n and not n.startswith("members/")]
    members = [n for n in seen if "/seed_" not in n and n.startswith("members/")]
    return declared + rest + members + [n for n in seen if "/seed_" in n]


def group_keys(runs: Sequence[LoadedRun]) -> list[str]:
    """Config keys whose value differs among the runs (seed first): what grouping by
    would split. Only keys every run has: one a run's config leaves out is one it does not
    read (a PQN run's double_q), and splitting on it would group by algorithm instead."""
    shared = set.intersection(*(set(run.config) for run in runs)) if runs else set()
    keys = {k for k in shared for run in runs[1:] if run.config.get(k) != runs[0].config.get(k)}
    return sorted(keys, key=lambda k: (k != "seed", k))
