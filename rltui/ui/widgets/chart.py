"""A plotext chart of one metric over the whole run, against env steps or wall time, with
a marker at each hyperparameter edit.

It draws the run's curves (rltui.session.history): each point is a bucket of updates, the
line its mean and a dim filled band its minimum and maximum, so a spike far back stays in
sight and the y axis spans the same extremes the sparklines panel reports. With several
seeds, the episode return is drawn as the mean over seeds on a band from the lowest to the
highest seed, or one coloured line per seed with a legend (`toggle_seed_view()`). In a
population each curve is a member's (the mean of its seeds), and `unit` says so.
Controls: `cycle()` or `metric = ...`, `cycle_smoothing()` (a debiased exponential moving
average, the raw mean dimmed behind it), `toggle_log()` and `toggle_x_axis()`."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence

import numpy as np
from textual.markup import escape
from textual.reactive import reactive
from textual.strip import Strip
from textual_plotext import PlotextPlot

from rltui.formatting import bucket_means, count_ticks, time_ticks
from rltui.runfiles.statistics import ema
from rltui.session.history import Curves
from rltui.session.metrics import MetricsStore, records_from_history
from trainers import metrics_spec
from trainers.metrics_spec import EPISODE_RETURN

# (metric, title) that the chart can show, in cycling order: those declared for it.
CHART_METRICS = tuple((spec.name, spec.title) for spec in metrics_spec.CHART_METRICS)
_TITLES = dict(CHART_METRICS)
SEED_VIEWS = ("band", "lines")
SMOOTHING = (0.0, 0.6, 0.9, 0.99)  # the weights `w` steps through; 0 is off
X_AXES = ("steps", "time")


def band_path(
    xs: np.ndarray, lo: np.ndarray, hi: np.ndarray, columns: int | None = None
) -> tuple[list[float], list[float]]:
    """A zigzag through each point's low and high (low-high at one x, high-low at the
    next): drawn as a line, its vertical strokes fill the band between them. `columns`:
    the band is first resampled onto that many evenly spaced x (the chart's dot columns),
    so that a curve with fewer points than the chart has columns is filled too."""
    keep = np.isfinite(lo) & np.isfinite(hi)
    xs, lo, hi = xs[keep], lo[keep], hi[keep]
    if columns is not None and 1 < len(xs) < columns:
        dense = np.linspace(xs[0], xs[-1], columns)
        xs, lo, hi = dense, np.interp(dense, xs, lo), np.interp(dense, xs, hi)
    ends = np.stack([lo, hi], axis=1)
    ends[1::2] = ends[1::2, ::-1]
    return np.repeat(xs, 2).tolist(), ends.ravel().tolist()


def downsample(xs: Sequence[float], ys: Sequence[float], buckets: int) -> tuple[list[float], list[float]]:
    """The finite points (x, y), as the mean of x and of y over at most `buckets` equal
    runs of them (a trend only: the chart itself draws the curves' minima and maxima)."""
    count = min(len(xs), len(ys))
    x, y = np.asarray(xs[:count], dtype=float), np.asarray(ys[:count], dtype=float)
    finite = np.isfinite(y)
    return bucket_means(x[finite], buckets), bucket_means(y[finite], buckets)


def _curves_of(
    steps: Sequence[int], history: Mapping[str, Sequence[float]], seed_returns: Sequence[Sequence[float]] = ()
) -> Curves:
    curves = getattr(history, "curves", None)
    if curves is None or (len(seed_returns) > 1 and not curves.seeds):  # plain recent values, made by hand
        store = MetricsStore()
        store.extend(records_from_history(history, steps, seed_returns))
        curves = store.curves()
    return curves


class MetricChart(PlotextPlot):
    """Redrawn at most every `min_interval` seconds: plotext runs on the UI thread, and
    snapshots can arrive faster than a chart is worth redrawing. New data that is not
    drawn yet waits for the next `show` (or `flush`); there is no timer of its own, so
    redraws keep to the moments the app chose for drawing (not at chunk boundaries).

    Lines are served through the Line API (`render_line`) from strips built once per
    redraw: Textual re-renders widgets on style changes (a dialog opening, focus moving),
    and turning plotext's ANSI output into strips costs tens of milliseconds each time.
    """

    COMPONENT_CLASSES = {"metric-chart--line", "metric-chart--band", "metric-chart--edit"}

    metric: reactive[str] = reactive(EPISODE_RETURN)
    seed_view: reactive[str] = reactive("band")
    smoothing: reactive[float] = reactive(0.0)
    log_scale: reactive[bool] = reactive(False)
    x_axis: reactive[str] = reactive("steps")
    # What each overlaid curve is: a seed, or a population's member (the mean of its seeds).
    unit: reactive[str] = reactive("seed")

    def __init__(self, *, min_interval: float = 2.0, clock=time.monotonic, skip: Sequence[str] = (), **kwargs):
        super().__init__(**kwargs)
        self.min_interval = min_interval
        # Metrics the run never has (its algorithm does not define them, or it does not
        # evaluate): `c` passes over them and `m` does not offer them.
        self.skip = frozenset(skip)
        self._clock = clock
        self.curves: Curves = _curves_of((), {})
        self.edit_steps: list[int] = []
        self._last_draw = -math.inf
        self.stale = False  # data or edits not drawn yet
        self._version = 0  # bumped by each redraw
        self._strips_key: tuple | None = None
        self._strips: list[Strip] = []
        # What the last redraw plotted, for tests and the log-scale note: the x and y
        # extents (None before any data) and each line's label.
        self.y_range: tuple[float, float] | None = None
        self.x_range: tuple[float, float] | None = None
        self.log_refused = False  # log scale asked for, values <= 0: drawn linear

    def on_mount(self) -> None:
        super().on_mount()
        # The axes with ticks only (left and lower): the panel's border closes the plot, and
        # a frame of its own beside that border read as a border drawn twice.
        self.plt.xaxes(True, False)
        self.plt.yaxes(True, False)
        # Line colours come from the theme through the component classes in app.tcss.
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.redraw())
        self.redraw()

    @property
    def metrics(self) -> list[tuple[str, str]]:
        """(metric, title) the chart offers for this run."""
        return [(name, title) for name, title in CHART_METRICS if name not in self.skip]

    @property
    def title(self) -> str:
        axis = "env steps" if self.x_axis == "steps" else "wall time"
        title = f"{_TITLES.get(self.metric, self.metric)} vs {axis}"
        if self.shows_seeds:
            title += f", {self.curves.seeds} {self.unit}s: " + ("mean, min-max" if self.seed_view == "band" else "each")
        extras = []
        if self.smoothing:
            extras.append(f"smoothed {self.smoothing:g}")
        if self.log_scale:
            extras.append("log: values ≤ 0, linear" if self.log_refused else "log")
        return title + (f" [{', '.join(extras)}]" if extras else "")

    @property
    def shows_seeds(self) -> bool:
        return self.metric == EPISODE_RETURN and self.curves.seeds > 1

    def toggle_seed_view(self) -> str:
        self.seed_view = SEED_VIEWS[(SEED_VIEWS.index(self.seed_view) + 1) % len(SEED_VIEWS)]
        return self.seed_view

    def cycle_smoothing(self) -> float:
        index = SMOOTHING.index(self.smoothing) if self.smoothing in SMOOTHING else -1
        self.smoothing = SMOOTHING[(index + 1) % len(SMOOTHING)]
        return self.smoothing

    def toggle_log(self) -> bool:
        self.log_scale = not self.log_scale
        return self.log_scale

    def toggle_x_axis(self) -> str:
        self.x_axis = X_AXES[(X_AXES.index(self.x_axis) + 1) % len(X_AXES)]
        return self.x_axis

    def watch_seed_view(self) -> None:
        self.watch_metric()

    def watch_smoothing(self) -> None:
        self.watch_metric()

    def watch_log_scale(self) -> None:
        self.watch_metric()

    def watch_x_axis(self) -> None:
        self.watch_metric()

    def watch_unit(self) -> None:
        self.watch_metric()

    def cycle(self) -> str:
        """Move to the next metric, passing over those in `skip` (REINFORCE has no clip
        fraction). A metric that is NaN for a while, the episode return before the first
        episode ends, is still shown."""
        names = [name for name, _ in self.metrics]
        self.metric = names[(names.index(self.metric) + 1) % len(names)] if self.metric in names else names[0]
        return self.metric

    def _retitle(self) -> None:
        # A border title is markup: a bracketed note such as "[log]" would be read as a tag.
        self.border_title = escape(f"{self.title} (c, m)")

    def watch_metric(self) -> None:
        self._retitle()
        if self.is_mounted:
            self.redraw()

    def show(
        self, steps: Sequence[int], history: Mapping[str, Sequence[float]], seed_returns: Sequence[Sequence[float]] = ()
    ) -> None:
        """`history`: a snapshot's, which carries the whole run's curves."""
        self.show_curves(_curves_of(steps, history, seed_returns))

    def show_curves(self, curves: Curves) -> None:
        had_seeds = self.shows_seeds
        self.curves = curves
        if self.shows_seeds != had_seeds:
            self._retitle()
        self.stale = True
        if self.is_mounted and self._clock() - self._last_draw >= self.min_interval:
            self.redraw()

    def add_edit(self, env_steps: int) -> None:
        """Marked at the next redraw (`show` or `flush`)."""
        self.edit_steps.append(env_steps)
        self.border_subtitle = f"│ = hyperparameter edit ({len(self.edit_steps)})"
        self.stale = True

    def flush(self) -> None:
        """Draw what is pending now: training has paused or ended, no `show` will come."""
        if self.stale and self.is_mounted:
            self.redraw()

    def _colour(self, component: str) -> tuple[int, int, int] | None:
        colour = self.get_component_rich_style(component).color
        return colour.get_truecolor() if colour is not None else None

    def _seed_colours(self, count: int) -> list:
        """One colour per seed (or member), from the theme's named colours."""
        theme = self.app.current_theme
        names = [theme.primary, theme.secondary, theme.accent, theme.warning, theme.success, theme.error]
        from textual.color import Color

        colours = [Color.parse(c).rgb for c in names if c]
        return [colours[i % len(colours)] for i in range(count)]

    def redraw(self) -> None:
        self._last_draw = self._clock()
        self.stale = False
        plt = self.plt
        plt.clear_data()
        plt.yscale("linear")
        self.y_range = self.x_range = None
        buckets = max(16, 2 * self.size.width)
        curves = self.curves.rebin(buckets)
        xs = curves.x(self.x_axis)
        series = curves.series(self.metric)
        lines_view = self.shows_seeds and self.seed_view == "lines"
        if self.shows_seeds:
            lo, hi = curves.seed_band()
        else:
            lo, hi = series.lo, series.hi
        finite = np.isfinite(lo)
        self.log_refused = False
        if finite.any():
            band, line = self._colour("metric-chart--band"), self._colour("metric-chart--line")
            self.y_range = (float(np.nanmin(lo)), float(np.nanmax(hi)))
            self.x_range = (float(xs[finite].min()), float(xs[finite].max()))
            self.log_refused = self.log_scale and self.y_range[0] <= 0
            if self.log_scale and not self.log_refused:
                plt.yscale("log")
            if lines_view:
                for k, (seed, colour) in enumerate(zip(curves.seed_series(), self._seed_colours(curves.seeds))):
                    keep = np.isfinite(seed.mean)
                    ys = ema(seed.mean, self.smoothing)[keep] if self.smoothing else seed.mean[keep]
                    plt.plot(xs[keep].tolist(), ys.tolist(), marker="braille", color=colour, label=f"{self.unit} {k}")
            else:
                # The band: each bucket's minimum to maximum (over its updates, or its seeds).
                plt.plot(*band_path(xs, lo, hi, columns=2 * self.size.width), marker="braille", color=band)
                keep = np.isfinite(series.mean)
                if self.smoothing:
                    plt.plot(xs[keep].tolist(), series.mean[keep].tolist(), marker="braille", color=band)
                    ys = ema(series.mean, self.smoothing)[keep]
                else:
                    ys = series.mean[keep]
                plt.plot(xs[keep].tolist(), ys.tolist(), marker="braille", color=line)
            ticks = count_ticks if self.x_axis == "steps" else time_ticks
            # plotext labels env steps as raw floats (3054592.0): round ticks, 1.5M labels,
            # about one per 10 columns (it drops a label that would overlap another).
            plt.xticks(*ticks(*self.x_range, max(2, self.size.width // 10)))
            edit_colour = self._colour("metric-chart--edit")
            for x in self._edit_positions(curves):
                if self.x_range[0] <= x <= self.x_range[1]:
                    plt.vertical_line(x, color=edit_colour)
        self._retitle()
        self._version += 1
        self.refresh()

    def _edit_positions(self, curves: Curves) -> list[float]:
        """Where each edit goes on the x axis: its env steps, or against wall time the time
        at which training reached them (between buckets, in proportion)."""
        if self.x_axis == "steps" or not self.edit_steps:
            return [float(step) for step in self.edit_steps]
        steps, walls = curves.x("steps"), curves.x("time")
        return np.interp(self.edit_steps, steps, walls, left=np.nan, right=np.nan).tolist()

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        key = (self._version, self.size, self.app.theme)
        if self._strips_key is not None and self._strips_key[0] == self._version and self._strips_key != key:
            # Resized (or restyled) since the last build: plotext's build transforms the data
            # it holds in place (log10 on a log scale), so the data are set again, rebinned
            # to the new width, before it builds again.
            self.redraw()
            key = (self._version, self.size, self.app.theme)
        if self._strips_key != key:
            console = self.app.console
            plot = super().render()  # plotext's build, as rich Text
            lines = console.render_lines(plot, console.options.update(width=width, height=self.size.height), pad=True)
            self._strips = [Strip(line, width) for line in lines]
            self._strips_key = key
        if y < len(self._strips):
            return self._strips[y]
        return Strip.blank(width, self.visual_style.rich_style)
