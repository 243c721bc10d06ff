"""The session interface the dashboard talks to. The in-process `TrainingSession` and the
socket client `RemoteSession` both implement it, so one dashboard serves both."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any, NamedTuple, Protocol, runtime_checkable

from rltui.session.commands import Command
from rltui.session.events import SessionState
from trainers.hparams import DynamicHParams


class ParamsSnapshot(NamedTuple):
    """The policy's parameters as host (NumPy) arrays, copied between two chunks: `params`
    and `obs_stats` as the trainer holds them for one replica (a leading seed axis with
    `num_seeds > 1`), or their flax state dicts when they came over the control socket."""

    update: int  # the updates done when they were copied
    params: Any
    obs_stats: Any


class ParamsUnavailable(RuntimeError):
    """The parameters cannot be had (the run refused, the connection is gone); the text
    says why, in one line."""


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

    def request_params(self) -> Future[ParamsSnapshot]:
        """The latest parameters, copied by the session at its next chunk boundary (at once
        while paused or once it has ended); never blocks. The future fails with
        ParamsUnavailable when they cannot be had."""
        ...

    def stop(self) -> None: ...

    def join(self, timeout: float | None = None) -> bool: ...
