"""What the messages from other threads change on the dashboard: the session's snapshots
(drawn by `SnapshotDisplay`), states and events, and the device sampler's stats.

Messages that arrive before the dashboard's widgets exist wait, and are replayed once it
is ready. A state or event that the user should act on is also a notification.
"""

from __future__ import annotations

from textual.app import App
from textual.css.query import NoMatches
from textual.message import Message

from rltui.session import SessionState
from rltui.session.interface import SessionClient
from rltui.ui.messages import DeviceStatsSampled, MetricsUpdated, SessionEventLogged, SessionStateChanged
from rltui.ui.run_status import LIVE, RunStatus
from rltui.ui.screens import DashboardScreen
from rltui.ui.snapshot_display import SnapshotDisplay


class SessionView:
    def __init__(
        self,
        app: App,
        dashboard: DashboardScreen,
        status: RunStatus,
        snapshots: SnapshotDisplay,
        session: SessionClient,
        *,
        steps_per_update: int,
    ):
        self._app = app  # for Textual's notifications, exit and refresh calls
        self._dashboard = dashboard
        self._status = status
        self._snapshots = snapshots
        self._session = session
        self._steps_per_update = steps_per_update
        self._ready = False
        self._early: list[Message] = []

    def ready(self) -> None:
        """The dashboard's widgets exist (only now): the messages that waited are shown."""
        self._ready = True
        for early in self._early:
            self.handle(early)
        if self._early:
            # On a terminal, panels filled in this first frame (the events a run had
            # logged before this client attached) can keep the height of their empty
            # text: lay them out again once that frame is drawn.
            self._app.call_after_refresh(self._relayout)
        self._early.clear()

    def _relayout(self) -> None:
        for widget in self._dashboard.walk_children():
            widget.refresh(layout=True)

    def handle(self, message: Message) -> None:
        """Show `message`, or keep it until the dashboard is ready."""
        if not self._ready:
            self._early.append(message)
            return
        try:
            if isinstance(message, MetricsUpdated):
                self._snapshots.arrived(message.snapshot)
            elif isinstance(message, SessionStateChanged):
                self._state_changed(message.state, message.message)
            elif isinstance(message, SessionEventLogged):
                self._event_logged(message)
            elif isinstance(message, DeviceStatsSampled):
                self._dashboard.show_devices(message.stats)
        except NoMatches:
            pass  # a message that arrived while the app tears its widgets down

    def show_state(self) -> None:
        ending = self._status.ended_as
        self._dashboard.show_state(self._status.state, self._status.message, self._status.pending,
                                   ending=None if ending is None else ending.name)
        # The footer rebuilds its keys when bindings change (Pause <-> Resume): tens of
        # ms. Let the status line reach the screen first, then update the footer.
        self._app.call_after_refresh(self._app.refresh_bindings)

    def _state_changed(self, state: SessionState, message: str | None) -> None:
        if state is SessionState.COMPILING:
            self._snapshots.compiling()
        if state is SessionState.RUNNING and self._status.state is not SessionState.RUNNING:
            self._snapshots.training_started()
            self._dashboard.hparams_panel.actions = self._session.describe().get("actions")
        if state is not SessionState.RUNNING:
            # Training stands still now: the update it stopped at is shown at once, the
            # same the event says, not a throttled older one.
            self._snapshots.show_now()
        self._status.changed(state, message)
        self.show_state()
        self._snapshots.flush_chart_unless_running()
        if state not in LIVE:
            self._snapshots.count_age()  # the run's clock stops here: show where it stopped
        if self._status.quitting and state.is_final:
            self._app.exit()
        elif state is SessionState.ERROR:
            self._app.notify(message or "training failed", title="training error", severity="error", timeout=30)
        elif state is SessionState.FINISHED:
            leave = "close this dashboard" if self._status.attached else "quit"
            ending = self._status.ended_as
            said = "Training has ended" if ending is None else ending.detail[:1].upper() + ending.detail[1:]
            # A note that goes as others do: the status line keeps the state, and how to
            # go on is printed once the dashboard has closed (rltui.ui.runner).
            self._app.notify(f"{said}. Press q to {leave}.", title="finished" if ending is None else ending.name)

    def _event_logged(self, message: SessionEventLogged) -> None:
        event = message.event
        latest = self._snapshots.latest
        if latest is not None and latest.update >= event.update:
            self._snapshots.show_now()  # the status line agrees with the event's update
        self._dashboard.add_event(event)
        if self._status.keep_if_ending(event) and self._status.state is SessionState.FINISHED:
            self.show_state()  # the state came first (a client told the picture as it attached)
        if event.kind == "hparams":
            self._dashboard.chart.add_edit(event.update * self._steps_per_update)
            self._snapshots.flush_chart_unless_running()
            changes = dict(event.data.get("changes", {}))
            if not self._edits_run_values(event.data.get("members")):
                return  # some members only: the run's own values (the panel's) stay
            for name in changes:
                self._status.pending_edits.pop(name, None)
            panel = self._dashboard.hparams_panel
            # Applied now: shown now, not at the next snapshot (none comes while paused).
            panel.values = {**panel.values, **changes}
            panel.pending = dict(self._status.pending_edits)
        elif event.kind == "resumed" and event.data.get("edits"):
            for edit in event.data["edits"]:  # the edits before a resume, from its checkpoint
                self._dashboard.chart.add_edit(int(edit["update"]) * self._steps_per_update)
            self._snapshots.flush_chart_unless_running()
        elif event.kind == "population" and event.data.get("action") in ("pbt", "clone"):
            # Where a member took over another's agent: marked on the chart as an edit is.
            self._dashboard.chart.add_edit(event.update * self._steps_per_update)
            self._snapshots.flush_chart_unless_running()
        elif event.kind == "nonfinite":
            self._app.notify(
                f"{event.message}. Lower lr (e), roll back to the last checkpoint (r) and resume (p).",
                severity="error", timeout=30,
            )
        elif event.kind == "warning":
            self._app.notify(event.message, severity="warning", timeout=8)

    def _edits_run_values(self, members) -> bool:
        """Whether an edit to `members` (None: not a population) changed the run's own values:
        one that went to every member did."""
        latest = self._snapshots.latest
        view = latest.population if latest is not None else None
        if members is None or view is None:
            return True
        return set(members) >= {m.index for m in view.members}
