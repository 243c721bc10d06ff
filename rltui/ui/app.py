"""The dashboard app: a client of a session that shows and steers live training.

It uses only the session interface (`rltui.session.interface.SessionClient`), which the
in-process `TrainingSession` and the attached `RemoteSession` both implement. Session
callbacks arrive on another thread and are forwarded as messages (`rltui.ui.messages`);
the device sampler runs in a worker thread. Nothing here blocks the UI on training.
`DashboardApp` handles those messages in `rltui.ui.session_handlers` and the user's keys
and palette commands in `rltui.ui.actions`; here it starts up, shuts down and lists its
keys and commands.

Quitting stops an in-process run (it cannot outlive this process); an attached run goes
on when the dashboard leaves, and is stopped only by its own confirmed key.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen

from rltui.config.build import RunConfig
from rltui.session import SessionState
from rltui.session.devices import DeviceSampler, DeviceStatsSource
from rltui.session.interface import SessionClient
from rltui.ui.actions import DashboardActions
from rltui.ui.messages import SessionBridge
from rltui.ui.screens import DashboardScreen
from rltui.ui.session_handlers import SessionHandlers
from rltui.ui.terminal import EndsWithItsTerminal
from rltui.ui.themes import load_themes, resolve_theme_name

# After Stop, how long to wait for the chunk in flight (or a compile) before giving up:
# the session thread is a daemon, so the process can still exit.
STOP_TIMEOUT = 5.0
WATCH_KEY = "a"  # the agent; "w" is the chart's smoothing


class DashboardApp(SessionHandlers, DashboardActions, EndsWithItsTerminal, App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "rltui"
    # ctrl+q quits an owned run and detaches from an attached one (check_action picks).
    BINDINGS = [
        Binding("ctrl+q", "quit", "Quit", show=False, priority=True),
        Binding("ctrl+q", "detach", "Detach", show=False, priority=True),
        # On the App, so that it needs no dashboard change; the watch screen closes with it too.
        Binding(WATCH_KEY, "watch", "Watch", tooltip="watch the policy play, live: each new episode takes "
                "the latest parameters (space pause, n step, g greedy/sampled, s seed, +/- speed, q close)"),
    ]

    def __init__(
        self,
        session: SessionClient,
        config: RunConfig,
        run_dir: Path,
        *,
        theme: str | None = None,
        device_source: DeviceStatsSource | None = None,
        device_interval: float = 2.0,
        refresh_interval: float = 1.0,
        chart_interval: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
        user_theme_dir: Path | None = None,
    ):
        super().__init__()
        self.theme_problems: list[str] = []
        themes = load_themes(user_theme_dir, self.theme_problems)
        for loaded in themes:
            self.register_theme(loaded)
        self.theme = resolve_theme_name(theme, themes)  # ValueError before anything starts
        self.session = session
        self.config = config
        self.run_dir = Path(run_dir)
        self.device_source = device_source if device_source is not None else DeviceSampler()
        self.device_interval = device_interval
        # Panels show the latest snapshot at most this often. Chunks end ~3 times a second
        # and every redraw is CPU taken from training (measured in benchmarks/dashboard.py).
        self.refresh_interval = refresh_interval
        self._last_shown = -float("inf")
        self._show_timer = None
        self._clock = clock
        self.session_state: SessionState = session.state
        self.state_message: str | None = None
        self._ending_events: list[dict] = []  # those of ENDING_EVENTS since the session (re)started
        self.pending: str | None = None  # "pausing", "resuming", "stopping": asked, not yet confirmed
        self.pending_edits: dict[str, float] = {}
        self._edit_members: tuple[int, ...] | None = None  # a population: whom the open editor edits
        self.latest = None  # the latest MetricsSnapshot
        self._latest_at = 0.0  # when it arrived (self._clock)
        self._shown_at: float | None = None  # when the snapshot on screen arrived
        self._compile_started: float | None = None
        # The update of the first chunk seen since training (re)started: that chunk pays
        # start-up costs (a compile, caches), so its speed says little about the rest, and
        # the ETA waits for a later one.
        self._first_chunk_update: int | None = None
        if session.state in (SessionState.RUNNING, SessionState.PAUSED):
            # Attached to a run in progress: its speed is the run's, past its start-up.
            self._first_chunk_update = -1
        self.quitting = False  # Stop sent; the app exits when the session has ended
        self.attached = session.outlives_client  # the run goes on without this dashboard
        self.dashboard = DashboardScreen(config, chart_interval=chart_interval)
        # Messages that arrive before the dashboard's widgets exist (a session that was
        # already running) wait here and are replayed once it is ready.
        self._dashboard_ready = False
        self._early: list[Message] = []
        # Added before the session starts (in on_mount), so no callback is missed.
        session.add_listener(SessionBridge(self))

    def get_default_screen(self) -> Screen:
        return self.dashboard

    def on_dashboard_screen_ready(self, message: DashboardScreen.Ready) -> None:
        """The default screen's widgets exist only now (App.on_mount runs before them)."""
        info = self.session.describe()
        devices = list(info.get("devices", ()))
        if len(devices) > 2:  # "8 × gpu" rather than a list that fills the line
            devices = [f"{len(devices)} × {devices[0].split(':')[0]}"]
        devices = ", ".join(devices) or "?"
        self.dashboard.status.run_info = (
            f"{info.get('env', '?')} · {info.get('algo', '?')} · {devices} ({info.get('device_kind', '?')})"
            f" · run {self.run_dir.name}"
        )
        self.dashboard.hparams_panel.values = self.session.hparams.as_floats()
        for problem in self.theme_problems:
            self.notify(problem, title="theme skipped", severity="warning", timeout=8)
        self._show_state()
        self.set_interval(1.0, self._tick)
        self._sample_devices()
        self.set_interval(self.device_interval, self._sample_devices)
        self._dashboard_ready = True
        for early in self._early:
            self._handle(early)
        if self._early:
            # On a terminal, panels filled in this first frame (the events a run had
            # logged before this client attached) can keep the height of their empty
            # text: lay them out again once that frame is drawn.
            self.call_after_refresh(self._relayout_dashboard)
        self._early.clear()
        if self.session.state is SessionState.IDLE:
            self.session.start()

    def _relayout_dashboard(self) -> None:
        for widget in self.dashboard.walk_children():
            widget.refresh(layout=True)

    def on_unmount(self) -> None:
        self.device_source.close()

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        for command in super().get_system_commands(screen):
            # Ours: Screenshot saves into the run directory, Quit asks first while
            # training runs, and Help lists the keys that Textual's Keys panel would.
            if command.title not in ("Screenshot", "Quit", "Keys"):
                yield command
        if self.attached:
            yield SystemCommand("Detach", "Leave the run; it goes on (q)", self.action_detach)
        else:
            yield SystemCommand("Quit", "Stops training; asks first while it runs (q)", self.action_quit)
        yield SystemCommand("Pause / resume training", "At the next chunk boundary (p)", self.action_toggle_pause)
        yield SystemCommand(
            "Edit hyperparameters", "Change lr, gamma, ... live, no recompile (e)", self.action_edit_hparams
        )
        yield SystemCommand("Save checkpoint", "At the next chunk boundary (s)", self.action_save_checkpoint)
        yield SystemCommand(
            "Roll back to the latest checkpoint", "While paused, e.g. after divergence (r)", self.action_rollback
        )
        if self.attached:
            yield SystemCommand("Stop the run", "For every client; asks first (k)", self.action_stop_run)
        yield SystemCommand("Next chart metric", "Cycle what the chart shows (c)", self.action_cycle_chart)
        yield SystemCommand("Pick the chart's metric", "From a list (m)", self.dashboard.action_pick_metric)
        yield SystemCommand("Chart smoothing", "Off, 0.6, 0.9, 0.99: a debiased moving average (w)",
                            self.dashboard.action_cycle_smoothing)
        yield SystemCommand("Chart log scale", "On the y axis, for losses (l)", self.dashboard.action_toggle_log)
        yield SystemCommand("Chart x axis", "Env steps or wall time (t)", self.dashboard.action_toggle_x_axis)
        yield SystemCommand(
            "Next side panel", "Events, hyperparameters, devices on small screens (v)", self.action_cycle_side_panel
        )
        yield SystemCommand("Save SVG screenshot", f"Into the run directory {self.run_dir} (x)", self.action_save_svg)
        yield SystemCommand("Watch the agent", f"The policy playing its env, live ({WATCH_KEY})", self.action_watch)
        yield SystemCommand("Help", "Keys and how the dashboard works (?)", self.action_help)


