"""The dashboard's handlers of the session's messages (`DashboardApp`'s share of them):
snapshots, state changes and events from the session, the device sampler's stats, and the
timers that keep the status line's clocks going between snapshots.

Messages that arrive before the dashboard's widgets exist wait, and are replayed once it
is ready. Panels show the latest snapshot at most every `refresh_interval` seconds.
"""

from __future__ import annotations

import time

from textual import work
from textual.css.query import NoMatches
from textual.message import Message

from rltui.runfiles.discovery import RunState, state_of
from rltui.session import SessionState
from rltui.ui.messages import DeviceStatsSampled, MetricsUpdated, SessionEventLogged, SessionStateChanged

# Seconds between a snapshot's arrival and drawing it (see on_metrics_updated).
AFTER_CHUNK_DELAY = 0.05
# A live run's states: neither stopping nor ended (finished or failed).
LIVE = (SessionState.IDLE, SessionState.COMPILING, SessionState.RUNNING, SessionState.PAUSED)
# The events that say how a session ended, as `rltui runs` reads them (state_of): a run
# in the FINISHED state was stopped, finished its total, or diverged.
ENDING_EVENTS = ("compiled", "resumed", "nonfinite", "rolled back", "target_reached", "finished", "error")


class SessionHandlers:
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
            self.dashboard.hparams_panel.actions = self.session.describe().get("actions")
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
            ending = self.ended_as
            said = "Training has ended" if ending is None else ending.detail[:1].upper() + ending.detail[1:]
            # A note that goes as others do: the status line keeps the state, and how to
            # go on is printed once the dashboard has closed (rltui.ui.runner).
            self.notify(f"{said}. Press q to {leave}.", title="finished" if ending is None else ending.name)

    def on_session_event_logged(self, message: SessionEventLogged) -> None:
        if self._hold_until_ready(message):
            return
        event = message.event
        if self.latest is not None and self.latest.update >= event.update:
            self._show_now()  # the status line agrees with the event's update
        self.dashboard.add_event(event)
        if event.kind in ENDING_EVENTS:
            if event.kind in ("compiled", "resumed"):
                self._ending_events.clear()  # a new session: what ended the last one no longer counts
            self._ending_events.append(event.to_json())
            if self.session_state is SessionState.FINISHED:
                self._show_state()  # the state came first (a client told the picture as it attached)
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
        elif event.kind == "resumed" and event.data.get("edits"):
            for edit in event.data["edits"]:  # the edits before a resume, from its checkpoint
                self.dashboard.chart.add_edit(int(edit["update"]) * self.config.steps_per_update)
            self._flush_chart_unless_running()
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

    @property
    def ended_as(self) -> RunState | None:
        """How a FINISHED run ended, as `rltui runs` names it (finished, stopped or
        diverged) from the same events; None while it runs, or if its last event has not
        come (yet)."""
        if self.session_state is not SessionState.FINISHED:
            return None
        ending = state_of(self._ending_events, live=False)
        return None if ending.name == "crashed" else ending

    def _show_state(self) -> None:
        ending = self.ended_as
        self.dashboard.show_state(self.session_state, self.state_message, self.pending,
                                  ending=None if ending is None else ending.name)
        # The footer rebuilds its keys when bindings change (Pause <-> Resume): tens of
        # ms. Let the status line reach the screen first, then update the footer.
        self.call_after_refresh(self.refresh_bindings)
