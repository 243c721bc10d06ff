"""The main screen: status lines, sparklines, chart, hyperparameters, devices, events.

Layout (app.tcss): on a large terminal (>= 120x36, breakpoint classes -wide and -tall)
every panel is visible: sparklines and the chart on top, hyperparameters, devices and
events below. On a smaller one (down to 80x24) the sparklines span the top, the chart
sits bottom left and one side panel bottom right; `v` cycles which.

A population (class -population) adds its leaderboard on top, across the screen; on a
smaller terminal it takes the sparklines' place (they show the mean over members, which
the leaderboard and the chart's member curves say better).
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container
from textual.message import Message
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

from rltui.config.build import RunConfig
from rltui.session import MetricsSnapshot, SessionEvent, SessionState
from rltui.session.devices import DeviceStats
from rltui.ui.widgets import DevicePanel, EventsLog, HParamsPanel, Leaderboard, MetricChart, MetricsPanel, StatusBar
from trainers.metrics_spec import EVALUATION_METRICS, undefined_metrics

SIDE_PANELS = ("events", "hparams", "devices")
_PAUSE_HELP = "pause / resume training at the next chunk boundary"


# The keys the footer leaves out, in this order, where they do not all fit on its line
# (the help lists every key): the chart's and the side panel's (the panels' titles name
# them), then the seeds' or members' view and the watch view.
SPARE_FOOTER_ACTIONS = ("cycle_side_panel", "pick_metric", "cycle_chart", "toggle_seed_view",
                        "toggle_member_view", "watch")
COMMAND_PALETTE_WIDTH = 11  # "▏^p palette"


class KeysFooter(Footer):
    """Textual's footer redraws its keys only while the app has the focus. A browser tab
    (rltui serve) starts without it, and until a click the footer stayed blank: here the
    keys follow the bindings whether or not the app has the focus.

    Where the keys do not fit its line (an attached run, paused, at 80 columns), Textual's
    footer clips the last ones under the command palette's key and leaves a stray letter
    beside it: this one leaves out the spare keys instead, as many as it must."""

    def bindings_changed(self, screen: Screen) -> None:
        self._bindings_ready = True
        if self.is_attached and screen is self.screen:
            self.call_after_refresh(self.recompose)

    def compose(self):
        widgets = list(super().compose())
        keys = [w for w in widgets if isinstance(w, FooterKey) and not w.has_class("-command-palette")]
        room = self.screen.size.width - COMMAND_PALETTE_WIDTH

        def width(key: FooterKey) -> int:  # "k Stop run" and the space after it
            return len(key.key_display) + len(key.description) + 2

        needed = sum(width(key) for key in keys)
        left_out = set()
        for action in SPARE_FOOTER_ACTIONS:
            if needed <= room:
                break
            for key in keys:
                if key.action.endswith(action) and key not in left_out:
                    left_out.add(key)
                    needed -= width(key)
        yield from (w for w in widgets if w not in left_out)


class DashboardScreen(Screen):
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (36, "-tall")]

    # Actions live on the app (it owns the session); these keys only work while this
    # screen is on top, so they never fire behind a dialog.
    BINDINGS = [
        Binding("p", "app.pause", "Pause", tooltip=_PAUSE_HELP),
        Binding("p", "app.resume", "Resume", tooltip=_PAUSE_HELP),
        Binding("space", "app.pause", "Pause", show=False, tooltip=_PAUSE_HELP),
        Binding("space", "app.resume", "Resume", show=False, tooltip=_PAUSE_HELP),
        # A priority binding acts as the key arrives, so the editor is open before the keys
        # typed straight after `e` are handed on: otherwise they reach the dashboard's
        # focused widget first and are lost. The dashboard has no text input to want an `e`.
        Binding("e", "app.edit_hparams", "Edit", tooltip="edit a hyperparameter (applied live, no recompile)",
                priority=True),
        Binding("s", "app.save_checkpoint", "Save", tooltip="save a checkpoint at the next chunk boundary"),
        Binding(
            "r",
            "app.rollback",
            "Rollback",
            tooltip="roll back to the latest checkpoint (while paused; keeps the hyperparameters)",
        ),
        Binding("c", "cycle_chart", "Chart", tooltip="chart the next metric"),
        Binding("m", "pick_metric", "Metric", tooltip="pick the chart's metric from a list"),
        Binding(
            "w",
            "cycle_smoothing",
            "Smooth",
            show=False,
            tooltip="chart smoothing: off, 0.6, 0.9, 0.99 (a debiased moving average; the raw mean dimmed)",
        ),
        Binding("l", "toggle_log", "Log", show=False, tooltip="chart: log scale on the y axis (for losses)"),
        Binding("t", "toggle_x_axis", "X axis", show=False, tooltip="chart: x axis in env steps or wall time"),
        Binding(
            "b",
            "toggle_seed_view",
            "Seeds",
            tooltip="many seeds: return as mean with a min-max band, or one line per seed",
        ),
        Binding(
            "b",
            "toggle_member_view",
            "Members",
            tooltip="a population: return as mean over members with a min-max band, or one line per member",
        ),
        Binding(
            "v", "cycle_side_panel", "Panel", tooltip="show the next side panel (events, hyperparameters, devices)"
        ),
        Binding("x", "app.save_svg", "SVG", show=False, tooltip="save an SVG screenshot into the run directory"),
        Binding("question_mark", "app.help", "Help", tooltip="this help"),
        # An attached dashboard (rltui attach) shows Detach and Stop run instead of Quit.
        Binding("k", "app.stop_run", "Stop run", tooltip="stop the attached run, for every client (asks first)"),
        Binding("q", "app.quit", "Quit", tooltip="quit (asks first while training runs; stops the run)"),
        Binding("q", "app.detach", "Detach", tooltip="leave the attached run; it goes on (rltui attach to return)"),
        # While one of the keys above cannot act (the run has ended; rollback while not
        # paused; b with one seed), the app hides it from the footer and these say why when
        # it is pressed.
        Binding("p,space", "app.explain('pause')", show=False),
        Binding("e", "app.explain('edit_hparams')", show=False),
        Binding("s", "app.explain('save_checkpoint')", show=False),
        Binding("r", "app.explain('rollback')", show=False),
        Binding("k", "app.explain('stop_run')", show=False),
        Binding("b", "app.explain('toggle_seed_view')", show=False),  # one seed: nothing to split
    ]

    side_panel: reactive[str] = reactive("events")
    # A population's run: the leaderboard shows (set from the config's sweep, or by the
    # first snapshot that carries a population, for a client that knew no config).
    population: reactive[bool] = reactive(False)

    class Ready(Message):
        """Composed and mounted: the app may fill it in and start the session."""

    def __init__(self, config: RunConfig, *, chart_interval: float = 2.0):
        super().__init__(id="dashboard")
        self.config = config
        self.chart_interval = chart_interval

    def compose(self) -> ComposeResult:
        yield StatusBar(id="status")
        with Container(id="body"):
            # First: in the grid's order it takes the top row.
            yield Leaderboard(id="leaderboard", evaluating=self.config.eval_every_updates > 0)
            yield MetricsPanel(id="metrics", evaluating=self.config.eval_every_updates > 0, algo=self.config.algo)
            # Left out: what the algorithm does not define, and the evaluation's metrics
            # of a run that does not evaluate (they would draw an empty chart).
            never = () if self.config.eval_every_updates > 0 else EVALUATION_METRICS
            yield MetricChart(id="chart", min_interval=self.chart_interval,
                              skip=(*undefined_metrics(self.config.algo), *never))
            yield HParamsPanel(self.config, id="hparams", classes="side-panel")
            yield DevicePanel(id="devices", classes="side-panel")
            yield EventsLog(id="events", classes="side-panel")
        yield KeysFooter(compact=True)

    def on_mount(self) -> None:
        self.watch_side_panel(self.side_panel)
        self.population = bool(self.config.sweep)
        self.post_message(self.Ready())

    def on_screen_resume(self) -> None:
        # Events that came while another screen (the watch view) was shown are laid out now.
        self.events_log.catch_up()

    # --- views of the parts -------------------------------------------------------------
    @property
    def status(self) -> StatusBar:
        return self.query_one(StatusBar)

    @property
    def chart(self) -> MetricChart:
        return self.query_one(MetricChart)

    @property
    def events_log(self) -> EventsLog:
        return self.query_one(EventsLog)

    @property
    def hparams_panel(self) -> HParamsPanel:
        return self.query_one(HParamsPanel)

    @property
    def device_panel(self) -> DevicePanel:
        return self.query_one(DevicePanel)

    @property
    def leaderboard(self) -> Leaderboard:
        return self.query_one(Leaderboard)

    @property
    def edit_members(self) -> tuple[int, ...] | None:
        """The members an edit applies to: the leaderboard's selection; None, every member
        (or a run that is no population)."""
        if not self.population:
            return None
        return tuple(sorted(self.leaderboard.selected)) or None

    @property
    def shows_all_panels(self) -> bool:
        return self.has_class("-wide") and self.has_class("-tall")

    # --- updates from the app -----------------------------------------------------------
    def show_snapshot(self, snapshot: MetricsSnapshot, age: float = 0.0) -> None:
        """`age`: seconds since the snapshot arrived (see StatusBar.snapshot_age)."""
        self.status.show_snapshot(snapshot, age)
        if snapshot.population is not None:
            self.population = True
            self.leaderboard.show(snapshot.population)
        self.chart.unit = "member" if self.population else "seed"
        self.query_one(MetricsPanel).show(snapshot.history)
        self.chart.show(snapshot.history_env_steps, snapshot.history, snapshot.seed_returns)
        self.hparams_panel.values = snapshot.hparams
        self.hparams_panel.per_member = snapshot.population.keys if snapshot.population is not None else ()

    def show_state(self, state: SessionState, message: str | None, pending: str | None,
                   ending: str | None = None) -> None:
        self.status.show_state(state, message, pending, ending)
        if self.population:
            # Members still training when the run ended show how it ended (as `rltui info` does).
            self.leaderboard.ended = ending if ending in ("finished", "stopped") else None

    def add_event(self, event: SessionEvent) -> None:
        self.events_log.add(event)

    def show_devices(self, stats: DeviceStats) -> None:
        self.device_panel.stats = stats

    def on_resize(self) -> None:
        # The breakpoint classes may have changed: "v" only matters in the compact layout.
        self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "cycle_side_panel":
            return not self.shows_all_panels
        if action == "toggle_seed_view":
            return self.config.num_seeds > 1 and not self.population
        if action == "toggle_member_view":
            return self.population
        return True

    # --- actions ----------------------------------------------------------------------
    def action_cycle_chart(self) -> None:
        self.chart.cycle()

    def action_pick_metric(self) -> None:
        from rltui.ui.screens.metric_picker import MetricPicker

        def chosen(metric: str | None) -> None:
            if metric is not None:
                self.chart.metric = metric

        self.app.push_screen(MetricPicker(self.chart.metrics, self.chart.metric), chosen)

    def action_cycle_smoothing(self) -> None:
        self.chart.cycle_smoothing()

    def action_toggle_log(self) -> None:
        self.chart.toggle_log()

    def action_toggle_x_axis(self) -> None:
        self.chart.toggle_x_axis()

    def action_toggle_seed_view(self) -> None:
        self.chart.toggle_seed_view()
        self.chart.redraw()

    def action_toggle_member_view(self) -> None:
        self.action_toggle_seed_view()

    def watch_population(self, population: bool) -> None:
        self.set_class(population, "-population")
        self.leaderboard.can_focus = population
        if population:
            self.chart.unit = "member"
            self.refresh_bindings()
            # Its keys (select, freeze, clone, sort) act while it has the focus.
            self.call_after_refresh(self.set_focus, self.leaderboard)

    def action_cycle_side_panel(self) -> None:
        self.side_panel = SIDE_PANELS[(SIDE_PANELS.index(self.side_panel) + 1) % len(SIDE_PANELS)]

    def watch_side_panel(self, panel: str) -> None:
        for name in SIDE_PANELS:
            self.set_class(name == panel, f"-side-{name}")
