"""The session's data as control-protocol messages (server to client), and a client's
reading of them: snapshots with their update records, states, events and the run's history.
An update record's JSON is the session's own (`UpdateRecord.to_json`, `record_from_json`):
metrics.jsonl holds the same."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from rltui.control.protocol import ProtocolError, encode, jsonable
from rltui.control.protocol_population import population_json
from rltui.session.events import SessionEvent, SessionState
from rltui.session.metrics import UpdateRecord


def snapshot_head(snapshot: Any) -> dict[str, Any]:
    """A snapshot message without its records (`snapshot_line` adds them)."""
    head = {
        "type": "snapshot",
        "state": snapshot.state.value,
        "update": snapshot.update,
        "total_updates": snapshot.total_updates,
        "env_steps": snapshot.env_steps,
        "total_env_steps": snapshot.total_env_steps,
        "elapsed": round(snapshot.elapsed, 4),
        "sps": round(snapshot.sps, 1),
        "hparams": dict(snapshot.hparams),
    }
    population = getattr(snapshot, "population", None)
    if population is not None:  # absent for one agent: a population-unaware client sees what it always did
        head["population"] = population_json(population)
    return head


def encode_record(record: UpdateRecord) -> bytes:
    """One update record as the JSON text a snapshot's `records` list holds: encoded once,
    shared by every client's messages."""
    return json.dumps(jsonable(record.to_json()), allow_nan=False, separators=(",", ":")).encode("utf-8")


def snapshot_line(head: Mapping[str, Any], records: Iterable[bytes]) -> bytes:
    """A whole snapshot line: `head` (from `snapshot_head`) with already encoded records."""
    body = encode(head).rstrip(b"\n")
    return body[:-1] + b',"records":[' + b",".join(records) + b"]}\n"


def state_message(state: SessionState, message: str | None) -> dict[str, Any]:
    return {"type": "state", "state": state.value, "message": message}


def event_message(event: SessionEvent) -> dict[str, Any]:
    return {"type": "event", **event.to_json()}


def event_from_message(message: Mapping[str, Any]) -> SessionEvent:
    data = message.get("data") or {}
    return SessionEvent(
        kind=str(message["kind"]),
        update=int(message["update"]),
        message=str(message["message"]),
        wall_time=float(message["wall_time"]),
        data=data if isinstance(data, dict) else {},
    )


def parse_state(value: Any) -> SessionState:
    try:
        return SessionState(value)
    except ValueError:
        raise ProtocolError(f"unknown state {value!r}") from None


HISTORY_BUCKETS = 512  # the curves a client is sent on connect: enough for any chart's width


def history_message(curves: Any) -> dict[str, Any]:
    """The whole run's curves (rltui.session.history.Curves), sent once on connect before
    the first snapshot: the records that follow and are already in them count only in the
    recent values."""
    return {"type": "history", "curves": curves.rebin(HISTORY_BUCKETS).to_json()}
