"""The control server's clients: each client's connection and what it is owed, and the
queueing and sending of it (`ConnectedClients`, which the server holds).

What a client is owed waits in its queue, in order: encoded messages (shared by every
client sent them), the snapshots it fell behind on, merged (`OwedSnapshot`), and the
policy's parameters, sent a piece at a time (`OwedParams`). Whole messages waiting for one
client are bounded by `max_queued` bytes; past it the client is disconnected.

Everything here runs on the server thread.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import select
import selectors
import socket
import sys
from collections.abc import Iterable, Iterator
from typing import Any

from rltui.control import params_transfer, protocol, session_messages

# What is read and discarded of a client's unread input before its connection closes: a
# socket closed with input unread resets the connection, and its peer reads a reset where
# an orderly end of stream was due. Bounded, so a client still sending cannot hold us.
DISCARD_ON_CLOSE = 1 << 20


def close_quietly(sock: socket.socket) -> None:
    """Close `sock` (non-blocking) so its peer reads everything sent, then an end of stream."""
    discarded = 0
    with contextlib.suppress(OSError):  # BlockingIOError once nothing is left
        while discarded < DISCARD_ON_CLOSE and (data := sock.recv(65536)):
            discarded += len(data)
    sock.close()


def hung_up(sock: socket.socket) -> bool:
    """Whether the peer of `sock` (blocking or not: this never waits) has closed its end,
    whatever it sent first: nothing it could be sent would be read. One that only shut
    down its sending side may still read, and has not hung up."""
    if _POLL_SEES_HANG_UPS:
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        return any(events & (select.POLLHUP | select.POLLERR) for _, events in poller.poll(0))
    # Elsewhere the peer's close shows only as the end of its stream, once what it sent is read.
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except (BlockingIOError, InterruptedError):
        return False  # connected, nothing sent yet
    except OSError:
        return True  # reset


# Linux reports a stream socket whose peer has closed both directions as POLLHUP, sent
# data unread or not (the same kernels have POLLRDHUP, for a peer that only stopped sending).
_POLL_SEES_HANG_UPS = sys.platform.startswith("linux") and hasattr(select, "POLLRDHUP")


@dataclasses.dataclass(eq=False)
class OwedSnapshot:
    """Snapshots a client has not been sent yet, merged: the latest scalars and the records
    of all of them. A client that reads slowly gets one of these, not a backlog."""

    head: dict[str, Any]
    records: collections.deque[bytes]


@dataclasses.dataclass(eq=False)
class OwedParams:
    """The policy's parameters owed to one client: its pieces (shared by every client sent
    the same copy) go out one message at a time, as it reads."""

    request_id: Any
    update: int
    pieces: list[str]
    size: int
    sent: int = 0


@dataclasses.dataclass(eq=False)
class Client:
    sock: socket.socket
    inbox: bytearray = dataclasses.field(default_factory=bytearray)
    # What it is owed, in order: encoded messages (shared between clients), OwedSnapshot and OwedParams.
    queue: collections.deque = dataclasses.field(default_factory=collections.deque)
    queued: int = 0  # bytes of the encoded messages in `queue`
    sending: memoryview | None = None  # the unsent rest of the message being sent
    owed: OwedSnapshot | None = None  # the OwedSnapshot in `queue` that later snapshots merge into
    events: int = selectors.EVENT_READ
    closing: bool = False  # answered a fatal error: close once the queue is sent
    params_pending: bool = False  # a parameters request of its is being answered

    @property
    def pending(self) -> bool:
        return self.sending is not None or bool(self.queue)


class ConnectedClients:
    """The clients connected now, each registered with the server's selector, and the
    sending of what each is owed."""

    def __init__(self, selector: selectors.BaseSelector, *, history: int, max_queued: int,
                 records_per_message: int):
        self._selector = selector
        self._history = history  # the most records a client is owed at once
        self._max_queued = max_queued
        self._records_per_message = records_per_message
        self._clients: set[Client] = set()
        self.lines_waiting: set[Client] = set()  # clients with whole lines not yet answered

    def __len__(self) -> int:
        return len(self._clients)

    def __contains__(self, client: object) -> bool:
        return client in self._clients

    def __iter__(self) -> Iterator[Client]:
        """The clients of now: dropping one meanwhile is safe."""
        return iter(list(self._clients))

    def add(self, conn: socket.socket) -> Client:
        """A new client on `conn` (non-blocking), registered with the selector."""
        client = Client(conn)
        self._clients.add(client)
        self._selector.register(conn, client.events, client)
        return client

    def owe_snapshot(self, client: Client, head: dict[str, Any], records: Iterable[bytes]) -> None:
        """Queue a snapshot that goes out a piece at a time, as fast as `client` reads;
        later snapshots merge into it. The caller sends."""
        client.owed = OwedSnapshot(head, collections.deque(records, maxlen=self._history))
        client.queue.append(client.owed)

    def offer_snapshot(self, client: Client, head: dict[str, Any], records: list[bytes], line: bytes) -> None:
        if client.closing:
            return
        if client.owed is not None:  # behind: merge into what it is owed
            client.owed.head = head
            client.owed.records.extend(records)
        elif not client.pending:  # caught up: the line every such client shares
            self.queue(client, line)
        else:
            self.owe_snapshot(client, head, records)
            self.send(client)

    def queue(self, client: Client, data: bytes, *, send: bool = True) -> None:
        """Queue `data` for `client` and send what its socket takes (unless `send` is
        False: the caller queues more and sends once)."""
        if client not in self._clients:
            return
        if client.queued + len(data) > self._max_queued:
            self.drop(client)  # not reading at all: it can attach again and catch up
            return
        client.queue.append(data)
        client.queued += len(data)
        if send:
            self.send(client)

    def owe_params(self, client: Client, owed: OwedParams) -> None:
        client.queue.append(owed)
        self.send(client)

    def params_in_flight(self) -> dict[int, int]:
        """The parameter copies being sent to clients: their size by id of their pieces."""
        return {id(item.pieces): item.size for client in self._clients for item in client.queue
                if isinstance(item, OwedParams)}

    def _next_message(self, client: Client) -> bytes:
        item = client.queue[0]
        if isinstance(item, bytes):
            client.queue.popleft()
            client.queued -= len(item)
            return item
        if isinstance(item, OwedParams):
            data = protocol.encode(params_transfer.params_message(item.request_id, item.update, item.sent, item.pieces,
                                                           item.size))
            item.sent += 1
            if item.sent == len(item.pieces):
                client.queue.popleft()
                client.params_pending = False
            return data
        count = min(self._records_per_message, len(item.records))
        piece = [item.records.popleft() for _ in range(count)]
        if not item.records:
            client.queue.popleft()
            if client.owed is item:
                client.owed = None
        return session_messages.snapshot_line(item.head, piece)

    def send(self, client: Client) -> None:
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
                self.drop(client)
                return
            client.sending = client.sending[sent:] if sent < len(client.sending) else None
            if client.sending is not None:
                break
        if client.closing and not client.pending:
            self.drop(client)
            return
        wanted = (0 if client.closing else selectors.EVENT_READ) | (selectors.EVENT_WRITE if client.pending else 0)
        if wanted != client.events:
            client.events = wanted
            self._selector.modify(client.sock, wanted, client)

    def drop(self, client: Client) -> None:
        if client not in self._clients:
            return
        self._clients.discard(client)
        self.lines_waiting.discard(client)
        with contextlib.suppress(KeyError, ValueError, OSError):
            self._selector.unregister(client.sock)
        close_quietly(client.sock)
        client.queue.clear()
        client.sending = client.owed = None
