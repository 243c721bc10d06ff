"""A plotext chart of one metric against env steps, with a marker at each hyperparameter
edit; `cycle()` moves to the next metric."""

from __future__ import annotations

import math
import time
from typing import Mapping, Sequence

from textual.reactive import reactive
from textual.strip import Strip
from textual_plotext import PlotextPlot

# (metric, title) that the chart can show, in cycling order.
CHART_METRICS = (
    ("episode_return", "episode return"),
    ("episode_length", "episode length"),
    ("policy_loss", "policy loss"),
    ("value_loss", "value loss"),
    ("entropy", "entropy"),
    ("approx_kl", "approx KL"),
    ("clip_frac", "clip fraction"),
    ("grad_norm", "grad norm"),
    ("lr", "learning rate"),
    ("sps", "env steps per second"),
)
_TITLES = dict(CHART_METRICS)


def downsample(xs: Sequence[float], ys: Sequence[float], buckets: int) -> tuple[list[float], list[float]]:
    """Mean of x and y over `buckets` equal runs of finite points. Plotting 4096 points
    into 100 columns costs plotext tens of milliseconds on the UI thread for nothing."""
    points = [(x, y) for x, y in zip(xs, ys) if math.isfinite(y)]
    if len(points) <= buckets:
        return [p[0] for p in points], [p[1] for p in points]
    out_x, out_y = [], []
    size = len(points) / buckets
    for i in range(buckets):
        chunk = points[int(i * size) : int((i + 1) * size)] or points[int(i * size) : int(i * size) + 1]
        out_x.append(sum(p[0] for p in chunk) / len(chunk))
        out_y.append(sum(p[1] for p in chunk) / len(chunk))
    return out_x, out_y


class MetricChart(PlotextPlot):
    """Redrawn at most every `min_interval` seconds: plotext runs on the UI thread, and
    snapshots can arrive faster than a chart is worth redrawing. New data that is not
    drawn yet waits for the next `show` (or `flush`); there is no timer of its own, so
    redraws keep to the moments the app chose for drawing (not at chunk boundaries).

    Lines are served through the Line API (`render_line`) from strips built once per
    redraw: Textual re-renders widgets on style changes (a dialog opening, focus moving),
    and turning plotext's ANSI output into strips costs tens of milliseconds each time.
    """

    COMPONENT_CLASSES = {"metric-chart--line", "metric-chart--edit"}

    metric: reactive[str] = reactive("episode_return")

    def __init__(self, *, min_interval: float = 2.0, clock=time.monotonic, **kwargs):
        super().__init__(**kwargs)
        self.min_interval = min_interval
        self._clock = clock
        self._steps: Sequence[int] = ()
        self._history: Mapping[str, Sequence[float]] = {}
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
        return f"{_TITLES.get(self.metric, self.metric)} vs env steps"

    def cycle(self) -> str:
        names = [name for name, _ in CHART_METRICS]
        self.metric = names[(names.index(self.metric) + 1) % len(names)] if self.metric in names else names[0]
        return self.metric

    def watch_metric(self) -> None:
        self.border_title = f"{self.title} (c)"
        if self.is_mounted:
            self.redraw()

    def show(self, steps: Sequence[int], history: Mapping[str, Sequence[float]]) -> None:
        self._steps, self._history = steps, history
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
        ys = self._history.get(self.metric, ())
        xs, ys = downsample(self._steps[-len(ys) :] if ys else (), ys, max(16, 2 * self.size.width))
        if xs:
            plt.plot(xs, ys, marker="braille", color=self._colour("metric-chart--line"))
            edit_colour = self._colour("metric-chart--edit")
            for step in self.edit_steps:
                if self._steps[0] <= step <= self._steps[-1]:
                    plt.vertical_line(step, color=edit_colour)
        self._version += 1
        self.refresh()

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
