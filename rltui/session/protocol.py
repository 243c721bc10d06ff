"""The control protocol's wire format: one JSON object per line (UTF-8, `\\n`-terminated),
each with a `type`. Plain data only: nothing is ever unpickled or evaluated.

Server to client: `hello` (first, once), `snapshot`, `state`, `event`, `ok`, `error`, and
`params` (only in answer to a `params` request, in pieces).
Client to server: `command`, `params` (the policy's parameters, for the watch view),
optionally `hello` (to check the protocol version).
docs/control-protocol.md documents every field.

A client's line is data from outside: `parse_request` checks every field it uses (types,
ranges, sizes) before anything acts on it, and any failure is a `ProtocolError`.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from rltui.population.sweep import MAX_AGENTS
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
from rltui.session.events import SessionEvent, SessionState
from rltui.session.metrics import RECORDED_METRICS, UpdateRecord
from rltui.session.population import TREND_LENGTH, MemberState, MemberView, PopulationView
from trainers.hparams import LIVE_HPARAMS, DynamicHParams

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
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 0 < _float(factor) < math.inf:
        raise ProtocolError(f'clone: "factor": expected a positive finite number, got {quote(factor)}')
    return CloneMember(source, targets, float(factor))


def _float(value: int | float) -> float:
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


# --- session data (server to client) --------------------------------------------------------
def record_from_json(data: Mapping[str, Any]) -> UpdateRecord:
    """The inverse of `UpdateRecord.to_json` (null back to NaN)."""
    values = {}
    for name in RECORDED_METRICS:
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
            if name in RECORDED_METRICS and isinstance(seeds, list)
        },
        per_member={
            name: tuple(math.nan if v is None else float(v) for v in members)
            for name, members in (data.get("members") or {}).items()
            if name in RECORDED_METRICS and isinstance(members, list)
        },
    )


def snapshot_message(snapshot: Any, records: tuple[UpdateRecord, ...]) -> dict[str, Any]:
    """A `MetricsSnapshot`'s scalars plus `records`: the update records this client has
    not seen yet (the whole kept history on connect, then each chunk's new ones)."""
    return {**snapshot_head(snapshot), "records": [record.to_json() for record in records]}


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


# --- a population's members (in a snapshot) ----------------------------------------------------
TREND_DIGITS = 6  # significant digits of a member's trend: a sparkline's points, not results


def _optional(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def population_json(view: PopulationView) -> dict[str, Any]:
    """A `PopulationView` as a snapshot carries it: `members[i]` is member i, its `values`
    in the order of `keys`."""
    return {
        "keys": list(view.keys),
        "num_seeds": view.num_seeds,
        "pbt_every_updates": view.pbt_every_updates,
        "members": [
            {
                "values": [float(member.values[key]) for key in view.keys],
                "state": member.state.value,
                "latest_return": _optional(member.latest_return),
                "best_return": _optional(member.best_return),
                "eval_return": _optional(member.eval_return),
                "trend": [float(f"{v:.{TREND_DIGITS}g}") if math.isfinite(v) else None for v in member.trend],
                "parent": member.parent,
            }
            for member in view.members
        ],
    }


def _field(data: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in data:
        raise ProtocolError(f'population: {where}: missing "{key}"')
    return data[key]


def _count(value: Any, where: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ProtocolError(f"population: {where}: expected an integer from {low} to {high}, got {quote(value)}")
    return value


def _finite(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(_float(value)):
        raise ProtocolError(f"population: {where}: expected a finite number, got {quote(value)}")
    return float(value)


def _finite_or_null(value: Any, where: str) -> float | None:
    return None if value is None else _finite(value, where)


def _list(value: Any, where: str, high: int) -> list:
    if not isinstance(value, list) or len(value) > high:
        raise ProtocolError(f"population: {where}: expected a list of at most {high} items, got {quote(value)}")
    return value


_MEMBER_STATES = tuple(state.value for state in MemberState)


def _member_view(data: Any, index: int, keys: tuple[str, ...], size: int) -> MemberView:
    where = f"member {index}"
    if not isinstance(data, dict):
        raise ProtocolError(f"population: {where}: expected an object, got {quote(data)}")
    values = _list(_field(data, "values", where), f"{where}: values", len(keys))
    if len(values) != len(keys):
        raise ProtocolError(f"population: {where}: {len(values)} values for {len(keys)} keys")
    state = _field(data, "state", where)
    if state not in _MEMBER_STATES:
        raise ProtocolError(f"population: {where}: unknown state {quote(state)}; known: {', '.join(_MEMBER_STATES)}")
    trend = _list(data.get("trend", []), f"{where}: trend", TREND_LENGTH)
    parent = data.get("parent")
    return MemberView(
        index=index,
        values=MappingProxyType({key: _finite(v, f"{where}: {key}") for key, v in zip(keys, values)}),
        state=MemberState(state),
        latest_return=_finite_or_null(data.get("latest_return"), f"{where}: latest_return"),
        best_return=_finite_or_null(data.get("best_return"), f"{where}: best_return"),
        eval_return=_finite_or_null(data.get("eval_return"), f"{where}: eval_return"),
        trend=tuple(math.nan if v is None else _finite(v, f"{where}: trend") for v in trend),
        parent=None if parent is None else _count(parent, f"{where}: parent", 0, size - 1),
    )


def population_from_json(data: Any) -> PopulationView | None:
    """The inverse of `population_json` (None for null: one agent), checked field by field:
    what the run sends is data, and anything malformed is a ProtocolError."""
    if data is None:
        return None
    if not isinstance(data, dict):
        raise ProtocolError(f"population: expected an object, got {quote(data)}")
    keys = _list(_field(data, "keys", "the table"), "keys", len(DynamicHParams._fields))
    if any(key not in DynamicHParams._fields for key in keys) or len(set(keys)) != len(keys):
        raise ProtocolError(f"population: keys: expected distinct traced hyperparameters, got {quote(keys)}")
    members = _list(_field(data, "members", "the table"), "members", MAX_MEMBERS)
    if len(members) < 2:
        raise ProtocolError(f"population: members: expected at least 2, got {len(members)}")
    return PopulationView(
        keys=tuple(keys),
        num_seeds=_count(_field(data, "num_seeds", "the table"), "num_seeds", 1, MAX_AGENTS),
        members=tuple(_member_view(m, i, tuple(keys), len(members)) for i, m in enumerate(members)),
        pbt_every_updates=_count(data.get("pbt_every_updates", 0), "pbt_every_updates", 0, 2**62),
    )


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


def error_message(text: str, request_id: Any = None) -> dict[str, Any]:
    return {"type": "error", "error": text, "id": request_id}


HISTORY_BUCKETS = 512  # the curves a client is sent on connect: enough for any chart's width


def history_message(curves: Any) -> dict[str, Any]:
    """The whole run's curves (rltui.session.history.Curves), sent once on connect before
    the first snapshot: the records that follow and are already in them count only in the
    recent values."""
    return {"type": "history", "curves": curves.rebin(HISTORY_BUCKETS).to_json()}


# --- the policy's parameters (server to client, on request) ----------------------------------
# A `params` request is answered by `params` messages: the parameters and observation
# statistics as flax state dicts in one msgpack blob (data only: arrays, numbers, strings;
# nothing is unpickled), base64 text in pieces of PARAMS_PIECE_BYTES, each line well under
# what a client reads at once. A blob over MAX_PARAMS_BYTES is refused with an error.
PARAMS_PIECE_BYTES = 48 * 1024
MAX_PARAMS_BYTES = 8 * 2**20


class ParamsTooLarge(ValueError):
    pass


def params_blob(params: Any, obs_stats: Any) -> bytes:
    """(params, obs_stats) as host arrays -> one msgpack blob; ParamsTooLarge past the limit."""
    from flax import serialization

    blob = serialization.msgpack_serialize(
        {"params": serialization.to_state_dict(params), "obs_stats": serialization.to_state_dict(obs_stats)})
    if len(blob) > MAX_PARAMS_BYTES:
        raise ParamsTooLarge(
            f"the policy's parameters are {len(blob) / 2**20:.1f} MiB, more than the control socket sends "
            f"({MAX_PARAMS_BYTES // 2**20} MiB): watch a checkpoint with rltui watch RUN_DIR instead")
    return blob


def params_pieces(blob: bytes) -> list[str]:
    """The blob as base64 pieces, one per `params` message."""
    return [base64.b64encode(blob[i:i + PARAMS_PIECE_BYTES]).decode("ascii")
            for i in range(0, max(len(blob), 1), PARAMS_PIECE_BYTES)]


def params_message(request_id: Any, update: int, part: int, pieces: list[str], size: int) -> dict[str, Any]:
    return {"type": "params", "id": request_id, "update": update, "part": part, "parts": len(pieces),
            "bytes": size, "data": pieces[part]}


class ParamsAssembly:
    """A client's side: the `params` messages of one request, checked as they come (data
    from outside: sizes, order, base64), then the blob restored to state dicts."""

    def __init__(self) -> None:
        self.pieces: list[bytes] = []
        self.received = 0

    def add(self, message: Mapping[str, Any]) -> bool:
        """Take one message; True once the last piece is in. ProtocolError if it is wrong."""
        part, parts, size, data = (message.get(k) for k in ("part", "parts", "bytes", "data"))
        counts = (part, parts, size)
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in counts) \
                or not isinstance(data, str):
            raise ProtocolError("params: a piece without part, parts, bytes or data")
        if size > MAX_PARAMS_BYTES or parts > MAX_PARAMS_BYTES // PARAMS_PIECE_BYTES + 1 or part != len(self.pieces) \
                or part >= parts:
            raise ProtocolError("params: pieces out of order or over the size limit")
        try:
            piece = base64.b64decode(data.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError):
            raise ProtocolError("params: a piece that is not base64") from None
        self.received += len(piece)
        if len(piece) > PARAMS_PIECE_BYTES or self.received > size:
            raise ProtocolError("params: more bytes than announced")
        self.pieces.append(piece)
        if part + 1 < parts:
            return False
        if self.received != size:
            raise ProtocolError("params: fewer bytes than announced")
        return True

    def restore(self) -> dict[str, Any]:
        """The state dicts {"params": ..., "obs_stats": ...}; ProtocolError if unreadable."""
        from flax import serialization

        try:
            state = serialization.msgpack_restore(b"".join(self.pieces))
        except Exception as err:  # noqa: BLE001 - whatever the decoder raises on bad data
            raise ProtocolError(f"params: not a parameters blob ({type(err).__name__})") from None
        if not isinstance(state, dict) or "params" not in state:
            raise ProtocolError("params: not a parameters blob")
        return state
