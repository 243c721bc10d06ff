"""Host copies of the parameters for the watch view (`TrainingSession`'s share of it):
requests are queued from any thread and served by the session thread between chunks, so
the UI never touches the trainer and nothing syncs inside a chunk.
"""

from __future__ import annotations

from concurrent.futures import Future

from rltui.session.interface import ParamsSnapshot, ParamsUnavailable
from trainers.env_import import one_line


class _WakeUp:
    """Queued after a parameters request so that a paused session (which waits on its
    command queue) serves it at once; applying it does nothing."""


class ParamsService:
    def request_params(self) -> Future:
        """The latest parameters as host arrays (a `ParamsSnapshot`), copied by the session
        thread at its next chunk boundary: the UI never touches the trainer, and nothing
        syncs inside a chunk. Never blocks; requests at one boundary share one copy."""
        future: Future = Future()
        with self._params_lock:
            if not self._params_closed:
                self._params_requests.append(future)
                if not self._sync.distributed:  # a paused multi-process run wakes every heartbeat
                    self._commands.put(_WakeUp())
                return future
        self._answer_params([future])  # the session has ended: its last copy
        return future

    def _serve_params(self) -> None:
        with self._params_lock:
            waiting, self._params_requests = self._params_requests, []
        if waiting:
            self._answer_params(waiting)

    def _answer_params(self, futures: list[Future]) -> None:
        try:
            snapshot = self._params_snapshot()
        except Exception as err:  # noqa: BLE001 - the requester is told; training goes on
            failure = ParamsUnavailable(f"the parameters could not be copied ({one_line(err)})")
            for future in futures:
                if future.set_running_or_notify_cancel():
                    future.set_exception(failure)
            return
        for future in futures:
            if future.set_running_or_notify_cancel():
                future.set_result(snapshot)

    def _params_snapshot(self) -> ParamsSnapshot:
        """One host copy per state: requests while paused, or after the run, share it."""
        key = (self._updates_done, self._params_version)
        if self._params_copy is not None and self._params_copy[0] == key:
            return self._params_copy[1]
        if self._params_closed:
            raise ParamsUnavailable("the run ended before its parameters could be copied")
        acting = getattr(self.backend, "acting_params", None)
        if acting is None:
            raise ParamsUnavailable("this run's backend cannot hand out its parameters")
        params, obs_stats = acting()
        snapshot = ParamsSnapshot(update=self._updates_done, params=params, obs_stats=obs_stats)
        self._params_copy = (key, snapshot)
        return snapshot

    def _close_params(self) -> None:
        """As the session thread ends: answer what waits, and keep a last copy for later
        requests (the state no longer changes). A run that never built has none."""
        with self._params_lock:
            waiting, self._params_requests = self._params_requests, []
        try:
            self._params_snapshot()
        except Exception:  # noqa: BLE001 - later requests are told there is none
            pass
        with self._params_lock:
            self._params_closed = True
            waiting += self._params_requests
            self._params_requests = []
        if waiting:
            self._answer_params(waiting)
