"""One run's curves, full screen: what Enter opens in the runs view on a run that is not
live."""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Static

from rltui.formatting import fmt_count
from rltui.runfiles.loading import LoadedRun
from rltui.runs_view.curves import SMOOTHING, X_AXES, metric_choices, overlay
from rltui.ui.widgets.runs_chart import CurveControls, RunsChart


class CurvesScreen(Screen):
    """One run's curves, full screen (Enter on a run that is not live)."""

    DEFAULT_CSS = """
    CurvesScreen RunsChart { height: 1fr; }
    CurvesScreen #curves-status { height: 1; padding: 0 1; background: $panel; }
    """
    BINDINGS = [
        Binding("m", "metric", "metric"),
        Binding("x", "x_axis", "x axis"),
        Binding("w", "smoother", "smooth"),
        Binding("W", "rougher", "less smooth"),
        Binding("escape,q", "close", "back"),
    ]

    def __init__(self, run: LoadedRun, controls: CurveControls, on_close: Callable[[], None] | None = None):
        super().__init__()
        self.run = run
        self.controls = controls  # shared with the screen that opened this one, which redraws with them
        self.on_close = on_close  # called once this screen is gone: the list redraws its curves

    def compose(self) -> ComposeResult:
        yield RunsChart(id="curves-chart")
        yield Static(id="curves-status")
        yield Footer()

    def on_mount(self) -> None:
        self.redraw()

    def on_resize(self) -> None:
        self.redraw()

    def redraw(self) -> None:
        c = self.controls
        chart = self.query_one(RunsChart)
        result = overlay([self.run], c.metric, x_axis=c.x_axis, smoothing=c.smoothing,
                            points=max(40, 2 * chart.size.width))
        chart.show(result)
        problems = f" · ⚠ {'; '.join(self.run.problems)}" if self.run.problems else ""
        self.query_one("#curves-status", Static).update(Text(
            f"{self.run.name} · {self.run.updates:,} updates · {fmt_count(self.run.env_steps)} env steps · "
            f"read in {self.run.load_seconds:.2f} s · curves {result.seconds:.2f} s{problems}", no_wrap=True,
            overflow="ellipsis"))

    def action_metric(self) -> None:
        choices = metric_choices([self.run])
        if choices:
            c = self.controls
            c.metric = choices[(choices.index(c.metric) + 1) % len(choices)] if c.metric in choices else choices[0]
        self.redraw()

    def action_x_axis(self) -> None:
        self.controls.x_axis = X_AXES[(X_AXES.index(self.controls.x_axis) + 1) % len(X_AXES)]
        self.redraw()

    def action_smoother(self) -> None:
        levels = SMOOTHING
        index = min(range(len(levels)), key=lambda i: abs(levels[i] - self.controls.smoothing))
        self.controls.smoothing = levels[min(len(levels) - 1, index + 1)]
        self.redraw()

    def action_rougher(self) -> None:
        levels = SMOOTHING
        index = min(range(len(levels)), key=lambda i: abs(levels[i] - self.controls.smoothing))
        self.controls.smoothing = levels[max(0, index - 1)]
        self.redraw()

    def action_close(self) -> None:
        self.app.pop_screen()
        if self.on_close is not None:
            self.on_close()
