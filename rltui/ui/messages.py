"""Messages from the session thread (and the device sampler) to the dashboard.

`SessionBridge` is the dashboard's SessionListener: its callbacks run on the session
thread, so it only posts messages (thread-safe, non-blocking) and never touches a
widget. `call_from_thread` would block the training thread until the UI handled the
callback; posting does not.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message
from textual.message_pump import MessagePump

from rltui.session import MetricsSnapshot, SessionEvent, SessionListener, SessionState
from rltui.session.devices import DeviceStats


@dataclass
class MetricsUpdated(Message):
    """A chunk finished. Snapshots hold the whole recent history, so when the UI falls
    behind, a queued snapshot is superseded by the next one (see `can_replace`)."""

    snapshot: MetricsSnapshot

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, MetricsUpdated)


@dataclass
class SessionStateChanged(Message):
    state: SessionState
    message: str | None = None


@dataclass
class SessionEventLogged(Message):
    event: SessionEvent


@dataclass
class DeviceStatsSampled(Message):
    stats: DeviceStats

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, DeviceStatsSampled)


class SessionBridge(SessionListener):
    """Forwards session callbacks to `target` (the app) as messages."""

    def __init__(self, target: MessagePump):
        self.target = target

    def _post(self, message: Message) -> None:
        try:
            self.target.post_message(message)
        except RuntimeError:
            # The app's event loop has closed (the app exited while the session was
            # finishing its chunk): there is nobody left to show this to.
            pass

    def on_state(self, state: SessionState, message: str | None) -> None:
        self._post(SessionStateChanged(state, message))

    def on_metrics(self, snapshot: MetricsSnapshot) -> None:
        self._post(MetricsUpdated(snapshot))

    def on_event(self, event: SessionEvent) -> None:
        self._post(SessionEventLogged(event))
