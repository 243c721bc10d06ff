"""Sparklines of the training metrics over the whole run, each labelled with its current
value and the run's minimum and maximum."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Label, Sparkline

from rltui.formatting import fmt_value
from rltui.session.history import Curves
from rltui.ui.widgets.chart import _curves_of
from trainers import metrics_spec

# (metric, label) in display order: those declared for sparklines.
SPARKLINE_METRICS = tuple((spec.name, spec.label) for spec in metrics_spec.SPARKLINE_METRICS)


class MetricSparkline(Widget):
    """One metric over the whole run: name, `current (min…max)` and a Sparkline of its
    bucket means. The minimum and maximum are the run's own (the curves keep each bucket's
    extremes), the same the chart's y axis spans.

    Textual's Sparkline crashes on NaN or inf, and NaN is routine here (an update in which
    no episode finished has no mean return), so only finite values reach it. The current
    value shows the latest finite one, except that a non-finite loss is shown as is (and
    flagged): that is a divergence the user must see.
    """

    curves: reactive[Curves | None] = reactive(None, always_update=True)

    def __init__(self, metric: str, label: str, *, skip_nonfinite_current: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.metric = metric
        self.label = label
        # An episodic metric is NaN whenever no episode finished: not worth flagging.
        self.skip_nonfinite_current = skip_nonfinite_current
        # The stats' texts, longest first: the first that fits the label is shown, so that a
        # narrow panel shows fewer digits or the current value alone, never a cut number.
        self._stats_texts: tuple[str, ...] = ("—",)

    def compose(self) -> ComposeResult:
        with Horizontal(classes="metric-head"):
            yield Label(self.label, classes="metric-name", markup=False)
            yield Label("—", classes="metric-stats", markup=False)
        yield Sparkline([], classes="metric-spark")

    def watch_curves(self, curves: Curves | None) -> None:
        if not self.is_mounted or curves is None:
            return
        stats = self.query_one(".metric-stats", Label)
        latest = curves.latest.get(self.metric) if len(curves) else None
        if latest is not None and not math.isfinite(latest) and self.skip_nonfinite_current:
            latest = curves.latest_finite(self.metric)
        nonfinite = latest is not None and not math.isfinite(latest)
        extremes = curves.extremes(self.metric)
        current = fmt_value(latest, 3)
        if extremes is not None:
            low, high = extremes.low, extremes.high
            self._stats_texts = (*(f"{current} ({fmt_value(low, digits)}…{fmt_value(high, digits)})"
                                   for digits in (3, 2)), current)
        else:
            self._stats_texts = (current,)
        self._show_stats()
        stats.set_class(nonfinite, "-nonfinite")
        self._draw()

    def _show_stats(self) -> None:
        stats = self.query_one(".metric-stats", Label)
        width = stats.content_size.width
        fits = [text for text in self._stats_texts if not width or len(text) <= width]
        stats.update(fits[0] if fits else self._stats_texts[-1], layout=False)

    def _draw(self) -> None:
        spark = self.query_one(Sparkline)
        curves = self.curves
        if curves is None:
            return
        # Before the first layout the width is 0: keep enough points for a wide screen.
        mean = curves.rebin(spark.size.width or 256).series(self.metric).mean
        spark.data = mean[np.isfinite(mean)].tolist()

    def on_resize(self) -> None:
        self._show_stats()
        if self.query_one(Sparkline).size.width:
            self._draw()

    @property
    def stats_text(self) -> str:
        return str(self.query_one(".metric-stats", Label).content)


class MetricsPanel(Vertical):
    """A sparkline for each metric declared for them that the run's algorithm reports (all
    of them where it is not known), fed from each snapshot's curves."""

    def __init__(self, *, evaluating: bool = False, algo: str | None = None, **kwargs):
        super().__init__(**kwargs)
        # A run that evaluates (eval_every_updates) shows its evaluation return too.
        extra = (metrics_spec.METRIC_SPECS[metrics_spec.EVAL_RETURN],) if evaluating else ()
        own = [spec for spec in metrics_spec.SPARKLINE_METRICS if algo is None or spec.reported_by(algo)]
        self.specs = (*own, *extra)

    def compose(self) -> ComposeResult:
        for spec in self.specs:
            yield MetricSparkline(spec.name, spec.label, skip_nonfinite_current=spec.episodic, id=f"spark-{spec.name}")

    def on_mount(self) -> None:
        self.border_title = "metrics: current (min…max)"

    def on_resize(self) -> None:
        # A large terminal gives each metric two lines or more (its name over its sparkline);
        # where the panel has fewer than two a metric, each gets one, as on a small terminal.
        self.set_class(2 * len(self.specs) > self.content_size.height, "-compact")

    def show(self, history: Mapping[str, tuple[float, ...]], steps: Sequence[int] = ()) -> None:
        """`history`: a snapshot's, which carries the whole run's curves."""
        curves = _curves_of(steps or range(1, 1 + max((len(v) for v in history.values()), default=0)), history)
        for spec in self.specs:
            self.query_one(f"#spark-{spec.name}", MetricSparkline).curves = curves
