"""A plotext chart of one metric against env steps, with a marker at each hyperparameter
edit; `cycle()` moves to the next metric. With several seeds, the episode return is drawn
as the mean over seeds with a min-max band, or one line per seed (`toggle_seed_view()`)."""

from __future__ import annotations

import math
import time
from typing import Mapping, Sequence

import numpy as np
from textual.reactive import reactive
from textual.strip import Strip
from textual_plotext import PlotextPlot

from rltui.ui.format import bucket_means, count_ticks
from trainers import metrics_spec

# (metric, title) that the chart can show, in cycling order: those declared for it.
CHART_METRICS = tuple((spec.name, spec.title) for spec in metrics_spec.CHART_METRICS)
_TITLES = dict(CHART_METRICS)
SEED_VIEWS = ("band", "lines")


def downsample(xs: Sequence[float], ys: Sequence[float], buckets: int) -> tuple[list[float], list[float]]:
    """The finite points (x, y), as the mean of x and of y over at most `buckets` equal
    runs of them. Plotting 4096 points into 100 columns costs plotext tens of milliseconds
    on the UI thread for nothing."""
    count = min(len(xs), len(ys))
    x, y = np.asarray(xs[:count], dtype=float), np.asarray(ys[:count], dtype=float)
    finite = np.isfinite(y)
    return bucket_means(x[finite], buckets), bucket_means(y[finite], buckets)


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

    metric: reactive[str] = reactive("episode_return")
    seed_view: reactive[str] = reactive("band")

    def __init__(self, *, min_interval: float = 2.0, clock=time.monotonic, skip: Sequence[str] = (), **kwargs):
        super().__init__(**kwargs)
        self.min_interval = min_interval
        self.skip = frozenset(skip)  # metrics the run's algorithm does not define: `c` passes over them
        self._clock = clock
        self._steps: Sequence[int] = ()
        self._history: Mapping[str, Sequence[float]] = {}
        self._seed_returns: Sequence[Sequence[float]] = ()
        self.edit_steps: list[int] = []
        self._last_draw = -math.inf
        self.stale = False  # data or edits not drawn yet
        self._version = 0  # bumped by each redraw
        self._strips_key: tuple | None = None
        self._strips: list[Strip] = []

    def on_mount(self) -> None:
        super().on_mount()
        # Line colours come from the theme through the component classes in app.tcss.
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.redraw())
        self.redraw()

    @property
    def title(self) -> str:
        title = f"{_TITLES.get(self.metric, self.metric)} vs env steps"
        if self.shows_seeds:
            title += f", {len(self._seed_returns)} seeds: " + ("mean, min-max" if self.seed_view == "band" else "each")
        return title

    @property
    def shows_seeds(self) -> bool:
        return self.metric == "episode_return" and len(self._seed_returns) > 1

    def toggle_seed_view(self) -> str:
        self.seed_view = SEED_VIEWS[(SEED_VIEWS.index(self.seed_view) + 1) % len(SEED_VIEWS)]
        return self.seed_view

    def watch_seed_view(self) -> None:
        self.watch_metric()

    def cycle(self) -> str:
        """Move to the next metric, passing over those in `skip` (REINFORCE has no clip
        fraction). A metric that is NaN for a while, the episode return before the first
        episode ends, is still shown."""
        names = [name for name, _ in CHART_METRICS if name not in self.skip]
        self.metric = names[(names.index(self.metric) + 1) % len(names)] if self.metric in names else names[0]
        return self.metric

    def watch_metric(self) -> None:
        self.border_title = f"{self.title} (c)"
        if self.is_mounted:
            self.redraw()

    def show(
        self, steps: Sequence[int], history: Mapping[str, Sequence[float]], seed_returns: Sequence[Sequence[float]] = ()
    ) -> None:
        had_seeds = self.shows_seeds
        self._steps, self._history, self._seed_returns = steps, history, seed_returns
        if self.shows_seeds != had_seeds:
            self.border_title = f"{self.title} (c)"
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

    def redraw(self) -> None:
        self._last_draw = self._clock()
        self.stale = False
        plt = self.plt
        plt.clear_data()
        buckets = max(16, 2 * self.size.width)
        ys = self._history.get(self.metric, ())
        xs, ys = downsample(self._steps[-len(ys) :] if ys else (), ys, buckets)
        if xs:
            if self.shows_seeds:
                self._plot_seeds(buckets)
            plt.plot(xs, ys, marker="braille", color=self._colour("metric-chart--line"))
            # plotext labels env steps as raw floats (3054592.0): round ticks, 1.5M labels,
            # about one per 10 columns (it drops a label that would overlap another).
            plt.xticks(*count_ticks(min(xs), max(xs), max(2, self.size.width // 10)))
            edit_colour = self._colour("metric-chart--edit")
            for step in self.edit_steps:
                if self._steps[0] <= step <= self._steps[-1]:
                    plt.vertical_line(step, color=edit_colour)
        self._version += 1
        self.refresh()

    def _plot_seeds(self, buckets: int) -> None:
        """Under the mean line: the min and max over seeds at each update, or every seed."""
        colour = self._colour("metric-chart--band")
        seeds = self._seed_returns
        steps = self._steps[-len(seeds[0]) :]
        if self.seed_view == "band":
            columns = [[v for v in values if math.isfinite(v)] for values in zip(*seeds)]
            for reduce in (min, max):
                ys = [reduce(c) if c else math.nan for c in columns]
                self.plt.plot(*downsample(steps, ys, buckets), marker="dot", color=colour)
        else:
            for values in seeds:
                self.plt.plot(*downsample(steps, values, buckets), marker="dot", color=colour)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
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
