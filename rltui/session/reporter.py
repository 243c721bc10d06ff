"""What a session tells its listeners (`SessionReporter`): its state, its events and its
snapshots, called on the session thread.

Whatever a listener raises becomes `ListenerFailed`, which ends the session in the ERROR
state; once the session is failing, a listener that raises again is passed over, so the
error still reaches the others. Listeners are added and removed, and the state read, from
any thread.
"""

from __future__ import annotations

import threading

from rltui.session.events import SessionEvent, SessionState
from rltui.session.metrics import MetricsSnapshot
from rltui.session.progress import TrainingProgress
from trainers.env_import import one_line


class SessionListener:
    """Override what you need. Called on the session thread: return quickly, copy nothing
    mutable (snapshots are already immutable)."""

    def on_state(self, state: SessionState, message: str | None) -> None:
        pass

    def on_metrics(self, snapshot: MetricsSnapshot) -> None:
        pass

    def on_event(self, event: SessionEvent) -> None:
        pass


class ListenerFailed(Exception):
    """A listener raised (anything, SystemExit included): the session ends in the ERROR state."""


class SessionReporter:
    def __init__(self, progress: TrainingProgress):
        self._progress = progress  # stamps each event with its update and time
        self._listeners: list[SessionListener] = []
        self._state = SessionState.IDLE
        self._state_lock = threading.Lock()
        # Once failing, listeners that raise again are passed over: the error must still
        # reach the others, and the state must still become ERROR.
        self.failing = False

    def add(self, listener: SessionListener) -> None:
        self._listeners.append(listener)

    def remove(self, listener: SessionListener) -> None:
        # A new list, not an in-place removal: the session thread may be iterating the old one.
        self._listeners = [known for known in self._listeners if known is not listener]

    @property
    def state(self) -> SessionState:
        with self._state_lock:
            return self._state

    def set_state(self, state: SessionState, message: str | None = None) -> None:
        with self._state_lock:
            self._state = state
        self._notify("on_state", state, message)

    def event_now(self, kind: str, message: str, *, about_update: int | None = None, **data) -> SessionEvent:
        """An event stamped with this moment's time and update (or the update it is about)."""
        update = self._progress.updates_done if about_update is None else about_update
        return SessionEvent(kind=kind, update=update, message=message, wall_time=self._progress.elapsed(), data=data)

    def event(self, kind: str, message: str, *, about_update: int | None = None, **data) -> None:
        self._notify("on_event", self.event_now(kind, message, about_update=about_update, **data))

    def snapshot(self, snapshot: MetricsSnapshot) -> None:
        self._notify("on_metrics", snapshot)

    def _notify(self, method: str, *args) -> None:
        """Call every listener. Whatever one raises (SystemExit and KeyboardInterrupt
        included: on this thread they would end it unreported) becomes ListenerFailed,
        which ends the session in the ERROR state; once failing, it is passed over."""
        for listener in self._listeners:
            try:
                getattr(listener, method)(*args)
            except BaseException as exc:
                if self.failing:
                    continue
                raise ListenerFailed(f"{type(listener).__name__} failed: {one_line(exc)}") from exc
