"""The dashboard app: a client of a session that shows and steers live training.

It uses only the session interface (`rltui.session.interface.SessionClient`), which the
in-process `TrainingSession` and the attached `RemoteSession` both implement. Session
callbacks arrive on another thread and are forwarded as messages (`rltui.ui.messages`);
the device sampler runs in a worker thread. Nothing here blocks the UI on training.

Textual finds an App's handlers by name, so they are all here: the messages from other
threads (`on_*`), the user's keys and palette commands (`action_*`, with `check_action`).
The work is in the App's parts, each given what it uses: the run as the dashboard knows
it and which keys apply (`RunStatus`), when snapshots are drawn and the status line's
clocks (`SnapshotDisplay`), what the messages change on screen (`SessionView`); and
what the actions work out apart from the App (`rltui.ui.actions`).

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
from textual.screen import Screen

from rltui.config.build import RunConfig
from rltui.session import MetricsSnapshot, Pause, Resume, SaveCheckpoint, SessionState, SetHParams, Stop
from rltui.session.commands import CloneMember, FreezeMembers, Rollback
from rltui.session.devices import DeviceSampler, DeviceStatsSource
from rltui.session.interface import SessionClient
from rltui.ui import actions, availability
from rltui.ui.messages import (
    DeviceStatsSampled,
    MetricsUpdated,
    SessionBridge,
    SessionEventLogged,
    SessionStateChanged,
)
from rltui.ui.run_status import RunStatus
from rltui.ui.screens import CloneDialog, DashboardScreen, HelpScreen, HParamEditor, QuitConfirm, StopRunConfirm
from rltui.ui.screens.clone import CloneChoice
from rltui.ui.screens.quit import RollbackConfirm
from rltui.ui.session_view import SessionView
from rltui.ui.snapshot_display import SnapshotDisplay
from rltui.ui.terminal import EndsWithItsTerminal
from rltui.ui.themes import load_themes, resolve_theme_name
from rltui.ui.toasts import RepaintsAfterToasts
from rltui.ui.widgets import Leaderboard
from trainers.hparams import ALGO_HPARAMS

# After Stop, how long to wait for the chunk in flight (or a compile) before giving up:
# the session thread is a daemon, so the process can still exit.
STOP_TIMEOUT = 5.0
WATCH_KEY = "a"  # the agent; "w" is the chart's smoothing


class DashboardApp(EndsWithItsTerminal, RepaintsAfterToasts, App[None]):
    CSS_PATH = ["app.tcss", "help.tcss"]
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
        self._edit_members: tuple[int, ...] | None = None  # a population: whom the open editor edits
        self.dashboard = DashboardScreen(config, chart_interval=chart_interval)
        self.run_status = RunStatus(session.state, attached=session.outlives_client, num_seeds=config.num_seeds)
        # Panels show the latest snapshot at most this often. Chunks end ~3 times a second
        # and every redraw is CPU taken from training (measured in benchmarks/dashboard.py).
        self.snapshots = SnapshotDisplay(self.dashboard, self.run_status, set_timer=self.set_timer,
                                         refresh_interval=refresh_interval, clock=clock)
        self.session_view = SessionView(self, self.dashboard, self.run_status, self.snapshots, session,
                                        steps_per_update=config.steps_per_update)
        # Added before the session starts (in on_mount), so no callback is missed.
        session.add_listener(SessionBridge(self))

    # The run as the App's callers read it.
    @property
    def session_state(self) -> SessionState:
        return self.run_status.state

    @property
    def state_message(self) -> str | None:
        return self.run_status.message

    @property
    def pending_edits(self) -> dict[str, float]:
        return self.run_status.pending_edits

    @property
    def latest(self) -> MetricsSnapshot | None:
        return self.snapshots.latest

    @property
    def attached(self) -> bool:
        return self.run_status.attached

    # --- start and end ------------------------------------------------------------------
    def get_default_screen(self) -> Screen:
        return self.dashboard

    def on_dashboard_screen_ready(self, message: DashboardScreen.Ready) -> None:
        """The default screen's widgets exist only now (App.on_mount runs before them)."""
        info = self.session.describe()
        devices = list(info.get("devices", ()))
        self.dashboard.device_panel.run_devices = tuple(f"{d} {info.get('device_kind', '')}".strip() for d in devices)
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
        self.session_view.show_state()
        self.set_interval(1.0, self.snapshots.tick)
        self._sample_devices()
        self.set_interval(self.device_interval, self._sample_devices)
        self.session_view.ready()
        if self.session.state is SessionState.IDLE:
            self.session.start()

    def on_unmount(self) -> None:
        self.device_source.close()

    # --- messages from other threads (held until the dashboard is ready) ------------------
    def on_metrics_updated(self, message: MetricsUpdated) -> None:
        self.session_view.handle(message)

    def on_session_state_changed(self, message: SessionStateChanged) -> None:
        self.session_view.handle(message)

    def on_session_event_logged(self, message: SessionEventLogged) -> None:
        self.session_view.handle(message)

    def on_device_stats_sampled(self, message: DeviceStatsSampled) -> None:
        self.session_view.handle(message)

    @work(thread=True, exclusive=True, group="devices", exit_on_error=False)
    def _sample_devices(self) -> None:
        # psutil, JAX and NVML calls can take milliseconds: never on the UI thread.
        self.post_message(DeviceStatsSampled(self.device_source.sample()))

    # --- the user's keys and palette commands -------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.run_status.shows(action, parameters, population=self.dashboard.population)

    def action_explain(self, action: str) -> None:
        self._refused(action)

    def _refused(self, action: str) -> bool:
        """Notify why `action` cannot act now, if it cannot: keys and palette commands
        that can do nothing say why rather than nothing."""
        reason = self.run_status.unavailable_reason(action, population=self.dashboard.population)
        if reason is not None:
            self.notify(reason, title=availability.TITLES[action], timeout=4)
        return reason is not None

    def action_toggle_pause(self) -> None:
        if self._refused("pause"):
            return
        if self.run_status.wants_paused:
            self.action_resume()
        else:
            self.action_pause()

    def action_pause(self) -> None:
        self._ask(Pause(), "pausing")

    def action_resume(self) -> None:
        self._ask(Resume(), "resuming")

    def _ask(self, command, pending: str) -> None:
        """Send a command whose effect the status line shows as pending until the session says it is done."""
        self.session.submit(command)
        self.run_status.pending = pending
        self.session_view.show_state()

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
            target = "every member" if members is None else actions.members_text(members)
            values = actions.edit_start_values(values, members, self.latest)
        editor.prepare(values, target)
        self.push_screen(editor, self._edit_chosen)

    def _edit_chosen(self, change: dict[str, float] | None) -> None:
        if not change:
            return
        members = self._edit_members
        self.session.submit(SetHParams(change, members=members))
        text = actions.edit_text(change, {**self.session.hparams.as_floats(), **change})
        if members is None:
            # The run's own values change (every member's): the panel shows them pending.
            self.run_status.pending_edits.update(change)
            self.dashboard.hparams_panel.pending = dict(self.run_status.pending_edits)
        else:
            text += f" for {actions.members_text(members)}"
        self.notify(f"{text} at the next chunk boundary", title="edit sent", timeout=3)

    def on_leaderboard_freeze_requested(self, message: Leaderboard.FreezeRequested) -> None:
        if self._refused("freeze_members"):
            return
        self.session.submit(FreezeMembers(message.members, message.frozen))
        verb = "freezing" if message.frozen else "thawing"
        self.notify(f"{verb} {actions.members_text(message.members)} at the next chunk boundary", timeout=3)

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
                self.notify(f"member {source} into {actions.members_text(choice.targets)}, factor {choice.factor:g}, "
                            "at the next chunk boundary", title="clone sent", timeout=3)

        self.push_screen(CloneDialog(source, message.targets, len(view.members), view.keys), chosen)

    def action_save_checkpoint(self) -> None:
        if self._refused("save_checkpoint"):
            return
        self.session.submit(SaveCheckpoint())
        self.notify("Checkpoint requested: saved at the next chunk boundary.", timeout=3)

    def action_rollback(self) -> None:
        if not self._refused("rollback"):
            self.push_screen(RollbackConfirm(population=self.dashboard.population), self._rollback_chosen)

    def _rollback_chosen(self, confirmed: bool | None) -> None:
        if confirmed:
            self.session.submit(Rollback())
            self.notify(actions.rollback_notice(population=self.dashboard.population), timeout=3)

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
        try:
            path = actions.save_screenshot(self.run_dir, update, self.export_screenshot())
        except OSError as err:
            self.notify(f"cannot save screenshot: {err}", severity="error")
            return
        self.notify(path, title="screenshot saved", timeout=4)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            keys = actions.help_keys(self.dashboard.BINDINGS, self.BINDINGS, population=self.dashboard.population)
            self.push_screen(HelpScreen([b for b in keys if self.run_status.applies(b.action)]))

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
            self.push_screen(StopRunConfirm(self.run_status.state, self.run_status.pending), self._stop_run_answered)

    def _stop_run_answered(self, stop: bool | None) -> None:
        if stop and self.run_status.is_live:
            # Stays open: the run's last states and events arrive before it closes.
            self._ask(Stop(), "stopping")

    async def action_quit(self) -> None:
        """q, ctrl+q and the palette's Quit: ask first while training runs; while the
        session is stopping, quit at once (run_dashboard still waits, bounded). An
        attached dashboard only detaches."""
        if self.attached:
            self.action_detach()
        elif not self.run_status.is_live:
            self.exit()
        elif not isinstance(self.screen, QuitConfirm):
            self.push_screen(QuitConfirm(self.run_status.state, self.run_status.pending), self._quit_answered)

    async def action_help_quit(self) -> None:
        """ctrl+c: Textual's own binding only notes which key quits; here it is that key,
        q (asks first while training runs; attached, detaches)."""
        await self.action_quit()

    def _quit_answered(self, stop: bool | None) -> None:
        if not stop:
            return
        # Stay up until the session has ended: one chunk (a fraction of a second), or the
        # rest of a compile, which XLA cannot interrupt. Exiting with the session thread
        # inside XLA would abort the interpreter at shutdown.
        self.run_status.quitting = True
        self._ask(Stop(), "stopping")
        if self.run_status.state is SessionState.COMPILING:
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
