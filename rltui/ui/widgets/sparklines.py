"""Sparklines of the training metrics, each labelled with its current, min and max value."""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Label, Sparkline

from rltui.ui.format import bucket_means, fmt_value
from trainers import metrics_spec

# (metric, label) in display order: those declared for sparklines.
SPARKLINE_METRICS = tuple((spec.name, spec.label) for spec in metrics_spec.SPARKLINE_METRICS)


class MetricSparkline(Widget):
    """One metric: name, `current (min…max)` and a Sparkline of its finite history.

    Textual's Sparkline crashes on NaN or inf, and NaN is routine here (an update in which
    no episode finished has no mean return), so only finite values reach it. The current
    value shows the latest finite one, except that a non-finite loss is shown as is (and
    flagged): that is a divergence the user must see.
    """

    series: reactive[tuple[float, ...]] = reactive((), always_update=True)

    def __init__(self, metric: str, label: str, *, skip_nonfinite_current: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.metric = metric
        self.label = label
        # An episodic metric is NaN whenever no episode finished: not worth flagging.
        self.skip_nonfinite_current = skip_nonfinite_current
        self._finite = np.empty(0)

    def compose(self) -> ComposeResult:
        with Horizontal(classes="metric-head"):
            yield Label(self.label, classes="metric-name", markup=False)
            yield Label("—", classes="metric-stats", markup=False)
        yield Sparkline([], classes="metric-spark")

    def watch_series(self, series: tuple[float, ...]) -> None:
        if not self.is_mounted:
            return
        # numpy: this runs for each sparkline, on up to 4096 values, on every refresh
        values = np.asarray(series, dtype=float)
        finite = values[np.isfinite(values)]
        stats = self.query_one(".metric-stats", Label)
        latest = series[-1] if series else None
        if latest is not None and not math.isfinite(latest) and self.skip_nonfinite_current:
            latest = float(finite[-1]) if finite.size else None
        nonfinite = latest is not None and not math.isfinite(latest)
        if finite.size:
            low, high = float(finite.min()), float(finite.max())
            text = f"{fmt_value(latest, 3)} ({fmt_value(low, 3)}…{fmt_value(high, 3)})"
        else:
            text = fmt_value(latest, 3)
        stats.update(text, layout=False)
        stats.set_class(nonfinite, "-nonfinite")
        spark = self.query_one(Sparkline)
        # Before the first layout the width is 0: keep enough points for a wide screen.
        spark.data = bucket_means(finite, spark.size.width or 256)
        self._finite = finite

    def on_resize(self) -> None:
        spark = self.query_one(Sparkline)
        if self._finite.size and spark.size.width:
            spark.data = bucket_means(self._finite, spark.size.width)

    @property
    def stats_text(self) -> str:
        return str(self.query_one(".metric-stats", Label).content)


class MetricsPanel(Vertical):
    """A sparkline for each metric declared for them, fed from each snapshot's history."""

    def compose(self) -> ComposeResult:
        for spec in metrics_spec.SPARKLINE_METRICS:
            yield MetricSparkline(spec.name, spec.label, skip_nonfinite_current=spec.episodic, id=f"spark-{spec.name}")

    def on_mount(self) -> None:
        self.border_title = "metrics: current (min…max)"

    def show(self, history: Mapping[str, tuple[float, ...]]) -> None:
        for metric, _ in SPARKLINE_METRICS:
            self.query_one(f"#spark-{metric}", MetricSparkline).series = tuple(history.get(metric, ()))
