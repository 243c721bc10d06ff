"""The control protocol's line format and the client's requests: one JSON object per line
(UTF-8, `\\n`-terminated), each with a `type`. Plain data only: nothing is ever unpickled or
evaluated.

Server to client: `hello` (first, once), `snapshot`, `state`, `event`, `ok`, `error`, and
`params` (only in answer to a `params` request, in pieces).
Client to server: `command`, `params` (the policy's parameters, for the watch view),
optionally `hello` (to check the protocol version).
docs/control-protocol.md documents every field. This module holds the lines, the errors,
the requests and the commands; `session_messages` holds the session's data (snapshots,
states, events, history), `protocol_population` a population's table in a snapshot, and
`params_transfer` the parameters' pieces.

A client's line is data from outside: `parse_request` checks every field it uses (types,
ranges, sizes) before anything acts on it, and any failure is a `ProtocolError`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, NamedTuple

from rltui.config.sweep import MAX_AGENTS
from rltui.session.commands import (
    CloneMember,
    Command,
    FreezeMembers,
    Pause,
    Resume,
    Rollback,
    SaveCheckpoint,
    SetHParams,
    Stop,
)
from trainers.hparams import LIVE_HPARAMS

PROTOCOL_VERSION = 1
MAX_LINE_BYTES = 64 * 1024  # a client message longer than this is refused
MAX_ID_CHARS = 200  # a request id is echoed in every reply: a name, not a payload
QUOTE_CHARS = 60  # a value quoted back in an error is shortened to this

_COMMANDS: dict[str, type] = {
    "pause": Pause,
    "resume": Resume,
    "save": SaveCheckpoint,
    "rollback": Rollback,
    "stop": Stop,
}
_COMMAND_NAMES = {cls: name for name, cls in _COMMANDS.items()}
# Commands with fields, each read by its own function below.
_FIELD_COMMANDS: dict[type, str] = {SetHParams: "set_hparams", FreezeMembers: "freeze", CloneMember: "clone"}
# A population has at most this many members (each has at least one agent): a longer list
# of members, or a larger index, can name none of them.
MAX_MEMBERS = MAX_AGENTS


class ProtocolError(ValueError):
    """A message that does not follow the protocol; the text goes back in an `error`,
    with `request_id` (the request's id, once it has been read and found valid)."""

    def __init__(self, text: str, request_id: Any = None):
        super().__init__(text)
        self.request_id = request_id


class Request(NamedTuple):
    """A client's message, checked: a `hello` (command None) or a `command`."""

    id: str | int | float | None
    kind: str  # "hello", "command" or "params"
    command: Command | None


def quote(value: Any, limit: int = QUOTE_CHARS) -> str:
    """A value as an error message may show it: scalars as repr, shortened; containers
    by kind only (their repr could be huge or nested past the recursion limit)."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"an integer of {len(str(abs(value)))} digits"  # parsing allows at most 4300
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


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


# --- commands (client to server) ------------------------------------------------------------
def command_message(command: Command) -> dict[str, Any]:
    message: dict[str, Any] = {"type": "command", "command": command_name(command)}
    if isinstance(command, SetHParams):
        message["changes"] = dict(command.changes)
        if command.members is not None:
            message["members"] = list(command.members)
    elif isinstance(command, FreezeMembers):
        message.update(members=list(command.members), frozen=command.frozen)
    elif isinstance(command, CloneMember):
        message.update(source=command.source, targets=list(command.targets), factor=command.factor)
    return message


def command_name(command: Command) -> str:
    return _FIELD_COMMANDS.get(type(command)) or _COMMAND_NAMES[type(command)]


def _number(key: str, value: Any) -> float:
    """A JSON number as a finite float; ProtocolError otherwise (an integer too large for
    a float included)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ProtocolError(f"set_hparams: {key}: expected a number, got {quote(value)}")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise ProtocolError(f"set_hparams: {key}: expected a finite number, got {quote(value)}")
    return number


def _is_index(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < MAX_MEMBERS


def _member(command: str, field: str, value: Any) -> int:
    if not _is_index(value):
        raise ProtocolError(
            f'{command}: "{field}": expected a member index (an integer from 0 to {MAX_MEMBERS - 1}), '
            f"got {quote(value)}")
    return value


def _members(command: str, field: str, value: Any) -> tuple[int, ...]:
    """A non-empty list of member indices. Only the form is checked here: whether each
    names one of the run's members is the session's (or the server's) check."""
    if not isinstance(value, list):
        raise ProtocolError(f'{command}: "{field}": expected a list of member indices, got {quote(value)}')
    if not 1 <= len(value) <= MAX_MEMBERS:
        raise ProtocolError(
            f'{command}: "{field}": expected 1 to {MAX_MEMBERS} member indices, got {len(value)}')
    return tuple(_member(command, field, item) for item in value)


def _set_hparams(message: Mapping[str, Any]) -> SetHParams:
    changes = message.get("changes")
    if not isinstance(changes, dict) or not changes:
        raise ProtocolError('set_hparams needs "changes": an object of name -> number')
    numbers = {}
    for key, value in changes.items():
        if key not in LIVE_HPARAMS:
            raise ProtocolError(
                f"set_hparams: {quote(key)}: not editable while training; editable: {', '.join(LIVE_HPARAMS)}")
        numbers[key] = _number(key, value)
    members = message.get("members")
    return SetHParams(numbers, None if members is None else _members("set_hparams", "members", members))


def _freeze(message: Mapping[str, Any]) -> FreezeMembers:
    if "members" not in message:
        raise ProtocolError('freeze needs "members": a list of member indices')
    members = _members("freeze", "members", message["members"])
    frozen = message.get("frozen", True)
    if not isinstance(frozen, bool):
        raise ProtocolError(f'freeze: "frozen": expected true or false, got {quote(frozen)}')
    return FreezeMembers(members, frozen)


def _clone(message: Mapping[str, Any]) -> CloneMember:
    for field in ("source", "targets"):
        if field not in message:
            raise ProtocolError('clone needs "source" (a member index) and "targets" (a list of member indices)')
    source = _member("clone", "source", message["source"])
    targets = _members("clone", "targets", message["targets"])
    factor = message.get("factor", 1.0)
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 0 < float_or_inf(factor) < math.inf:
        raise ProtocolError(f'clone: "factor": expected a positive finite number, got {quote(factor)}')
    return CloneMember(source, targets, float(factor))




def float_or_inf(value: int | float) -> float:
    """A JSON number as a float: inf for an integer too large for one."""
    try:
        return float(value)
    except OverflowError:
        return math.inf


_READERS = {"set_hparams": _set_hparams, "freeze": _freeze, "clone": _clone}


def command_from_message(message: Mapping[str, Any]) -> Command:
    """The command a `command` message asks for; ProtocolError naming what is wrong. Names
    and value types are checked here (numbers arrive as finite floats, member indices as
    non-negative integers); the session checks hyperparameter ranges and which members
    the run has."""
    name = message.get("command")
    if isinstance(name, str) and name in _READERS:
        return _READERS[name](message)
    if isinstance(name, str) and name in _COMMANDS:
        return _COMMANDS[name]()
    known = ", ".join([*_COMMANDS, *_READERS])
    raise ProtocolError(f"unknown command {quote(name)}; known: {known}")


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
