"""`RemoteSession`: a running job's session seen through its control socket. It has the
interface of the in-process session (`rltui.session.interface.SessionClient`), so the
dashboard drives either without knowing which.

A reader thread turns the run's messages back into states, `MetricsSnapshot`s and
`SessionEvent`s for the listeners. A listener added late is first told the current
picture (state, latest snapshot with its history, recent events), so nothing sent before
it was added is missed.
"""

from __future__ import annotations

import collections
import os
import socket
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from rltui.control import params_transfer, protocol, protocol_population, session_messages
from rltui.control.paths import accepts
from rltui.control.protocol import ProtocolError
from rltui.errors import UsageError
from rltui.runfiles.discovery import find_socket
from rltui.session.command_json import command_message
from rltui.session.commands import Command, Stop
from rltui.session.controller import SessionListener
from rltui.session.events import SessionEvent, SessionState
from rltui.session.history import Curves
from rltui.session.interface import ParamsSnapshot, ParamsUnavailable
from rltui.session.metrics import MetricsSnapshot, MetricsStore, record_from_json
from rltui.session.population import PopulationView
from trainers.hparams import DynamicHParams

LOST = "lost the connection to the run (killed or crashed?); its files say how far it got"


class AttachError(UsageError):
    """Nothing to attach to, or it does not speak our protocol: one line for the user."""


def _hparams_from(values: Mapping[str, float]) -> DynamicHParams:
    known = {k: np.float32(v) for k, v in values.items() if k in DynamicHParams._fields and v is not None}
    return DynamicHParams()._replace(**known)


def _connect(run_dir: Path, timeout: float) -> socket.socket:
    if not run_dir.is_dir():
        raise AttachError(f"{run_dir}: no such run directory")
    path = find_socket(run_dir)
    if path is None:
        live = _listening_runs_in(run_dir)
        if live:
            names = ", ".join(p.name for p in live[:3]) + (", ..." if len(live) > 3 else "")
            raise AttachError(f"{run_dir} is a folder of runs; pick one: rltui attach {run_dir / 'NAME'} ({names} "
                              f"{'is' if len(live) == 1 else 'are'} listening)")
        raise AttachError(f"{run_dir}: no run is listening there (no control socket: it has ended, or not started)")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        connect_retrying(sock, path, timeout)
    except (ConnectionRefusedError, FileNotFoundError):
        sock.close()
        raise AttachError(
            f"{run_dir}: no run is listening there (the socket is left over: the run has ended)"
        ) from None
    except PermissionError:
        sock.close()
        raise AttachError(f"{path}: permission denied (the run belongs to another user)") from None
    except OSError as err:
        sock.close()
        raise AttachError(f"{path}: cannot connect: {err.strerror or err}") from None
    return sock


def _listening_runs_in(folder: Path) -> list[Path]:
    """The runs directly under `folder` whose control socket accepts, by name (a socket left
    over by a run that ended refuses)."""
    try:
        candidates = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return []
    return [p for p in candidates if (path := find_socket(p)) is not None and accepts(path)]


def connect_retrying(sock: socket.socket, path: Path | str, timeout: float) -> None:
    """Connect `sock` to the Unix socket at `path`. A socket with a timeout connects
    without blocking, and a listener whose backlog is full (many clients attaching at
    once) answers EAGAIN rather than waiting: that is retried until `timeout`."""
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        try:
            sock.connect(str(path))
            return
        except BlockingIOError:
            if time.monotonic() + delay > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.1)


class RemoteSession:
    outlives_client = True  # the job goes on when this client detaches

    def __init__(self, sock: socket.socket, reader, hello: Mapping[str, Any]):
        self._sock = sock
        self._reader = reader
        self._send_lock = threading.Lock()
        self._lock = threading.RLock()  # state, history and listeners; held while notifying
        self._listeners: list[SessionListener] = []
        self.hello = dict(hello)
        self.total_updates = int(hello.get("total_updates", 0))
        self.pid = int(hello.get("pid", 0))
        self.config: dict = dict(hello.get("config") or {})
        self._describe = dict(hello.get("describe") or {})
        self._state = session_messages.parse_state(hello.get("state"))
        self._message: str | None = hello.get("message")
        self._hparams = dict(hello.get("hparams") or {})
        self._store = MetricsStore()
        self._latest: MetricsSnapshot | None = None
        self._events: collections.deque[SessionEvent] = collections.deque(maxlen=500)
        self._ended = threading.Event()
        self._detached = False
        self._population_refused = False  # a malformed population table was reported
        # Parameters requests waiting for their answer, by request id (the reader thread
        # fills them in; a lost connection fails them).
        self._params_lock = threading.Lock()
        self._params_seq = 0
        self._params: dict[str, tuple[Future, params_transfer.ParamsAssembly]] = {}
        if self._state.is_final:
            self._ended.set()
        self._thread = threading.Thread(target=self._read_loop, name="rltui-attach", daemon=True)
        self._thread.start()

    @classmethod
    def connect(cls, run_dir: Path | str, timeout: float = 5.0) -> RemoteSession:
        """Attach to the run in `run_dir`; AttachError (one line) if none is listening."""
        run_dir = Path(os.path.abspath(run_dir))
        sock = _connect(run_dir, timeout)
        reader = sock.makefile("rb")
        try:
            hello = protocol.decode(reader.readline())
        except (OSError, ProtocolError) as err:
            sock.close()
            raise AttachError(f"{run_dir}: the run did not greet us ({err})") from None
        if hello.get("type") == "error":  # e.g. it serves as many clients as it can
            sock.close()
            reason = hello.get("error")
            reason = reason[:300] if isinstance(reason, str) else "no reason given"
            raise AttachError(f"{run_dir}: the run refused: {reason}")
        if hello.get("type") != "hello" or hello.get("protocol") != protocol.PROTOCOL_VERSION:
            sock.close()
            raise AttachError(
                f"{run_dir}: the run speaks control protocol {hello.get('protocol')!r}, this rltui speaks "
                f"{protocol.PROTOCOL_VERSION}: attach with the rltui version that started it")
        sock.settimeout(None)
        return cls(sock, reader, hello)

    # --- the session interface ----------------------------------------------------------------
    @property
    def state(self) -> SessionState:
        return self._state

    @property
    def hparams(self) -> DynamicHParams:
        with self._lock:
            return _hparams_from(self._hparams)

    def describe(self) -> dict:
        return dict(self._describe)

    def add_listener(self, listener: SessionListener) -> None:
        with self._lock:
            self._listeners.append(listener)
            listener.on_state(self._state, self._message)
            if self._latest is not None:
                listener.on_metrics(self._latest)
            for event in self._events:
                listener.on_event(event)

    def remove_listener(self, listener: SessionListener) -> None:
        with self._lock:
            self._listeners = [known for known in self._listeners if known is not listener]

    def start(self) -> None:
        """The job started itself; nothing to do."""

    def submit(self, command: Command) -> None:
        """Send a command; never raises. A lost connection shows as the ERROR state."""
        data = protocol.encode(command_message(command))
        try:
            with self._send_lock:
                self._sock.sendall(data)
        except OSError:
            pass  # the reader thread sees the connection go and reports it

    def stop(self) -> None:
        self.submit(Stop())

    def request_params(self) -> Future:
        """Ask the run for its latest parameters (sent in pieces, only on request); the
        future holds state dicts (see ParamsSnapshot) or fails with ParamsUnavailable."""
        future: Future = Future()
        with self._params_lock:
            self._params_seq += 1
            request_id = f"params-{self._params_seq}"
            self._params[request_id] = (future, params_transfer.ParamsAssembly())
        try:
            with self._send_lock:
                self._sock.sendall(protocol.encode({"type": "params", "id": request_id}))
        except OSError:
            self._params_failed(request_id, "the connection to the run is gone")
        return future

    def _params_failed(self, request_id: Any, text: str) -> bool:
        """Fail a waiting parameters request; False if `request_id` is none of them."""
        with self._params_lock:
            entry = self._params.pop(request_id, None) if isinstance(request_id, str) else None
        if entry is None:
            return False
        if entry[0].set_running_or_notify_cancel():
            entry[0].set_exception(ParamsUnavailable(text))
        return True

    def _on_params(self, message: dict[str, Any]) -> None:
        request_id = message.get("id")
        with self._params_lock:
            entry = self._params.get(request_id) if isinstance(request_id, str) else None
        if entry is None:
            return
        future, assembly = entry
        try:
            if not assembly.add(message):
                return
            state = assembly.restore()
        except ProtocolError as err:
            self._params_failed(request_id, f"the run sent unreadable parameters ({err})")
            return
        with self._params_lock:
            self._params.pop(request_id, None)
        update = message.get("update")
        update = update if isinstance(update, int) and not isinstance(update, bool) else -1
        if future.set_running_or_notify_cancel():
            future.set_result(ParamsSnapshot(update, state["params"], state.get("obs_stats")))

    def join(self, timeout: float | None = None) -> bool:
        """True once the run has ended (or the connection to it is gone)."""
        return self._ended.wait(timeout)

    def close(self) -> None:
        """Detach: the job goes on. Idempotent."""
        self._detached = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._thread.join(2.0)
        self._reader.close()
        self._sock.close()

    # --- the reader thread --------------------------------------------------------------------
    def _read_loop(self) -> None:
        try:
            for line in self._reader:
                try:
                    self._dispatch(protocol.decode(line))
                except Exception:  # noqa: BLE001 - one odd message (a newer run's) must not end the session
                    continue
        except (OSError, ValueError):
            pass
        finally:
            self._connection_closed()

    def _dispatch(self, message: dict[str, Any]) -> None:
        kind = message["type"]
        if kind == "snapshot":
            self._on_snapshot(message)
        elif kind == "history":
            curves = Curves.from_json(message["curves"])
            with self._lock:
                self._store.load_curves(curves)
        elif kind == "state":
            self._on_state(session_messages.parse_state(message["state"]), message.get("message"))
        elif kind == "event":
            self._on_event(session_messages.event_from_message(message))
        elif kind == "params":
            self._on_params(message)
        elif kind == "error":
            if not self._params_failed(message.get("id"), f"the run refused: {message.get('error')}"):
                self._notify_refusal(str(message.get("error")))

    def _population(self, data: Any) -> PopulationView | None:
        """The snapshot's population table; a malformed one is shown as none (the records
        beside it are still kept), and the user told once."""
        try:
            return protocol_population.population_from_json(data)
        except ProtocolError as err:
            if not self._population_refused:
                self._population_refused = True
                self._notify_warning(f"the run sent a population table this rltui cannot read ({err})")
            return None

    def _on_snapshot(self, message: dict[str, Any]) -> None:
        records = tuple(record_from_json(r) for r in message.get("records", ()))
        population = self._population(message.get("population"))
        with self._lock:
            self._store.extend(list(records))
            history, steps = self._store.history()
            self._hparams = dict(message.get("hparams") or self._hparams)
            self._latest = MetricsSnapshot(
                state=session_messages.parse_state(message["state"]),
                update=int(message["update"]),
                total_updates=int(message["total_updates"]),
                env_steps=int(message["env_steps"]),
                total_env_steps=int(message["total_env_steps"]),
                elapsed=float(message["elapsed"]),
                sps=float(message["sps"]),
                hparams=MappingProxyType(dict(self._hparams)),
                new_records=records,
                history=history,
                history_env_steps=steps,
                seed_returns=self._store.seed_returns(),
                population=population,
            )
            for listener in self._listeners:
                listener.on_metrics(self._latest)

    def _on_state(self, state: SessionState, message: str | None) -> None:
        with self._lock:
            self._state, self._message = state, message
            for listener in self._listeners:
                listener.on_state(state, message)
        if state.is_final:
            self._ended.set()

    def _on_event(self, event: SessionEvent) -> None:
        with self._lock:
            if event.kind == "hparams" and self._edits_whole_run(event.data):
                self._hparams.update(event.data.get("changes", {}))
            elif event.kind == "rolled back" and "env_steps" in event.data:
                self._store.drop_after(int(event.data["env_steps"]))
            self._events.append(event)
            for listener in self._listeners:
                listener.on_event(event)

    def _edits_whole_run(self, data: Mapping[str, Any]) -> bool:
        """Whether an `hparams` event changes the run's own values: an edit of some of a
        population's members changes only theirs (the next snapshot's table shows them)."""
        members = data.get("members")
        if members is None:
            return True
        population = self._latest.population if self._latest is not None else None
        return (population is not None and isinstance(members, list)
                and len(set(map(str, members))) >= len(population.members))

    def _notify_refusal(self, text: str) -> None:
        self._notify_warning(f"the run refused: {text}")

    def _notify_warning(self, text: str) -> None:
        latest = self._latest
        event = SessionEvent(
            kind="warning", update=latest.update if latest else 0, message=text,
            wall_time=latest.elapsed if latest else 0.0,
        )
        with self._lock:
            for listener in self._listeners:
                listener.on_event(event)

    def _connection_closed(self) -> None:
        with self._params_lock:
            waiting = list(self._params)
        for request_id in waiting:
            self._params_failed(request_id, "the connection to the run is gone")
        with self._lock:
            if not self._detached and not self._state.is_final:
                self._on_state(SessionState.ERROR, LOST)
        self._ended.set()
