"""What the control server sends its clients of the run (`RunFeed`, which the server
holds): the greeting a new client gets (who and where the run is, its recent history and
events), and each callback the session posts, passed on to every client as it comes.

Everything here runs on the server thread: the server drains what the session thread
posted and hands it to `publish`.
"""

from __future__ import annotations

import collections
import os
import time
from pathlib import Path
from typing import Any

from rltui import __version__
from rltui.control import protocol, session_messages
from rltui.control.clients import Client, ConnectedClients
from rltui.session.events import SessionState
from rltui.session.interface import SessionClient
from rltui.session.metrics import MetricsSnapshot, UpdateRecord


class KeptRecord:
    """An update record of the recent history, encoded once for every client, and only once
    a client needs it: with none attached most records leave the history unread."""

    __slots__ = ("record", "_json")

    def __init__(self, record: UpdateRecord):
        self.record = record
        self._json: bytes | None = None

    @property
    def update(self) -> int:
        return self.record.update

    @property
    def json(self) -> bytes:
        if self._json is None:
            self._json = session_messages.encode_record(self.record)
        return self._json


class RunFeed:
    """The run as clients are told it: what a new client is sent first, kept up to date
    from the session's callbacks, and those callbacks passed on to every client."""

    def __init__(self, session: SessionClient, clients: ConnectedClients, *, run_dir: Path,
                 config: dict[str, Any], history: int, events: int):
        self._session = session
        self._clients = clients
        self._run_dir = run_dir
        self._config = config
        self.state: SessionState = session.state  # as the session last posted it
        self._state_message: str | None = None
        self.latest_head: dict[str, Any] | None = None  # of the latest snapshot
        self._latest_at = 0.0  # when it came (time.monotonic)
        self._latest_curves = None  # the whole run's curves, from the latest snapshot
        self._history_line: tuple[Any, bytes] | None = None  # (curves, their history message)
        self._history: collections.deque[KeptRecord] = collections.deque(maxlen=history)
        self._events: collections.deque[bytes] = collections.deque(maxlen=events)
        self._describe: dict = {}

    def describe_run(self) -> None:
        """Take the session's description of the run (env, algorithm, devices) anew."""
        self._describe = protocol.jsonable(self._session.describe())

    def greet(self, client: Client) -> None:
        """What a new client needs to show the run: who and where it is, the recent
        history once, the recent events. Live messages follow."""
        hparams = self._session.hparams.as_floats()
        self._clients.queue(client, protocol.encode({
            "type": "hello",
            "protocol": protocol.PROTOCOL_VERSION,
            "rltui": __version__,
            "pid": os.getpid(),
            "run_dir": str(self._run_dir),
            "state": self.state.value,
            "message": self._state_message,
            "total_updates": self._session.total_updates,
            "hparams": hparams,
            "describe": self._describe,
            "config": self._config,
        }))
        if client not in self._clients:
            return  # hung up: what follows would be built for nobody
        if self.latest_head is not None:
            # The hyperparameters of now, not of the last chunk: edits made since (while
            # paused) would otherwise show as undone until the next chunk. Owed, not
            # encoded: it goes out as fast as the client reads, a piece at a time.
            head = {**self.latest_head, "hparams": hparams}
            if not self.state.is_final:
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
                self._clients.queue(client, self._history_line[1], send=False)
            self._clients.owe_snapshot(client, head, (kept.json for kept in self._history))
        for data in self._events:
            self._clients.queue(client, data, send=False)
        self._clients.send(client)

    def publish(self, kind: str, payload: Any) -> None:
        """One callback of the session's ("metrics", "state" or "event"), kept for later
        clients and passed on to every client."""
        if kind == "metrics":
            self._publish_snapshot(payload)
            return
        if kind == "state":
            if payload[0] is SessionState.RUNNING and "actions" not in self._describe:
                # Built now: the run's env (its action space) is known to clients that attach from here on.
                self.describe_run()
            self.state, self._state_message = payload
            data = protocol.encode(session_messages.state_message(*payload))
        else:
            data = protocol.encode(session_messages.event_message(payload))
            self._events.append(data)
            if payload.kind == "rolled back":  # a client attaching later sees the history the run goes on from
                while self._history and self._history[-1].update > payload.update:
                    self._history.pop()
        rolled_back = kind == "event" and payload.kind == "rolled back"
        for client in self._clients:
            if rolled_back:
                # What it is owed from before the rollback goes out before this event (which
                # tells it to forget those updates); what comes after must follow the event.
                client.owed = None
            if not client.closing:
                self._clients.queue(client, data)

    def _publish_snapshot(self, snapshot: MetricsSnapshot) -> None:
        head = session_messages.snapshot_head(snapshot)
        kept = [KeptRecord(record) for record in snapshot.new_records]
        self.latest_head = head
        self._latest_curves = snapshot.curves
        self._latest_at = time.monotonic()
        self._history.extend(kept)
        if not len(self._clients):
            return  # encoded when a client attaches, those still in the history then
        records = [record.json for record in kept]
        line = session_messages.snapshot_line(head, records)
        for client in self._clients:
            self._clients.offer_snapshot(client, head, records, line)
