"""The session interface the dashboard talks to. The in-process `TrainingSession` and the
socket client `RemoteSession` both implement it, so one dashboard serves both."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from trainers.hparams import DynamicHParams

from rltui.session.commands import Command
from rltui.session.events import SessionState


@runtime_checkable
class SessionClient(Protocol):
    """What a client (the dashboard, the control server) may use of a session.

    Listener callbacks (`SessionListener`) arrive on a thread that is not the client's.
    `outlives_client` is a capability, not an identity: True when the run goes on after
    this client lets go of it (an attached run), so leaving must not stop it.
    """

    outlives_client: bool
    total_updates: int

    @property
    def state(self) -> SessionState: ...

    @property
    def hparams(self) -> DynamicHParams: ...

    def describe(self) -> dict: ...

    def add_listener(self, listener) -> None: ...

    def remove_listener(self, listener) -> None: ...

    def start(self) -> None: ...

    def submit(self, command: Command) -> None: ...

    def stop(self) -> None: ...

    def join(self, timeout: float | None = None) -> bool: ...
