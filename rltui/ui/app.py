"""The dashboard app: a client of a session that shows and steers live training.

It uses only the session interface (`rltui.session.interface.SessionClient`), which the
in-process `TrainingSession` and the attached `RemoteSession` both implement. Session
callbacks arrive on another thread and are forwarded as messages (`rltui.ui.messages`);
the device sampler runs in a worker thread. Nothing here blocks the UI on training.

Quitting stops an in-process run (it cannot outlive this process); an attached run goes
on when the dashboard leaves, and is stopped only by its own confirmed key.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path

from textual import work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.message import Message
from textual.screen import Screen

from rltui.config import RunConfig
from rltui.headless import continue_line
from rltui.session import Pause, Resume, SaveCheckpoint, SessionState, SetHParams, Stop
from rltui.session.commands import CloneMember, FreezeMembers, Rollback
from rltui.session.devices import DeviceSampler, DeviceStatsSource
from rltui.session.interface import SessionClient
from rltui.ui import availability
from rltui.ui.format import fmt_value
from rltui.ui.messages import (
    DeviceStatsSampled,
    MetricsUpdated,
    SessionBridge,
    SessionEventLogged,
    SessionStateChanged,
)
from rltui.ui.screens import CloneDialog, DashboardScreen, HelpScreen, HParamEditor, QuitConfirm, StopRunConfirm
from rltui.ui.screens.clone import CloneChoice
from rltui.ui.themes import load_themes, resolve_theme_name
from rltui.ui.widgets import Leaderboard
from trainers.hparams import ALGO_HPARAMS

# After Stop, how long to wait for the chunk in flight (or a compile) before giving up:
# the session thread is a daemon, so the process can still exit.
STOP_TIMEOUT = 5.0
# Seconds between a snapshot's arrival and drawing it (see on_metrics_updated).
AFTER_CHUNK_DELAY = 0.05
LIVE = (SessionState.IDLE, SessionState.COMPILING, SessionState.RUNNING, SessionState.PAUSED)
WATCH_KEY = "a"  # the agent; "w" is the chart's smoothing


class DashboardApp(App[None]):
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

    # --- messages from the session and the sampler ------------------------------------
    def _handle(self, message: Message) -> None:
        handler = {
            MetricsUpdated: self.on_metrics_updated,
            SessionStateChanged: self.on_session_state_changed,
            SessionEventLogged: self.on_session_event_logged,
            DeviceStatsSampled: self.on_device_stats_sampled,
        }[type(message)]
        handler(message)

    def _hold_until_ready(self, message: Message) -> bool:
        """True (and the message kept for later) while the dashboard is not composed yet."""
        if not self._dashboard_ready:
            self._early.append(message)
        return not self._dashboard_ready

    def on_metrics_updated(self, message: MetricsUpdated) -> None:
        if self._hold_until_ready(message):
            return
        self.latest = message.snapshot
        self._latest_at = self._clock()
        if message.snapshot.new_records and self._first_chunk_update is None:
            self._first_chunk_update = message.snapshot.update
        if self._show_timer is not None:
            return  # already due: it will show this newer snapshot
        if self.refresh_interval <= 0:
            self._show_latest()
            return
        # A snapshot arrives just as the session thread is about to dispatch the next
        # chunk, which needs the GIL: drawing at that moment stalls training far more
        # than the drawing's CPU time. Wait until the chunk runs (in XLA, GIL released).
        wait = max(AFTER_CHUNK_DELAY, self._last_shown + self.refresh_interval - time.monotonic())
        self._show_timer = self.set_timer(wait, self._show_latest)

    def _show_now(self) -> None:
        """Show the latest snapshot now rather than when its timer fires."""
        if self._show_timer is not None:
            self._show_timer.stop()
            self._show_latest()

    def _show_latest(self) -> None:
        self._show_timer = None
        self._last_shown = time.monotonic()
        if self.latest is not None:
            try:
                self._shown_at = self._latest_at
                first = self._first_chunk_update
                self.dashboard.status.eta_settled = first is not None and self.latest.update > first
                self.dashboard.show_snapshot(self.latest, age=self._clock() - self._shown_at)
                self._flush_chart_unless_running()
            except NoMatches:
                pass  # a timer that fired while the app tears its widgets down

    def _flush_chart_unless_running(self) -> None:
        # While training runs, the chart catches up at the next snapshot; otherwise none
        # may come, so draw what it holds now.
        if self.session_state is not SessionState.RUNNING:
            self.dashboard.chart.flush()

    def on_session_state_changed(self, message: SessionStateChanged) -> None:
        if self._hold_until_ready(message):
            return
        state = message.state
        if state is SessionState.COMPILING:
            self._compile_started = self._clock()
        if state is SessionState.RUNNING and self.session_state is not SessionState.RUNNING:
            self._first_chunk_update = None
        if state is not SessionState.RUNNING:
            # Training stands still now: the update it stopped at is shown at once, the
            # same the event says, not a throttled older one.
            self._show_now()
        self.session_state, self.state_message = state, message.message
        confirmed = (self.pending == "pausing" and state is SessionState.PAUSED) or (
            self.pending == "resuming" and state is SessionState.RUNNING
        )
        if confirmed or state not in LIVE:
            self.pending = None
        self._show_state()
        self._flush_chart_unless_running()
        if state not in LIVE:
            self._tick_elapsed()  # the run's clock stops here: show where it stopped
        if self.quitting and state.is_final:
            self.exit()
        elif state is SessionState.ERROR:
            self.notify(message.message or "training failed", title="training error", severity="error", timeout=30)
        elif state is SessionState.FINISHED:
            leave = "close this dashboard" if self.attached else "quit"
            latest = self.latest
            hint = "" if latest is None else "\n" + continue_line(
                self.run_dir, latest.env_steps, latest.update >= latest.total_updates)
            self.notify(f"Training has ended. Press q to {leave}.{hint}", title="finished", timeout=20)

    def on_session_event_logged(self, message: SessionEventLogged) -> None:
        if self._hold_until_ready(message):
            return
        event = message.event
        if self.latest is not None and self.latest.update >= event.update:
            self._show_now()  # the status line agrees with the event's update
        self.dashboard.add_event(event)
        if event.kind == "hparams":
            self.dashboard.chart.add_edit(event.update * self.config.steps_per_update)
            self._flush_chart_unless_running()
            changes = dict(event.data.get("changes", {}))
            if not self._edits_run_values(event.data.get("members")):
                return  # some members only: the run's own values (the panel's) stay
            for name in changes:
                self.pending_edits.pop(name, None)
            panel = self.dashboard.hparams_panel
            # Applied now: shown now, not at the next snapshot (none comes while paused).
            panel.values = {**panel.values, **changes}
            panel.pending = dict(self.pending_edits)
        elif event.kind == "population" and event.data.get("action") in ("pbt", "clone"):
            # Where a member took over another's agent: marked on the chart as an edit is.
            self.dashboard.chart.add_edit(event.update * self.config.steps_per_update)
            self._flush_chart_unless_running()
        elif event.kind == "nonfinite":
            self.notify(
                f"{event.message}. Lower lr (e), roll back to the last checkpoint (r) and resume (p).",
                severity="error", timeout=30,
            )
        elif event.kind == "warning":
            self.notify(event.message, severity="warning", timeout=8)

    def _edits_run_values(self, members) -> bool:
        """Whether an edit to `members` (None: not a population) changed the run's own values:
        one that went to every member did."""
        view = self.latest.population if self.latest is not None else None
        if members is None or view is None:
            return True
        return set(members) >= {m.index for m in view.members}

    def on_device_stats_sampled(self, message: DeviceStatsSampled) -> None:
        if not self._hold_until_ready(message):
            try:
                self.dashboard.show_devices(message.stats)
            except NoMatches:
                pass  # a sample that arrived while the app tears its widgets down

    # --- timers and workers -----------------------------------------------------------
    def _tick(self) -> None:
        try:
            if self.session_state is SessionState.COMPILING and self._compile_started is not None:
                self.dashboard.status.compile_seconds = self._clock() - self._compile_started
            if self.session_state in LIVE:
                self._tick_elapsed()
        except NoMatches:
            pass  # fired during teardown

    def _tick_elapsed(self) -> None:
        """The session's elapsed time goes on while paused (and between snapshots), but
        snapshots come only after chunks: count on from the one on screen, so that elapsed
        neither stands still during a pause nor jumps at the next snapshot."""
        if self._shown_at is not None:
            self.dashboard.status.snapshot_age = self._clock() - self._shown_at

    @work(thread=True, exclusive=True, group="devices", exit_on_error=False)
    def _sample_devices(self) -> None:
        # psutil, JAX and NVML calls can take milliseconds: never on the UI thread.
        self.post_message(DeviceStatsSampled(self.device_source.sample()))

    def _show_state(self) -> None:
        self.dashboard.show_state(self.session_state, self.state_message, self.pending)
        # The footer rebuilds its keys when bindings change (Pause <-> Resume): tens of
        # ms. Let the status line reach the screen first, then update the footer.
        self.call_after_refresh(self.refresh_bindings)

    # --- actions ----------------------------------------------------------------------
    @property
    def is_live(self) -> bool:
        return self.session_state in LIVE and not self.quitting and self.pending != "stopping"

    @property
    def wants_paused(self) -> bool:
        """Paused, or asked to pause: what the next press of p should undo."""
        return self.pending == "pausing" or (self.session_state is SessionState.PAUSED and self.pending != "resuming")

    def applies(self, action: str) -> bool:
        return availability.applies(action, attached=self.attached)

    def unavailable_reason(self, action: str) -> str | None:
        return availability.unavailable_reason(
            action, state=self.session_state, pending=self.pending, quitting=self.quitting
        )

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "explain":  # the fallback binding of a key whose action cannot act now
            (name,) = parameters
            return self.applies(str(name)) and self.unavailable_reason(str(name)) is not None
        if not self.applies(action):
            return False
        if action in availability.RUN_ACTIONS and self.unavailable_reason(action) is not None:
            return False  # hidden from the footer; its key's explain binding says why
        if action == "pause":
            return not self.wants_paused
        if action == "resume":
            return self.wants_paused
        return True

    def action_explain(self, action: str) -> None:
        self._refused(action)

    def _refused(self, action: str) -> bool:
        """Notify why `action` cannot act now, if it cannot: keys and palette commands
        that can do nothing say why rather than nothing."""
        reason = self.unavailable_reason(action)
        if reason is not None:
            self.notify(reason, title=availability.RUN_ACTIONS[action], timeout=4)
        return reason is not None

    def action_toggle_pause(self) -> None:
        if self._refused("pause"):
            return
        if self.wants_paused:
            self.action_resume()
        else:
            self.action_pause()

    def action_pause(self) -> None:
        self.session.submit(Pause())
        self.pending = "pausing"
        self._show_state()

    def action_resume(self) -> None:
        self.session.submit(Resume())
        self.pending = "resuming"
        self._show_state()

    def action_edit_hparams(self) -> None:
        if isinstance(self.screen, HParamEditor) or self._refused("edit_hparams"):
            return
        if not self.is_screen_installed("hparam-editor"):
            editor = HParamEditor(self.session.hparams.as_floats(), fields=ALGO_HPARAMS[self.config.algo])
            self.install_screen(editor, "hparam-editor")
        editor = self.get_screen("hparam-editor")
        members = self._edit_members = self.dashboard.edit_members
        values = self.session.hparams.as_floats()
        target = None
        if self.dashboard.population:
            target = "every member" if members is None else _members_text(members)
            view = self.latest.population if self.latest is not None else None
            if members is not None and view is not None:
                # The first selected member's own values (its swept ones differ from the run's).
                values.update(next((m.values for m in view.members if m.index == members[0]), {}))
        editor.prepare(values, target)
        self.push_screen(editor, self._edit_chosen)

    def _edit_chosen(self, change: dict[str, float] | None) -> None:
        if not change:
            return
        members = self._edit_members
        self.session.submit(SetHParams(change, members=members))
        text = ", ".join(f"{k} → {fmt_value(v)}" for k, v in change.items())
        if members is None:
            # The run's own values change (every member's): the panel shows them pending.
            self.pending_edits.update(change)
            self.dashboard.hparams_panel.pending = dict(self.pending_edits)
        else:
            text += f" for {_members_text(members)}"
        self.notify(f"{text} at the next chunk boundary", title="edit sent", timeout=3)

    # --- the leaderboard's requests (a population) -------------------------------------
    def on_leaderboard_freeze_requested(self, message: Leaderboard.FreezeRequested) -> None:
        if self._refused("freeze_members"):
            return
        self.session.submit(FreezeMembers(message.members, message.frozen))
        verb = "freezing" if message.frozen else "thawing"
        self.notify(f"{verb} {_members_text(message.members)} at the next chunk boundary", timeout=3)

    def on_leaderboard_clone_requested(self, message: Leaderboard.CloneRequested) -> None:
        if isinstance(self.screen, CloneDialog) or self._refused("clone_member"):
            return
        view = self.dashboard.leaderboard.view
        if view is None:
            return
        source = message.source

        def chosen(choice: CloneChoice | None) -> None:
            if choice is not None:
                self.session.submit(CloneMember(source, choice.targets, choice.factor))
                self.notify(f"member {source} into {_members_text(choice.targets)}, factor {choice.factor:g}, "
                            "at the next chunk boundary", title="clone sent", timeout=3)

        self.push_screen(CloneDialog(source, message.targets, len(view.members), view.keys), chosen)

    def action_save_checkpoint(self) -> None:
        if self._refused("save_checkpoint"):
            return
        self.session.submit(SaveCheckpoint())
        self.notify("Checkpoint requested: saved at the next chunk boundary.", timeout=3)

    def action_rollback(self) -> None:
        if not self._refused("rollback"):
            self.session.submit(Rollback())
            self.notify("Rolling back to the latest checkpoint (hyperparameters are kept).", timeout=3)

    def action_cycle_chart(self) -> None:
        self.dashboard.action_cycle_chart()

    def action_cycle_side_panel(self) -> None:
        self.dashboard.action_cycle_side_panel()

    def action_save_svg(self) -> None:
        # Earlier notes (a saved checkpoint, the last screenshot's path) are not part of
        # the dashboard: they go first, and the screenshot waits for a frame without them.
        self.clear_notifications()
        self.call_after_refresh(self._save_svg)

    def _save_svg(self) -> None:
        update = self.latest.update if self.latest is not None else 0
        name = f"screenshot-u{update:06d}-{time.strftime('%H%M%S')}.svg"
        try:
            path = self.save_screenshot(name, str(self.run_dir))
        except OSError as err:
            self.notify(f"cannot save screenshot: {err}", severity="error")
            return
        self.notify(path, title="screenshot saved", timeout=4)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            keys = [*self.dashboard.BINDINGS, *(b for b in self.BINDINGS if b.show)]
            # One view key for the chart's curves: seeds, or a population's members.
            hidden = "toggle_seed_view" if self.dashboard.population else "toggle_member_view"
            keys = [b for b in keys if b.action != hidden]
            if self.dashboard.population:
                keys = [*Leaderboard.BINDINGS, *keys]
            self.push_screen(HelpScreen([b for b in keys if self.applies(b.action)]))

    def action_watch(self) -> None:
        """The watch view on the run's own env, playing its current parameters (copied by
        the session at a chunk boundary, or sent by an attached run on request); stepped in
        a worker thread, so neither the UI nor training waits for it."""
        from rltui.ui.screens.watch import LIVE_SPEED, WatchScreen
        from rltui.watch.live import live_imports, live_player

        if isinstance(self.screen, WatchScreen):
            return
        config, session = self.config, self.session
        module = live_imports(config)
        if module is not None:
            self.notify(f"watching imports the env module {module} (the run's env, {config.env}) into this process",
                        title="watch", timeout=6)

        def make_player(cancelled):
            return live_player(config, session, cancelled=cancelled, on_cpu=self.attached)

        self.push_screen(WatchScreen(make_player=make_player, speed=LIVE_SPEED,
                                     title=f"{config.env}: the policy as it trains"))

    def action_detach(self) -> None:
        """Leave an attached run; it goes on (run_dashboard closes the connection)."""
        self.exit()

    def action_stop_run(self) -> None:
        if not isinstance(self.screen, StopRunConfirm) and not self._refused("stop_run"):
            self.push_screen(StopRunConfirm(self.session_state, self.pending), self._stop_run_answered)

    def _stop_run_answered(self, stop: bool | None) -> None:
        if stop and self.is_live:
            # Stays open: the run's last states and events arrive before it closes.
            self.pending = "stopping"
            self.session.submit(Stop())
            self._show_state()

    async def action_quit(self) -> None:
        """q, ctrl+q and the palette's Quit: ask first while training runs; while the
        session is stopping, quit at once (run_dashboard still waits, bounded). An
        attached dashboard only detaches."""
        if self.attached:
            self.action_detach()
        elif not self.is_live:
            self.exit()
        elif not isinstance(self.screen, QuitConfirm):
            self.push_screen(QuitConfirm(self.session_state, self.pending), self._quit_answered)

    def _quit_answered(self, stop: bool | None) -> None:
        if not stop:
            return
        # Stay up until the session has ended: one chunk (a fraction of a second), or the
        # rest of a compile, which XLA cannot interrupt. Exiting with the session thread
        # inside XLA would abort the interpreter at shutdown.
        self.quitting = True
        self.pending = "stopping"
        self.session.submit(Stop())
        self._show_state()
        if self.session_state is SessionState.COMPILING:
            self.notify("Stopping once the compile finishes. Press q again to quit at once.", timeout=30)

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


def _members_text(members) -> str:
    members = tuple(members)
    return ("member " if len(members) == 1 else "members ") + ", ".join(map(str, members))
