"""The control socket: a run's listener that serves its snapshots and events to local
clients (`rltui attach`, scripts) and takes their commands, over `rltui.control.protocol`.

One thread owns every socket (a selector over the listening socket, the clients and a
wake-up pair). The session thread only appends its callbacks to a deque and wakes that
thread, so no client, however slow or broken, can block training; and that thread keeps
to a small share of one core (`CPU_SHARE`), so no number of clients or connections can
take training's CPU either. A connection whose client hung up before it was accepted,
whatever it sent first, is closed unread and ungreeted: a storm of them holds back no
client queued behind it.

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

This module is the server proper: its thread, the listener, the session's callbacks and
the CPU share. Its parts hold the rest: the clients and what each is owed
(`clients.ConnectedClients`), what they are sent of the run (`feed.RunFeed`) and the
answers to what they send (`requests.ClientRequests`).
"""

from __future__ import annotations

import collections
import contextlib
import os
import selectors
import socket
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rltui.control import protocol
from rltui.control.allowance import Allowance
from rltui.control.clients import Client, ConnectedClients, close_quietly, hung_up
from rltui.control.feed import RunFeed
from rltui.control.paths import (
    LISTEN_BACKLOG,
    ControlPathError,
    bind_owner_only,
    refuse_if_live,
    same_user,
    socket_location,
    write_pointer,
)
from rltui.control.requests import ClientRequests
from rltui.session.controller import SessionListener
from rltui.session.events import SessionEvent, SessionState
from rltui.session.interface import SessionClient
from rltui.session.metrics import MetricsSnapshot

HISTORY = 4096  # update records sent to a client on connect (the session keeps as many)
EVENTS = 500  # recent events sent to a client on connect
MAX_CLIENTS = 64  # clients at once; one more is told so and closed
MAX_QUEUED = 2**20  # bytes of whole messages waiting for one client; more and it is disconnected
RECORDS_PER_MESSAGE = 256  # a snapshot owed to a client goes out in messages of this many records
CPU_SHARE = 0.1  # of one core: the most this thread uses, averaged, whatever clients do
CPU_BURST = 0.25  # CPU seconds it may use at once before CPU_SHARE applies
# New connections greeted: all MAX_CLIENTS at once, then this many a second. Beyond it
# they wait in the listen backlog, and a client that waits for its greeting (as rltui's
# do) waits without using CPU: a loop of connects cannot keep the machine busy through us.
ACCEPTS_PER_SECOND = 20.0
ACCEPT_BURST = MAX_CLIENTS
# Connections taken from the backlog, greeted or not: a whole backlog at once, then a whole
# backlog a second. A storm of connects that hang up at once is closed unserved, and this
# rate is what bounds it: the storm's clients find the backlog full (they wait in
# `connect`, or are refused at once), so its cost, ours and theirs, stays small; and the
# backlog it leaves behind is gone within a second of its end, reaching the client queued
# after it.
CONNECTIONS_PER_SECOND = float(LISTEN_BACKLOG)
CONNECTION_BURST = LISTEN_BACKLOG
COMMANDS_PER_SECOND = 20.0  # commands passed to the session, all clients together
COMMAND_BURST = 50  # commands at once before COMMANDS_PER_SECOND applies
# New connections greeted per turn of the loop: small turns keep the CPU budget
# fine-grained and let every client have its turn.
ACCEPTS_PER_TURN = 16
CLOSES_PER_TURN = 256  # connections closed unserved per turn (see `_admit_one`)
# The least time the listener stays off the selector once an allowance is spent, so that
# under a storm connections are taken in batches, not one turn of the loop each.
LISTEN_PAUSE = 0.05
_LISTEN, _WAKE = "listen", "wake"


class ControlServerError(OSError):
    """The run cannot listen; the message is one line for the user."""


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
        connections_per_second: float = CONNECTIONS_PER_SECOND,
    ):
        self.session = session
        self.run_dir = Path(os.path.abspath(run_dir))
        self.max_clients = max_clients
        self.cpu_share, self.cpu_burst = cpu_share, cpu_burst
        self.path: Path | None = None
        self._pointer: Path | None = None
        self._inode: int | None = None
        self._inbox: collections.deque[tuple[str, Any]] = collections.deque()  # from the session thread
        self._selector = selectors.DefaultSelector()
        # The server's parts; only the server thread touches them.
        self._clients = ConnectedClients(self._selector, history=history, max_queued=max_queued,
                                         records_per_message=records_per_message)
        self._feed = RunFeed(session, self._clients, run_dir=self.run_dir, config=dict(config or {}),
                             history=history, events=events)
        self._requests = ClientRequests(session, self._clients, self._feed, post=self._post,
                                        on_internal_error=self._internal_error,
                                        commands_per_second=commands_per_second, command_burst=command_burst)
        self._listen: socket.socket | None = None
        self._wake_r, self._wake_w = socket.socketpair()
        for end in (self._wake_r, self._wake_w):
            end.setblocking(False)
        self._thread = threading.Thread(target=self._serve, name="rltui-control", daemon=True)
        self._stopping = threading.Event()
        self._flush_seconds = 1.0
        self._serving = False
        self._cpu_credit, self._cpu_mark = cpu_burst, (0.0, 0.0)
        self._accept_tokens = Allowance(accepts_per_second, accept_burst)
        self._connection_tokens = Allowance(connections_per_second, CONNECTION_BURST)
        self._listen_paused_until: float | None = None  # out of accepts: the listener is off the selector
        self.last_internal_error: str | None = None  # a bug that cost one message or client, not the server

    # --- lifecycle (the launching thread) ---------------------------------------------------
    def start(self) -> Path:
        """Listen and serve; the socket's path. ControlServerError if it cannot."""
        self._feed.describe_run()
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

    def _internal_error(self, err: Exception) -> None:
        self.last_internal_error = repr(err)[:200]

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
                self._drain_inbox()
                for key, mask in ready:
                    self._ready(key, mask)
                for client in list(self._clients.lines_waiting):
                    self._guarded(client, self._requests.answer_lines)
                self._throttle()
            self._drain_inbox()
            self._guarded(None, lambda _: self._accept_backlog())
            self._flush_all(time.monotonic() + self._flush_seconds)
        finally:
            self._serving = False
            self._shutdown()

    def _select_timeout(self) -> float | None:
        if self._clients.lines_waiting:
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

    def _drain_inbox(self) -> None:
        """Pass on what the session thread posted: its callbacks, copies of the parameters."""
        while self._inbox:
            kind, payload = self._inbox.popleft()
            try:
                if kind == "params":
                    self._requests.send_params(*payload)
                else:
                    self._feed.publish(kind, payload)
            except Exception as err:  # noqa: BLE001 - one unexpected item is skipped; the server goes on
                self._internal_error(err)

    def _clear_wake(self) -> None:
        with contextlib.suppress(OSError):  # BlockingIOError once empty
            while self._wake_r.recv(4096):
                pass

    def _ready(self, key: selectors.SelectorKey, mask: int) -> None:
        if key.data == _LISTEN:
            self._guarded(None, lambda _: self._accept())
        elif key.data != _WAKE:
            client: Client = key.data
            if mask & selectors.EVENT_READ:
                self._guarded(client, self._read)
            if mask & selectors.EVENT_WRITE:
                self._guarded(client, self._clients.send)

    def _guarded(self, client: Client | None, work) -> None:
        """`work(client)`; a bug in it costs that client its connection, never the others
        theirs, and never the server."""
        if client is not None and client not in self._clients:
            return
        try:
            work(client)
        except Exception as err:  # noqa: BLE001 - see the docstring
            self._internal_error(err)
            if client is not None:
                self._clients.drop(client)

    def _accept(self) -> None:
        greeted = closed = 0
        while greeted < ACCEPTS_PER_TURN and closed < CLOSES_PER_TURN:  # the rest wait for the next turn
            # Whether the next is greeted or closed is known only once it is accepted.
            allowances = (self._accept_tokens, self._connection_tokens)
            if not all(allowance.available() for allowance in allowances):
                # The rest wait in the listen backlog; the listener leaves the selector
                # until an accept is allowed again (it would report ready all the while).
                self._selector.unregister(self._listen)
                self._listen_paused_until = max(time.monotonic() + LISTEN_PAUSE,
                                                *(allowance.next_at() for allowance in allowances))
                return
            outcome = self._admit_one()
            if outcome is None:
                return
            self._connection_tokens.take()
            if outcome:
                greeted += 1
                self._accept_tokens.take()
            else:
                closed += 1

    def _accept_backlog(self) -> None:
        """At the end: admit everyone who connected and was not yet accepted. Closing the
        listener would reset them unread; admitted, they receive the final state."""
        for _ in range(self.max_clients + LISTEN_BACKLOG):
            if self._admit_one() is None:
                return

    def _admit_one(self) -> bool | None:
        """Accept one waiting connection and greet it (True), or close it unserved (False:
        gone already, another user's, one too many); None when none waits. Only a greeting
        costs an accept allowance: a connection whose client has already hung up (a storm
        of connects leaves the backlog full of them) is closed unread and ungreeted, so a
        client queued behind a storm is reached as soon as the storm's backlog is gone."""
        try:
            conn, _ = self._listen.accept()
        except (BlockingIOError, InterruptedError):
            return None
        except OSError:
            return None  # e.g. out of file descriptors: the client sees a refusal
        try:
            if hung_up(conn) or not same_user(conn):
                conn.close()
                return False
            conn.setblocking(False)
            if len(self._clients) >= self.max_clients:
                self._refuse(conn)
                return False
        except OSError:
            conn.close()
            return False
        self._drain_inbox()  # its greeting holds all posted before it came, also mid-turn
        client = self._clients.add(conn)
        self._guarded(client, self._feed.greet)
        return True

    def _refuse(self, conn: socket.socket) -> None:
        """One line saying why, then the connection closes (the line fits in an empty
        socket buffer, and the peer reads it before the end of the stream)."""
        with contextlib.suppress(OSError):
            conn.send(protocol.encode(protocol.error_message(
                f"too many clients: this run serves {self.max_clients} at once; detach one and try again")))
        close_quietly(conn)

    def _read(self, client: Client) -> None:
        if client.closing or client in self._clients.lines_waiting:
            return  # what it sent already waits its turn; the rest waits in the socket
        try:
            data = client.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:  # gone; a message it had not finished is dropped unseen
            self._clients.drop(client)
            return
        client.inbox += data
        self._requests.answer_lines(client)

    def _flush_all(self, deadline: float) -> None:
        """At the end: give clients a moment to receive the final state."""
        while any(c.pending for c in self._clients) and time.monotonic() < deadline:
            for key, mask in self._selector.select(timeout=max(0.0, deadline - time.monotonic())):
                if isinstance(key.data, Client) and key.data in self._clients:
                    (self._clients.send if mask & selectors.EVENT_WRITE else self._read)(key.data)

    def _shutdown(self) -> None:
        for client in self._clients:
            self._clients.drop(client)
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
