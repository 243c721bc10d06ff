"""What the control server sends its clients of the run (`ControlServer`'s share of it):
the greeting a new client gets (who and where the run is, its recent history and events),
and each callback the session posts, passed on to every client as it comes.

A mixin of `ControlServer`: it runs on the server thread, drains what the session thread
posted, and keeps what a new client is sent first.
"""

from __future__ import annotations

import collections
import os
import time
from typing import Any, NamedTuple

from rltui import __version__
from rltui.control import protocol, session_messages
from rltui.control.clients import Client, OwedSnapshot
from rltui.session.events import SessionState


class KeptRecord(NamedTuple):
    """An update record of the recent history, encoded once for every client."""

    update: int
    json: bytes


class RunFeed:
    def _greet(self, client: Client) -> None:
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
        if client not in self._clients:
            return  # hung up: what follows would be built for nobody
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
                self._queue(client, self._history_line[1], send=False)
            client.owed = OwedSnapshot(head, collections.deque((kept.json for kept in self._history),
                                                               maxlen=self.history))
            client.queue.append(client.owed)
        for data in self._events:
            self._queue(client, data, send=False)
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
            self._history.extend(KeptRecord(r.update, data)
                                 for r, data in zip(payload.new_records, records, strict=True))
            line = session_messages.snapshot_line(head, records)
            for client in list(self._clients):
                self._offer_snapshot(client, head, records, line)
            return
        if kind == "state":
            if payload[0] is SessionState.RUNNING and "actions" not in self._describe:
                # Built now: the run's env (its action space) is known to clients that attach from here on.
                self._describe = protocol.jsonable(self.session.describe())
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
