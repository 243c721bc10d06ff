"""The control protocol's wire format: one JSON object per line (UTF-8, `\\n`-terminated),
each with a `type`. Plain data only: nothing is ever unpickled or evaluated.

Server to client: `hello` (first, once), `snapshot`, `state`, `event`, `ok`, `error`.
Client to server: `command`, optionally `hello` (to check the protocol version).
The README ("Control protocol") documents every field.
"""

from __future__ import annotations

import json
import math
from typing import Any, Mapping

from rltui.session.commands import Command, Pause, Resume, Rollback, SaveCheckpoint, SetHParams, Stop
from rltui.session.events import SessionEvent, SessionState
from rltui.session.metrics import TRAINER_METRICS, UpdateRecord

PROTOCOL_VERSION = 1
MAX_LINE_BYTES = 64 * 1024  # a client message longer than this is refused

_COMMANDS: dict[str, type] = {
    "pause": Pause,
    "resume": Resume,
    "save": SaveCheckpoint,
    "rollback": Rollback,
    "stop": Stop,
}
_COMMAND_NAMES = {cls: name for name, cls in _COMMANDS.items()}


class ProtocolError(ValueError):
    """A message that does not follow the protocol; the text goes back in an `error`."""


# --- lines ----------------------------------------------------------------------------------
def jsonable(value: Any) -> Any:
    """Plain JSON data: non-finite floats become null (strict JSON has no NaN), tuples
    lists, NumPy scalars numbers, anything else its string."""
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if hasattr(value, "item"):  # NumPy scalar
        return jsonable(value.item())
    return str(value)


def encode(message: Mapping[str, Any]) -> bytes:
    return (json.dumps(jsonable(message), allow_nan=False, separators=(",", ":")) + "\n").encode("utf-8")


def decode(line: bytes) -> dict[str, Any]:
    """One line (without or with its newline) to a message; ProtocolError if it is not a
    JSON object with a string `type`."""
    try:
        message = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError:
        raise ProtocolError("not UTF-8") from None
    except ValueError as err:
        raise ProtocolError(f"not JSON: {err}") from None
    if not isinstance(message, dict):
        raise ProtocolError("expected a JSON object")
    if not isinstance(message.get("type"), str):
        raise ProtocolError('missing "type"')
    return message


# --- commands (client to server) ------------------------------------------------------------
def command_message(command: Command) -> dict[str, Any]:
    if isinstance(command, SetHParams):
        return {"type": "command", "command": "set_hparams", "changes": dict(command.changes)}
    return {"type": "command", "command": _COMMAND_NAMES[type(command)]}


def command_from_message(message: Mapping[str, Any]) -> Command:
    """The command a `command` message asks for; ProtocolError naming what is wrong. Values
    are checked for type here; the session checks hyperparameter ranges."""
    name = message.get("command")
    if name == "set_hparams":
        changes = message.get("changes")
        if not isinstance(changes, dict) or not changes:
            raise ProtocolError('set_hparams needs "changes": an object of name -> number')
        for key, value in changes.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ProtocolError(f"set_hparams: {key}: expected a number, got {value!r}")
        return SetHParams(changes)
    if name in _COMMANDS:
        return _COMMANDS[name]()
    known = ", ".join([*_COMMANDS, "set_hparams"])
    raise ProtocolError(f"unknown command {name!r}; known: {known}")


# --- session data (server to client) --------------------------------------------------------
def record_from_json(data: Mapping[str, Any]) -> UpdateRecord:
    """The inverse of `UpdateRecord.to_json` (null back to NaN)."""
    values = {}
    for name in TRAINER_METRICS:
        value = data.get(name)
        values[name] = math.nan if value is None else float(value)
    return UpdateRecord(
        update=int(data["update"]),
        env_steps=int(data["env_steps"]),
        wall_time=float(data["wall_time"]),
        sps=float(data["sps"]),
        values=values,
        per_seed={
            name: tuple(math.nan if v is None else float(v) for v in seeds)
            for name, seeds in (data.get("seeds") or {}).items()
            if name in TRAINER_METRICS and isinstance(seeds, list)
        },
    )


def snapshot_message(snapshot: Any, records: tuple[UpdateRecord, ...]) -> dict[str, Any]:
    """A `MetricsSnapshot`'s scalars plus `records`: the update records this client has
    not seen yet (the whole kept history on connect, then each chunk's new ones)."""
    return {
        "type": "snapshot",
        "state": snapshot.state.value,
        "update": snapshot.update,
        "total_updates": snapshot.total_updates,
        "env_steps": snapshot.env_steps,
        "total_env_steps": snapshot.total_env_steps,
        "elapsed": round(snapshot.elapsed, 4),
        "sps": round(snapshot.sps, 1),
        "hparams": dict(snapshot.hparams),
        "records": [record.to_json() for record in records],
    }


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


def error_message(text: str, request_id: Any = None) -> dict[str, Any]:
    return {"type": "error", "error": text, "id": request_id}
