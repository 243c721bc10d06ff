"""The control socket: a run's listener that serves its snapshots and events to local
clients (`rltui attach`, scripts) and takes their commands, over `rltui.session.protocol`.

One thread owns every socket (a selector over the listening socket, the clients and a
wake-up pair). The session thread only appends its callbacks to a deque and wakes that
thread, so no client, however slow or broken, can block training. Each client has a
bounded backlog; one that falls further behind is disconnected. Malformed or unknown
messages get an `error` reply; a message cut short by a disconnect is dropped unseen.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import os
import selectors
import socket
import threading
import time
from pathlib import Path
from typing import Any, Iterator, Mapping

from trainers.hparams import HParamError

from rltui import __version__
from rltui.session import protocol
from rltui.session.commands import SetHParams
from rltui.session.control_paths import (
    ControlPathError,
    bind_owner_only,
    refuse_if_live,
    same_user,
    socket_location,
    write_pointer,
)
from rltui.session.controller import SessionListener, validate_changes
from rltui.session.events import SessionEvent, SessionState
from rltui.session.interface import SessionClient
from rltui.session.metrics import MetricsSnapshot, UpdateRecord
from rltui.session.protocol import ProtocolError

HISTORY = 4096  # update records sent to a client on connect (the session keeps as many)
EVENTS = 500  # recent events sent to a client on connect
MAX_BACKLOG = 8 * 2**20  # bytes waiting for one client before it is disconnected
_LISTEN, _WAKE = "listen", "wake"


class ControlServerError(OSError):
    """The run cannot listen; the message is one line for the user."""


@dataclasses.dataclass(eq=False)
class _Client:
    sock: socket.socket
    inbox: bytearray = dataclasses.field(default_factory=bytearray)
    outbox: bytearray = dataclasses.field(default_factory=bytearray)
    events: int = selectors.EVENT_READ
    closing: bool = False  # answered a fatal error: close once the outbox is sent


class ControlServer(SessionListener):
    def __init__(
        self,
        session: SessionClient,
        run_dir: Path,
        *,
        config: Mapping[str, Any] | None = None,
        history: int = HISTORY,
        events: int = EVENTS,
        max_backlog: int = MAX_BACKLOG,
    ):
        self.session = session
        self.run_dir = Path(os.path.abspath(run_dir))
        self.config = dict(config or {})
        self.max_backlog = max_backlog
        self.path: Path | None = None
        self._pointer: Path | None = None
        self._inode: int | None = None
        # What a new client is sent first; only the server thread touches these.
        self._state: SessionState = session.state
        self._state_message: str | None = None
        self._latest: MetricsSnapshot | None = None
        self._records: collections.deque[UpdateRecord] = collections.deque(maxlen=history)
        self._events: collections.deque[SessionEvent] = collections.deque(maxlen=events)
        self._describe: dict = {}
        self._inbox: collections.deque[tuple[str, Any]] = collections.deque()  # from the session thread
        self._clients: set[_Client] = set()
        self._selector = selectors.DefaultSelector()
        self._listen: socket.socket | None = None
        self._wake_r, self._wake_w = socket.socketpair()
        for end in (self._wake_r, self._wake_w):
            end.setblocking(False)
        self._thread = threading.Thread(target=self._serve, name="rltui-control", daemon=True)
        self._stopping = threading.Event()
        self._flush_seconds = 1.0
        self._serving = False

    # --- lifecycle (the launching thread) ---------------------------------------------------
    def start(self) -> Path:
        """Listen and serve; the socket's path. ControlServerError if it cannot."""
        self._describe = protocol.jsonable(self.session.describe())
        try:
            path, needs_pointer = socket_location(self.run_dir)
            refuse_if_live(path)
            self._listen = bind_owner_only(path)
            self.path, self._inode = path, os.stat(path).st_ino
            if needs_pointer:
                self._pointer = write_pointer(self.run_dir, path)
        except ControlPathError as err:
            self._shutdown()
            raise ControlServerError(str(err)) from None
        except OSError:
            self._shutdown()
            raise
        self._selector.register(self._listen, selectors.EVENT_READ, _LISTEN)
        self._selector.register(self._wake_r, selectors.EVENT_READ, _WAKE)
        self._serving = True
        self.session.add_listener(self)
        self._thread.start()
        return path

    def close(self, flush_seconds: float = 1.0) -> None:
        """Send what is queued (bounded), disconnect everyone, remove the socket. Idempotent."""
        if not self._thread.is_alive():
            return
        self.session.remove_listener(self)
        self._flush_seconds = flush_seconds
        self._stopping.set()
        self._wake()
        self._thread.join(flush_seconds + 2.0)

    @property
    def client_count(self) -> int:
        return len(self._clients)

    # --- session callbacks (the session thread: append and wake, nothing more) ---------------
    def on_state(self, state: SessionState, message: str | None) -> None:
        self._post("state", (state, message))

    def on_metrics(self, snapshot: MetricsSnapshot) -> None:
        self._post("metrics", snapshot)

    def on_event(self, event: SessionEvent) -> None:
        self._post("event", event)

    def _post(self, kind: str, payload: Any) -> None:
        if self._serving:  # once the thread is gone nobody would drain it
            self._inbox.append((kind, payload))
            self._wake()

    def _wake(self) -> None:
        with contextlib.suppress(OSError):  # full (already woken) or closed
            self._wake_w.send(b"\0")

    # --- the server thread ------------------------------------------------------------------
    def _serve(self) -> None:
        try:
            while not self._stopping.is_set():
                ready = self._selector.select()
                # Wake-up bytes are cleared before the inbox is drained, never after: an
                # item posted in between keeps its byte, so the next select returns for it.
                if any(key.data == _WAKE for key, _ in ready):
                    self._clear_wake()
                self._drain_inbox()  # before accepting, so a new client is greeted with the latest
                for key, mask in ready:
                    self._ready(key, mask)
            self._drain_inbox()
            self._flush_all(time.monotonic() + self._flush_seconds)
        finally:
            self._serving = False
            self._shutdown()

    def _clear_wake(self) -> None:
        with contextlib.suppress(OSError):  # BlockingIOError once empty
            while self._wake_r.recv(4096):
                pass

    def _ready(self, key: selectors.SelectorKey, mask: int) -> None:
        if key.data == _LISTEN:
            self._accept()
        elif key.data != _WAKE:
            client: _Client = key.data
            if mask & selectors.EVENT_READ and client in self._clients:
                self._read(client)
            if mask & selectors.EVENT_WRITE and client in self._clients:
                self._send(client)

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listen.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return  # e.g. out of file descriptors: the client sees a refusal
            if not same_user(conn):
                conn.close()
                continue
            conn.setblocking(False)
            client = _Client(conn)
            self._clients.add(client)
            self._selector.register(conn, client.events, client)
            for message in self._greeting():
                self._queue(client, protocol.encode(message))

    def _greeting(self) -> Iterator[dict[str, Any]]:
        """What a new client needs to show the run: who and where it is, the recent
        history once, the recent events. Live messages follow."""
        hello = {
            "type": "hello",
            "protocol": protocol.PROTOCOL_VERSION,
            "rltui": __version__,
            "pid": os.getpid(),
            "run_dir": str(self.run_dir),
            "state": self._state.value,
            "message": self._state_message,
            "total_updates": self.session.total_updates,
            "hparams": self.session.hparams.as_floats(),
            "describe": self._describe,
            "config": self.config,
        }
        yield hello
        if self._latest is not None:
            # The hyperparameters of now, not of the last chunk: edits made since (while
            # paused) would otherwise show as undone until the next chunk.
            yield {**protocol.snapshot_message(self._latest, tuple(self._records)), "hparams": hello["hparams"]}
        for event in self._events:
            yield protocol.event_message(event)

    def _read(self, client: _Client) -> None:
        if client.closing:
            return
        try:
            data = client.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:  # gone; a message it had not finished is dropped unseen
            self._drop(client)
            return
        client.inbox += data
        while (end := client.inbox.find(b"\n")) >= 0:
            line = bytes(client.inbox[:end])
            del client.inbox[: end + 1]
            if line.strip():
                self._queue(client, protocol.encode(self._answer(line)))
        if len(client.inbox) > protocol.MAX_LINE_BYTES:
            client.inbox.clear()
            client.closing = True  # cannot find the next message boundary: answer, then close
            self._queue(client, protocol.encode(protocol.error_message(
                f"message longer than {protocol.MAX_LINE_BYTES} bytes; closing")))

    def _answer(self, line: bytes) -> dict[str, Any]:
        request_id = None
        try:
            message = protocol.decode(line)
            request_id = protocol.jsonable(message.get("id"))
            return {"type": "ok", "id": request_id, **self._apply(message)}
        except ProtocolError as err:
            return protocol.error_message(str(err), request_id)

    def _apply(self, message: dict[str, Any]) -> dict[str, Any]:
        kind = message["type"]
        if kind == "hello":
            version = message.get("protocol")
            if version != protocol.PROTOCOL_VERSION:
                raise ProtocolError(
                    f"protocol version {version!r} not supported; this run speaks {protocol.PROTOCOL_VERSION}")
            return {"protocol": protocol.PROTOCOL_VERSION}
        if kind != "command":
            raise ProtocolError(f"unknown message type {kind!r}; expected command or hello")
        command = protocol.command_from_message(message)
        if self._state.is_final:
            raise ProtocolError(f"the run has ended ({self._state.value})")
        if isinstance(command, SetHParams):
            try:
                validate_changes(dict(command.changes))
            except HParamError as err:
                raise ProtocolError(str(err)) from None
        self.session.submit(command)
        return {"command": message["command"]}

    def _drain_inbox(self) -> None:
        while self._inbox:
            kind, payload = self._inbox.popleft()
            if kind == "state":
                self._state, self._state_message = payload
                message = protocol.state_message(*payload)
            elif kind == "metrics":
                self._latest = payload
                self._records.extend(payload.new_records)
                message = protocol.snapshot_message(payload, payload.new_records)
            else:
                self._events.append(payload)
                if payload.kind == "rolled back":  # a client attaching later sees the history the run goes on from
                    while self._records and self._records[-1].update > payload.update:
                        self._records.pop()
                message = protocol.event_message(payload)
            data = protocol.encode(message)
            for client in list(self._clients):
                if not client.closing:
                    self._queue(client, data)

    def _queue(self, client: _Client, data: bytes) -> None:
        if len(client.outbox) + len(data) > self.max_backlog:
            self._drop(client)  # fell too far behind: it can attach again and catch up
            return
        client.outbox += data
        self._send(client)

    def _send(self, client: _Client) -> None:
        try:
            sent = client.sock.send(client.outbox) if client.outbox else 0
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:
            self._drop(client)
            return
        del client.outbox[:sent]
        if client.closing and not client.outbox:
            self._drop(client)
            return
        wanted = selectors.EVENT_READ | (selectors.EVENT_WRITE if client.outbox else 0)
        if wanted != client.events:
            client.events = wanted
            self._selector.modify(client.sock, wanted, client)

    def _drop(self, client: _Client) -> None:
        if client not in self._clients:
            return
        self._clients.discard(client)
        with contextlib.suppress(KeyError, ValueError, OSError):
            self._selector.unregister(client.sock)
        client.sock.close()

    def _flush_all(self, deadline: float) -> None:
        """At the end: give clients a moment to receive the final state."""
        while any(c.outbox for c in self._clients) and time.monotonic() < deadline:
            for key, mask in self._selector.select(timeout=max(0.0, deadline - time.monotonic())):
                if isinstance(key.data, _Client) and key.data in self._clients:
                    (self._send if mask & selectors.EVENT_WRITE else self._read)(key.data)

    def _shutdown(self) -> None:
        for client in list(self._clients):
            self._drop(client)
        for sock in (self._listen, self._wake_r, self._wake_w):
            if sock is not None:
                sock.close()
        self._selector.close()
        self.remove_socket()

    def remove_socket(self) -> None:
        """Remove the socket file (and its pointer), only if it is still ours, not a newer
        run's. `close` does it; a process about to exit abruptly calls it alone."""
        with contextlib.suppress(OSError):
            if self.path is not None and os.stat(self.path).st_ino == self._inode:
                self.path.unlink()
        if self._pointer is not None:
            self._pointer.unlink(missing_ok=True)
