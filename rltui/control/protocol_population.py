"""A population's table as a snapshot carries it (`population` in a `snapshot`): a
`PopulationView` to JSON, and back, checked field by field as data from outside.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from rltui.config.sweep import MAX_AGENTS
from rltui.session.command_json import MAX_MEMBERS, ProtocolError, float_or_inf, quote
from rltui.session.population import TREND_LENGTH, MemberState, MemberView, PopulationView
from trainers.hparams import DynamicHParams

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
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float_or_inf(value)):
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
