"""A session command as JSON, and back: the control protocol's `command` messages
(docs/control-protocol.md), and what the processes of a multi-process run exchange their
commands in (`distributed`). One encoding of a command, wherever it travels; the session
declares it, the control layer speaks it.

A command message is data from outside: `command_from_message` checks every field it uses
(types, ranges, sizes) before anything acts on it, and any failure is a `ProtocolError`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

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


def quote(value: Any, limit: int = QUOTE_CHARS) -> str:
    """A value as an error message may show it: scalars as repr, shortened; containers
    by kind only (their repr could be huge or nested past the recursion limit)."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool) or value is None:  # as the message spelled it, in JSON
        return {True: "true", False: "false", None: "null"}[value]
    if isinstance(value, int) and value.bit_length() > 64:
        return f"an integer of {len(str(abs(value)))} digits"  # parsing allows at most 4300
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


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
