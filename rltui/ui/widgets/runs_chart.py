"""The runs view's chart: an `Overlay` of runs' curves or groups' bands, drawn with
plotext, and the chart settings the list and a run's own curves screen share."""

from __future__ import annotations

import dataclasses

from textual.color import Color
from textual_plotext import PlotextPlot

from rltui.formatting import count_ticks, time_ticks
from rltui.runfiles.statistics import interval_kind
from rltui.runs_view.curves import Overlay
from rltui.ui.widgets.chart import band_path
from trainers.metrics_spec import EPISODE_RETURN


class RunsChart(PlotextPlot):
    """An Overlay drawn: each run's smoothed line over its raw curve in a dim shade of the
    same colour, or each group's mean/IQM line on its confidence band."""

    DEFAULT_CSS = "RunsChart { border: round $primary; }"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.shown: Overlay | None = None
        self.empty_text = "select runs with space to overlay their curves"

    def on_mount(self) -> None:
        super().on_mount()
        self.border_title = self.empty_text

    def _palette(self) -> list[Color]:
        theme = self.app.current_theme
        names = [theme.primary, theme.secondary, theme.accent, theme.warning, theme.success, theme.error]
        return [Color.parse(c) for c in names if c]

    def show(self, overlay: Overlay | None) -> None:
        self.shown = overlay
        plt = self.plt
        plt.clear_data()
        if overlay is None or not (overlay.lines or overlay.bands):
            self.border_title = self.empty_text if overlay is None else f"{overlay.metric}: no values in these runs"
            self.refresh()
            return
        palette = self._palette()
        background = Color.parse(self.app.current_theme.background or "#000000")
        xs_all: list[float] = []
        for k, line in enumerate(overlay.lines):
            colour = palette[k % len(palette)]
            if line.raw is not None:
                plt.plot(line.xs.tolist(), line.raw.tolist(), marker="braille", color=colour.blend(background, 0.6).rgb)
            plt.plot(line.xs.tolist(), line.ys.tolist(), marker="braille", color=colour.rgb, label=line.label)
            xs_all += [float(line.xs[0]), float(line.xs[-1])]
        for k, group in enumerate(overlay.bands):
            colour = palette[k % len(palette)]
            plt.plot(*band_path(group.xs, group.low, group.high), marker="braille",
                     color=colour.blend(background, 0.6).rgb)
            plt.plot(group.xs.tolist(), group.center.tolist(), marker="braille", color=colour.rgb, label=group.label)
            xs_all += [float(group.xs[0]), float(group.xs[-1])]
        low, high = min(xs_all), max(xs_all)
        ticks = count_ticks if overlay.x_axis == "steps" else time_ticks
        plt.xticks(*ticks(low, high, max(2, self.size.width // 12)))
        axis = "env steps" if overlay.x_axis == "steps" else "wall time"
        what = (f"{overlay.statistic} of {overlay.group} groups, 95% {interval_kind(overlay.statistic)} band"
                if overlay.group
                else f"{len(overlay.lines)} run{'s' if len(overlay.lines) != 1 else ''}")
        smoothing = f", EMA {overlay.smoothing:g} (raw dimmed)" if overlay.smoothing and not overlay.group else (
            f", EMA {overlay.smoothing:g}" if overlay.smoothing else "")
        self.border_title = f"{overlay.metric} vs {axis}: {what}{smoothing}"
        self.refresh()


@dataclasses.dataclass
class CurveControls:
    """The chart settings shared by the list and a run's own curves screen."""

    metric: str = EPISODE_RETURN
    x_axis: str = "steps"
    smoothing: float = 0.6
    group: str | None = None
    statistic: str = "mean"
