"""The control protocol's line format and the client's requests: one JSON object per line
(UTF-8, `\\n`-terminated), each with a `type`. Plain data only: nothing is ever unpickled or
evaluated.

Server to client: `hello` (first, once), `snapshot`, `state`, `event`, `ok`, `error`, and
`params` (only in answer to a `params` request, in pieces).
Client to server: `command`, `params` (the policy's parameters, for the watch view),
optionally `hello` (to check the protocol version).
docs/control-protocol.md documents every field. This module holds the lines and the
requests; a command's JSON is the session's (`rltui.session.command_json`, which a
multi-process run's processes exchange commands in too), `session_messages` holds the
session's data (snapshots, states, events, history), `protocol_population` a population's
table in a snapshot, and `params_transfer` the parameters' pieces.

A client's line is data from outside: `parse_request` checks every field it uses (types,
ranges, sizes) before anything acts on it, and any failure is a `ProtocolError`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, NamedTuple

from rltui.session.command_json import ProtocolError, command_from_message, quote
from rltui.session.commands import Command

PROTOCOL_VERSION = 1
MAX_LINE_BYTES = 64 * 1024  # a client message longer than this is refused
MAX_ID_CHARS = 200  # a request id is echoed in every reply: a name, not a payload

class Request(NamedTuple):
    """A client's message, checked: a `hello` (command None) or a `command`."""

    id: str | int | float | None
    kind: str  # "hello", "command" or "params"
    command: Command | None


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


def _no_constants(name: str) -> Any:
    raise ProtocolError(f"not JSON: {name} is not a JSON number (strict JSON has no NaN or Infinity)")


def decode(line: bytes) -> dict[str, Any]:
    """One line (without or with its newline) to a message; ProtocolError if it is not a
    strict JSON object with a string `type`."""
    try:
        message = json.loads(line.decode("utf-8"), parse_constant=_no_constants)
    except UnicodeDecodeError:
        raise ProtocolError("not UTF-8") from None
    except RecursionError:
        raise ProtocolError("not accepted: nested too deeply") from None
    except ValueError as err:  # ProtocolError from _no_constants is one too
        raise ProtocolError(str(err) if isinstance(err, ProtocolError) else f"not JSON: {err}") from None
    if not isinstance(message, dict):
        raise ProtocolError("expected a JSON object")
    if not isinstance(message.get("type"), str):
        raise ProtocolError('missing "type"')
    return message


def _request_id(value: Any) -> str | int | float | None:
    if value is None or (isinstance(value, str) and len(value) <= MAX_ID_CHARS):
        return value
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if number and (isinstance(value, float) and math.isfinite(value) or isinstance(value, int) and abs(value) < 2**63):
        return value
    raise ProtocolError(f'"id": expected a string of at most {MAX_ID_CHARS} characters, a number or null, '
                        f"got {quote(value)}")


def parse_request(line: bytes) -> Request:
    """A client's line, checked field by field: ProtocolError (with the request's id
    where it was readable) for anything the protocol does not allow."""
    message = decode(line)
    request_id = _request_id(message.get("id"))
    try:
        kind = message["type"]
        if kind == "hello":
            version = message.get("protocol")
            if isinstance(version, bool) or not isinstance(version, int) or version != PROTOCOL_VERSION:
                raise ProtocolError(
                    f"protocol version {quote(version)} not supported; this run speaks {PROTOCOL_VERSION}")
            return Request(request_id, "hello", None)
        if kind == "params":
            return Request(request_id, "params", None)
        if kind != "command":
            raise ProtocolError(f"unknown message type {quote(kind)}; expected command, params or hello")
        return Request(request_id, "command", command_from_message(message))
    except ProtocolError as err:
        raise ProtocolError(str(err), request_id) from None


def error_message(text: str, request_id: Any = None) -> dict[str, Any]:
    return {"type": "error", "error": text, "id": request_id}
