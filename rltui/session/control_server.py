"""The control socket: a run's listener that serves its snapshots and events to local
clients (`rltui attach`, scripts) and takes their commands, over `rltui.session.protocol`.

One thread owns every socket (a selector over the listening socket, the clients and a
wake-up pair). The session thread only appends its callbacks to a deque and wakes that
thread, so no client, however slow or broken, can block training; and that thread keeps
to a small share of one core (`CPU_SHARE`), so no number of clients or connections can
take training's CPU either.

Every client line is checked as data (`protocol.parse_request`) before use: what the
protocol refuses, and anything unforeseen, is an `error` reply to that client alone; a
message cut short by a disconnect is dropped unseen.

Memory is bounded per client and in clients (`MAX_CLIENTS`; one more is refused with a
line saying so). Messages are encoded once and shared by every client; a client that
reads slowly is owed snapshots merged into one (the latest scalars and the records it has
not seen), never a backlog of them, and one that stops reading while events and replies
pile up past `MAX_QUEUED` bytes is disconnected (it can attach again and catch up).

The policy's parameters (for a client's watch view) go only on request: the session copies
them at a chunk boundary (one copy for every request at that boundary), this thread
encodes them once per copy, and each client is sent them a piece at a time, as fast as it
reads, one request at a time; requests are rate-limited for all clients together.
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
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from rltui import __version__
from rltui.session import params_transfer, protocol, session_messages
from rltui.session.commands import CloneMember, Command, FreezeMembers, SetHParams
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
from rltui.session.metrics import MetricsSnapshot
from rltui.session.protocol import ProtocolError
from trainers.hparams import HParamError

HISTORY = 4096  # update records sent to a client on connect (the session keeps as many)
EVENTS = 500  # recent events sent to a client on connect
MAX_CLIENTS = 64  # clients at once; one more is told so and closed
MAX_QUEUED = 2**20  # bytes of whole messages waiting for one client; more and it is disconnected
RECORDS_PER_MESSAGE = 256  # a snapshot owed to a client goes out in messages of this many records
CPU_SHARE = 0.1  # of one core: the most this thread uses, averaged, whatever clients do
CPU_BURST = 0.25  # CPU seconds it may use at once before CPU_SHARE applies
# New connections accepted: all MAX_CLIENTS at once, then this many a second. Beyond it
# they wait in the listen backlog, and a client that waits for its greeting (as rltui's
# do) waits without using CPU: a loop of connects cannot keep the machine busy through us.
ACCEPTS_PER_SECOND = 20.0
ACCEPT_BURST = MAX_CLIENTS
COMMANDS_PER_SECOND = 20.0  # commands passed to the session, all clients together
COMMAND_BURST = 50  # commands at once before COMMANDS_PER_SECOND applies
# Work done for one client or the listener per turn of the loop: small turns keep the CPU
# budget fine-grained and let every client have its turn.
LINES_PER_TURN = 32
PARAMS_PER_SECOND = 2.0  # parameters requests taken, all clients together
PARAMS_BURST = 4
# Distinct parameter blobs being sent at once (clients reading an older copy slowly keep it).
MAX_PARAMS_IN_FLIGHT = 4 * params_transfer.MAX_PARAMS_BYTES
ACCEPTS_PER_TURN = 16
_LISTEN, _WAKE = "listen", "wake"


class ControlServerError(OSError):
    """The run cannot listen; the message is one line for the user."""


class _Allowance:
    """A token bucket: `burst` at once, then `rate` a second."""

    def __init__(self, rate: float, burst: int):
        self.rate, self.burst = rate, float(burst)
        self.tokens, self._mark = float(burst), time.monotonic()

    def available(self) -> bool:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self._mark) * self.rate)
        self._mark = now
        return self.tokens >= 1

    def take(self) -> bool:
        if not self.available():
            return False
        self.tokens -= 1
        return True

    def next_at(self) -> float:
        """When the next token is there."""
        return self._mark + max(0.0, 1 - self.tokens) / self.rate


class _Kept(NamedTuple):
    """An update record of the recent history, encoded once for every client."""

    update: int
    json: bytes


@dataclasses.dataclass(eq=False)
class _Owed:
    """Snapshots a client has not been sent yet, merged: the latest scalars and the records
    of all of them. A client that reads slowly gets one of these, not a backlog."""

    head: dict[str, Any]
    records: collections.deque[bytes]


@dataclasses.dataclass(eq=False)
class _Blob:
    """The policy's parameters owed to one client: its pieces (shared by every client sent
    the same copy) go out one message at a time, as it reads."""

    request_id: Any
    update: int
    pieces: list[str]
    size: int
    sent: int = 0


@dataclasses.dataclass(eq=False)
class _Client:
    sock: socket.socket
    inbox: bytearray = dataclasses.field(default_factory=bytearray)
    # What it is owed, in order: encoded messages (shared between clients) and _Owed.
    queue: collections.deque = dataclasses.field(default_factory=collections.deque)
    queued: int = 0  # bytes of the encoded messages in `queue`
    sending: memoryview | None = None  # the unsent rest of the message being sent
    owed: _Owed | None = None  # the _Owed in `queue` that later snapshots merge into
    events: int = selectors.EVENT_READ
    closing: bool = False  # answered a fatal error: close once the queue is sent
    params_pending: bool = False  # a parameters request of its is being answered

    @property
    def pending(self) -> bool:
        return self.sending is not None or bool(self.queue)


class ControlServer(SessionListener):
    def __init__(
        self,
        session: SessionClient,
        run_dir: Path,
        *,
        config: Mapping[str, Any] | None = None,
        history: int = HISTORY,
        events: int = EVENTS,
        max_clients: int = MAX_CLIENTS,
        max_queued: int = MAX_QUEUED,
        records_per_message: int = RECORDS_PER_MESSAGE,
        cpu_share: float = CPU_SHARE,
        cpu_burst: float = CPU_BURST,
        commands_per_second: float = COMMANDS_PER_SECOND,
        command_burst: int = COMMAND_BURST,
        accepts_per_second: float = ACCEPTS_PER_SECOND,
        accept_burst: int = ACCEPT_BURST,
    ):
        self.session = session
        self.run_dir = Path(os.path.abspath(run_dir))
        self.config = dict(config or {})
        self.history = history
        self.max_clients = max_clients
        self.max_queued = max_queued
        self.records_per_message = records_per_message
        self.cpu_share, self.cpu_burst = cpu_share, cpu_burst
        self.path: Path | None = None
        self._pointer: Path | None = None
        self._inode: int | None = None
        # What a new client is sent first; only the server thread touches these.
        self._state: SessionState = session.state
        self._state_message: str | None = None
        self._latest_head: dict[str, Any] | None = None
        self._latest_at = 0.0  # when it came (time.monotonic)
        self._latest_curves = None  # the whole run's curves, from the latest snapshot
        self._history_line: tuple[Any, bytes] | None = None  # (curves, their history message)
        self._history: collections.deque[_Kept] = collections.deque(maxlen=history)
        self._events: collections.deque[bytes] = collections.deque(maxlen=events)
        self._describe: dict = {}
        self._inbox: collections.deque[tuple[str, Any]] = collections.deque()  # from the session thread
        self._clients: set[_Client] = set()
        self._lines_waiting: set[_Client] = set()  # clients with whole lines not yet answered
        self._selector = selectors.DefaultSelector()
        self._listen: socket.socket | None = None
        self._wake_r, self._wake_w = socket.socketpair()
        for end in (self._wake_r, self._wake_w):
            end.setblocking(False)
        self._thread = threading.Thread(target=self._serve, name="rltui-control", daemon=True)
        self._stopping = threading.Event()
        self._flush_seconds = 1.0
        self._serving = False
        self._cpu_credit, self._cpu_mark = cpu_burst, (0.0, 0.0)
        self._command_tokens = _Allowance(commands_per_second, command_burst)
        self._accept_tokens = _Allowance(accepts_per_second, accept_burst)
        self._params_tokens = _Allowance(PARAMS_PER_SECOND, PARAMS_BURST)
        self._params_encoded: tuple[Any, list[str], int] | None = None  # (snapshot, pieces, bytes)
        self._listen_paused_until: float | None = None  # out of accepts: the listener is off the selector
        self.last_internal_error: str | None = None  # a bug that cost one message or client, not the server

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
            self._cpu_mark = (time.monotonic(), time.thread_time())
            while not self._stopping.is_set():
                ready = self._selector.select(self._select_timeout())
                self._resume_listening()
                # Wake-up bytes are cleared before the inbox is drained, never after: an
                # item posted in between keeps its byte, so the next select returns for it.
                if any(key.data == _WAKE for key, _ in ready):
                    self._clear_wake()
                self._drain_inbox()  # before accepting, so a new client is greeted with the latest
                for key, mask in ready:
                    self._ready(key, mask)
                for client in list(self._lines_waiting):
                    self._guarded(client, self._answer_lines)
                self._throttle()
            self._drain_inbox()
            self._flush_all(time.monotonic() + self._flush_seconds)
        finally:
            self._serving = False
            self._shutdown()

    def _select_timeout(self) -> float | None:
        if self._lines_waiting:
            return 0
        if self._listen_paused_until is not None:
            return max(0.0, self._listen_paused_until - time.monotonic())
        return None

    def _resume_listening(self) -> None:
        if self._listen_paused_until is not None and time.monotonic() >= self._listen_paused_until:
            self._listen_paused_until = None
            self._selector.register(self._listen, selectors.EVENT_READ, _LISTEN)

    def _throttle(self) -> None:
        """Keep this thread's CPU to `cpu_share` of a core on average: whatever clients send
        or however often they connect, training keeps the rest. Over budget it waits (new
        connections wait in the listen backlog, messages in the socket buffers)."""
        now, used = time.monotonic(), time.thread_time()
        (then, used_then), self._cpu_mark = self._cpu_mark, (now, used)
        self._cpu_credit = min(self.cpu_burst, self._cpu_credit + (now - then) * self.cpu_share) - (used - used_then)
        if self._cpu_credit < 0:
            self._stopping.wait(-self._cpu_credit / self.cpu_share)

    def _clear_wake(self) -> None:
        with contextlib.suppress(OSError):  # BlockingIOError once empty
            while self._wake_r.recv(4096):
                pass

    def _ready(self, key: selectors.SelectorKey, mask: int) -> None:
        if key.data == _LISTEN:
            self._guarded(None, lambda _: self._accept())
        elif key.data != _WAKE:
            client: _Client = key.data
            if mask & selectors.EVENT_READ:
                self._guarded(client, self._read)
            if mask & selectors.EVENT_WRITE:
                self._guarded(client, self._send)

    def _guarded(self, client: _Client | None, work) -> None:
        """`work(client)`; a bug in it costs that client its connection, never the others
        theirs, and never the server."""
        if client is not None and client not in self._clients:
            return
        try:
            work(client)
        except Exception as err:  # noqa: BLE001 - see the docstring
            self.last_internal_error = repr(err)[:200]
            if client is not None:
                self._drop(client)

    def _accept(self) -> None:
        for _ in range(ACCEPTS_PER_TURN):  # more wait in the listen backlog for the next turn
            if not self._accept_tokens.available():
                # The rest wait in the listen backlog; the listener leaves the selector
                # until an accept is allowed again (it would report ready all the while).
                self._selector.unregister(self._listen)
                self._listen_paused_until = self._accept_tokens.next_at()
                return
            try:
                conn, _ = self._listen.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return  # e.g. out of file descriptors: the client sees a refusal
            self._accept_tokens.take()
            try:
                if not same_user(conn):
                    conn.close()
                    continue
                conn.setblocking(False)
                if len(self._clients) >= self.max_clients:
                    self._refuse(conn)
                    continue
            except OSError:
                conn.close()
                continue
            client = _Client(conn)
            self._clients.add(client)
            self._selector.register(conn, client.events, client)
            self._guarded(client, self._greet)

    def _refuse(self, conn: socket.socket) -> None:
        """One line saying why, then the connection closes (the line fits in an empty
        socket buffer, and the peer reads it before the end of the stream)."""
        with contextlib.suppress(OSError):
            conn.send(protocol.encode(protocol.error_message(
                f"too many clients: this run serves {self.max_clients} at once; detach one and try again")))
        conn.close()

    def _greet(self, client: _Client) -> None:
        """What a new client needs to show the run: who and where it is, the recent
        history once, the recent events. Live messages follow."""
        hparams = self.session.hparams.as_floats()
        self._queue(client, protocol.encode({
            "type": "hello",
            "protocol": protocol.PROTOCOL_VERSION,
            "rltui": __version__,
            "pid": os.getpid(),
            "run_dir": str(self.run_dir),
            "state": self._state.value,
            "message": self._state_message,
            "total_updates": self.session.total_updates,
            "hparams": hparams,
            "describe": self._describe,
            "config": self.config,
        }))
        if self._latest_head is not None:
            # The hyperparameters of now, not of the last chunk: edits made since (while
            # paused) would otherwise show as undone until the next chunk. Owed, not
            # encoded: it goes out as fast as the client reads, a piece at a time.
            head = {**self._latest_head, "hparams": hparams}
            if not self._state.is_final:
                # The run's clock goes on while paused, and between chunks: the elapsed
                # time of now, not of the last chunk, or a client attaching to a run paused
                # for an hour would count on from before that hour.
                head["elapsed"] = round(head["elapsed"] + time.monotonic() - self._latest_at, 4)
            curves = self._latest_curves
            if curves is not None and len(curves):
                # The whole run, bucketed, up to the same snapshot as the head and records:
                # encoded once per snapshot, shared by the clients that attach meanwhile.
                if self._history_line is None or self._history_line[0] is not curves:
                    self._history_line = (curves, protocol.encode(session_messages.history_message(curves)))
                self._queue(client, self._history_line[1])
            client.owed = _Owed(head, collections.deque((kept.json for kept in self._history), maxlen=self.history))
            client.queue.append(client.owed)
        for data in self._events:
            self._queue(client, data)
        self._send(client)

    def _read(self, client: _Client) -> None:
        if client.closing or client in self._lines_waiting:
            return  # what it sent already waits its turn; the rest waits in the socket
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
        self._answer_lines(client)

    def _answer_lines(self, client: _Client) -> None:
        """Answer the whole lines it has sent, up to LINES_PER_TURN; more wait their turn."""
        self._lines_waiting.discard(client)
        for _ in range(LINES_PER_TURN):
            end = client.inbox.find(b"\n")
            if end < 0 or client not in self._clients:
                break
            line = bytes(client.inbox[:end])
            del client.inbox[: end + 1]
            if line.strip():
                self._queue(client, protocol.encode(self._answer(line, client)))
        else:
            if b"\n" in client.inbox and client in self._clients:
                self._lines_waiting.add(client)
                return
        if len(client.inbox) > protocol.MAX_LINE_BYTES and client in self._clients:
            client.inbox.clear()
            self._queue(client, protocol.encode(protocol.error_message(
                f"message longer than {protocol.MAX_LINE_BYTES} bytes; closing")))
            client.closing = True  # cannot find the next message boundary: answer, then close
            self._send(client)

    def _answer(self, line: bytes, client: _Client | None = None) -> dict[str, Any]:
        """The reply to one line. Nothing a client sends may end the server: what the
        protocol refuses is an error, and so is anything unforeseen."""
        request_id = None
        try:
            request = protocol.parse_request(line)
            request_id = request.id
            if request.kind == "hello":
                return {"type": "ok", "id": request_id, "protocol": protocol.PROTOCOL_VERSION}
            if request.kind == "params":
                self._request_params(client, request_id)
                return {"type": "ok", "id": request_id, "request": "params"}
            self._submit(request.command)
            return {"type": "ok", "id": request_id, "command": protocol.command_name(request.command)}
        except ProtocolError as err:
            return protocol.error_message(str(err), err.request_id if request_id is None else request_id)
        except Exception as err:  # noqa: BLE001 - answered as an error; the server goes on
            self.last_internal_error = repr(err)[:200]
            return protocol.error_message(
                f"could not handle this message ({type(err).__name__}); nothing was applied", request_id)

    def _submit(self, command: Command) -> None:
        if self._state.is_final:
            raise ProtocolError(f"the run has ended ({self._state.value})")
        if isinstance(command, SetHParams):
            try:
                validate_changes(dict(command.changes))
            except HParamError as err:
                raise ProtocolError(str(err)) from None
        self._check_members(command)
        if not self._command_tokens.take():
            raise ProtocolError(
                f"too many commands (more than {self._command_tokens.rate:g} a second); this one was not applied")
        self.session.submit(command)

    def _check_members(self, command: Command) -> None:
        """A command naming members, refused at once when the latest snapshot shows it
        cannot apply (this run is no population, or has no such member), so the client's
        reply says so. Before the first snapshot the session checks, and says so in a
        warning event; a population's size never changes, so the latest snapshot's holds."""
        if isinstance(command, SetHParams):
            members = command.members
        elif isinstance(command, FreezeMembers):
            members = command.members
        elif isinstance(command, CloneMember):
            members = (command.source, *command.targets)
        else:
            return
        if members is None or self._latest_head is None:
            return
        name = protocol.command_name(command)
        population = self._latest_head.get("population")
        if population is None:
            raise ProtocolError(f"{name}: this run is not a population; it has no members to choose")
        size = len(population["members"])
        for member in members:
            if member >= size:
                raise ProtocolError(f"{name}: member {member}: expected a member index from 0 to {size - 1}")

    def _request_params(self, client: _Client | None, request_id: Any) -> None:
        """Ask the session for a copy; `_send_params` answers once it is there."""
        if client is None:
            raise ProtocolError("params: no client to answer")
        if client.params_pending:
            raise ProtocolError("params: the previous parameters request is still being answered")
        if not self._params_tokens.take():
            raise ProtocolError(
                f"too many parameters requests (more than {self._params_tokens.rate:g} a second, all clients "
                "together); try again")
        client.params_pending = True
        future = self.session.request_params()
        # Called on the session thread (or here, if already answered): post and wake only.
        future.add_done_callback(lambda done: self._post("params", (client, request_id, done)))

    def _send_params(self, client: _Client, request_id: Any, future) -> None:
        if client not in self._clients:
            return
        try:
            snapshot = future.result()
            encoded = self._params_encoded
            if encoded is None or encoded[0] is not snapshot:
                blob = params_transfer.params_blob(snapshot.params, snapshot.obs_stats)
                encoded = self._params_encoded = (snapshot, params_transfer.params_pieces(blob), len(blob))
            _, pieces, size = encoded
            in_flight = {id(item.pieces): item.size for other in self._clients for item in other.queue
                         if isinstance(item, _Blob)}
            if id(pieces) not in in_flight and sum(in_flight.values()) + size > MAX_PARAMS_IN_FLIGHT:
                raise ProtocolError("params: the run is busy sending parameters to other clients; try again")
        except Exception as err:  # noqa: BLE001 - ParamsUnavailable, ParamsTooLarge, ...: that client is told
            client.params_pending = False
            self._queue(client, protocol.encode(protocol.error_message(str(err) or type(err).__name__, request_id)))
            return
        client.queue.append(_Blob(request_id, snapshot.update, pieces, size))
        self._send(client)

    def _drain_inbox(self) -> None:
        while self._inbox:
            kind, payload = self._inbox.popleft()
            try:
                self._publish(kind, payload)
            except Exception as err:  # noqa: BLE001 - one unexpected item is skipped; the server goes on
                self.last_internal_error = repr(err)[:200]

    def _publish(self, kind: str, payload: Any) -> None:
        if kind == "params":
            self._send_params(*payload)
            return
        if kind == "metrics":
            head = session_messages.snapshot_head(payload)
            records = [session_messages.encode_record(record) for record in payload.new_records]
            self._latest_head = head
            self._latest_curves = payload.curves
            self._latest_at = time.monotonic()
            self._history.extend(_Kept(r.update, data) for r, data in zip(payload.new_records, records, strict=True))
            line = session_messages.snapshot_line(head, records)
            for client in list(self._clients):
                self._offer_snapshot(client, head, records, line)
            return
        if kind == "state":
            self._state, self._state_message = payload
            data = protocol.encode(session_messages.state_message(*payload))
        else:
            data = protocol.encode(session_messages.event_message(payload))
            self._events.append(data)
            if payload.kind == "rolled back":  # a client attaching later sees the history the run goes on from
                while self._history and self._history[-1].update > payload.update:
                    self._history.pop()
        rolled_back = kind == "event" and payload.kind == "rolled back"
        for client in list(self._clients):
            if rolled_back:
                # What it is owed from before the rollback goes out before this event (which
                # tells it to forget those updates); what comes after must follow the event.
                client.owed = None
            if not client.closing:
                self._queue(client, data)

    def _offer_snapshot(self, client: _Client, head: dict[str, Any], records: list[bytes], line: bytes) -> None:
        if client.closing:
            return
        if client.owed is not None:  # behind: merge into what it is owed
            client.owed.head = head
            client.owed.records.extend(records)
        elif not client.pending:  # caught up: the line every such client shares
            self._queue(client, line)
        else:
            client.owed = _Owed(head, collections.deque(records, maxlen=self.history))
            client.queue.append(client.owed)
            self._send(client)

    def _queue(self, client: _Client, data: bytes) -> None:
        if client.queued + len(data) > self.max_queued:
            self._drop(client)  # not reading at all: it can attach again and catch up
            return
        client.queue.append(data)
        client.queued += len(data)
        self._send(client)

    def _next_message(self, client: _Client) -> bytes:
        item = client.queue[0]
        if isinstance(item, bytes):
            client.queue.popleft()
            client.queued -= len(item)
            return item
        if isinstance(item, _Blob):
            data = protocol.encode(params_transfer.params_message(item.request_id, item.update, item.sent, item.pieces,
                                                                  item.size))
            item.sent += 1
            if item.sent == len(item.pieces):
                client.queue.popleft()
                client.params_pending = False
            return data
        count = min(self.records_per_message, len(item.records))
        piece = [item.records.popleft() for _ in range(count)]
        if not item.records:
            client.queue.popleft()
            if client.owed is item:
                client.owed = None
        return session_messages.snapshot_line(item.head, piece)

    def _send(self, client: _Client) -> None:
        """Send what the socket takes now; the rest waits for it to be writable."""
        if client not in self._clients:
            return
        while client.pending:
            if client.sending is None:
                client.sending = memoryview(self._next_message(client))
            try:
                sent = client.sock.send(client.sending)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                self._drop(client)
                return
            client.sending = client.sending[sent:] if sent < len(client.sending) else None
            if client.sending is not None:
                break
        if client.closing and not client.pending:
            self._drop(client)
            return
        wanted = (0 if client.closing else selectors.EVENT_READ) | (selectors.EVENT_WRITE if client.pending else 0)
        if wanted != client.events:
            client.events = wanted
            self._selector.modify(client.sock, wanted, client)

    def _drop(self, client: _Client) -> None:
        if client not in self._clients:
            return
        self._clients.discard(client)
        self._lines_waiting.discard(client)
        with contextlib.suppress(KeyError, ValueError, OSError):
            self._selector.unregister(client.sock)
        client.sock.close()
        client.queue.clear()
        client.sending = client.owed = None

    def _flush_all(self, deadline: float) -> None:
        """At the end: give clients a moment to receive the final state."""
        while any(c.pending for c in self._clients) and time.monotonic() < deadline:
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
