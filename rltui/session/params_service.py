"""Host copies of the parameters for the watch view (`ParamsService`, which the session
holds): requests are queued from any thread and served by the session thread between
chunks, so the UI never touches the trainer and nothing syncs inside a chunk.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future

from rltui.session.backend import TrainingBackend
from rltui.session.distributed import BoundarySync
from rltui.session.interface import ParamsSnapshot, ParamsUnavailable
from rltui.session.progress import TrainingProgress
from trainers.env_import import one_line


class _WakeUp:
    """Queued after a parameters request so that a paused session (which waits on its
    command queue) serves it at once; applying it does nothing."""


class ParamsService:
    def __init__(self, backend: TrainingBackend, progress: TrainingProgress, commands: queue.Queue,
                 sync: BoundarySync):
        self._backend = backend
        self._progress = progress  # a copy is one per update (and per state at that update)
        self._commands = commands  # the session's command queue: a request wakes a paused session
        self._sync = sync
        # Requests come from any thread; the session thread serves them between chunks and,
        # once it has ended, from the copy it took last.
        self._lock = threading.Lock()
        self._requests: list[Future] = []
        self._closed = False
        self._version = 0  # changes when a checkpoint or another agent replaces the state
        self._copy: tuple[tuple[int, int], ParamsSnapshot] | None = None

    def request(self) -> Future:
        """The latest parameters as host arrays (a `ParamsSnapshot`), copied by the session
        thread at its next chunk boundary: the UI never touches the trainer, and nothing
        syncs inside a chunk. Never blocks; requests at one boundary share one copy."""
        future: Future = Future()
        with self._lock:
            if not self._closed:
                self._requests.append(future)
                if not self._sync.distributed:  # a paused multi-process run wakes every heartbeat
                    self._commands.put(_WakeUp())
                return future
        self._answer([future])  # the session has ended: its last copy
        return future

    def state_replaced(self) -> None:
        """The session thread replaced the training state at this update (a checkpoint
        restored, an agent cloned): a copy taken before is stale."""
        self._version += 1

    def serve(self) -> None:
        """At a chunk boundary, on the session thread: answer what waits."""
        with self._lock:
            waiting, self._requests = self._requests, []
        if waiting:
            self._answer(waiting)

    def _answer(self, futures: list[Future]) -> None:
        try:
            snapshot = self._snapshot()
        except Exception as err:  # noqa: BLE001 - the requester is told; training goes on
            failure = ParamsUnavailable(f"the parameters could not be copied ({one_line(err)})")
            for future in futures:
                if future.set_running_or_notify_cancel():
                    future.set_exception(failure)
            return
        for future in futures:
            if future.set_running_or_notify_cancel():
                future.set_result(snapshot)

    def _snapshot(self) -> ParamsSnapshot:
        """One host copy per state: requests while paused, or after the run, share it."""
        key = (self._progress.updates_done, self._version)
        if self._copy is not None and self._copy[0] == key:
            return self._copy[1]
        if self._closed:
            raise ParamsUnavailable("the run ended before its parameters could be copied")
        acting = getattr(self._backend, "acting_params", None)
        if acting is None:
            raise ParamsUnavailable("this run's backend cannot hand out its parameters")
        params, obs_stats = acting()
        snapshot = ParamsSnapshot(update=self._progress.updates_done, params=params, obs_stats=obs_stats)
        self._copy = (key, snapshot)
        return snapshot

    def close(self) -> None:
        """As the session thread ends: answer what waits, and keep a last copy for later
        requests (the state no longer changes). A run that never built has none."""
        with self._lock:
            waiting, self._requests = self._requests, []
        try:
            self._snapshot()
        except Exception:  # noqa: BLE001 - later requests are told there is none
            pass
        with self._lock:
            self._closed = True
            waiting += self._requests
            self._requests = []
        if waiting:
            self._answer(waiting)
