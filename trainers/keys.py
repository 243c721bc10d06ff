"""Configuration keys, declared once: what a key holds, its default, the values it allows,
what it means, and how the trainer receives it.

A `Key` is the single declaration of one setting. The trainer's types (`StaticConfig`,
`DynamicHParams`), the run configuration, the validators, the live-editable and resumable
sets, the editor's fields and the configuration reference are all derived from the tables
of keys (`trainers.hparams` declares the trainer's shared keys, each algorithm's package
(`trainers.algorithms`) its own, `rltui.config.keys` the run's).

Plain Python and NumPy, so that validation runs before JAX starts.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from trainers.quoting import quote

INT32_MAX = 2**31 - 1
UINT32_MAX = 2**32 - 1
INT64_MAX = 2**63 - 1
_FLOAT32_MAX = float(np.finfo(np.float32).max)

# Where a key's value lives: compiled into the program (a field of `StaticConfig`; changing
# it recompiles), passed to the compiled step as a float32 scalar (a leaf of
# `DynamicHParams`; changing it does not recompile), or read by the session around the
# compiled step (chunking, checkpoints, devices).
STATIC, TRACED, RUN = "static", "traced", "run"
ACTION_KINDS = ("discrete", "continuous")


class HParamError(ValueError):
    """A value a key does not allow; the message names the key and what is allowed."""


def _expect(name: str, allowed: str, value: Any, why: str = "") -> HParamError:
    return HParamError(f"{name}: expected {allowed}, got {quote(value)}{why}")


# --- rules: the values a key allows -------------------------------------------------------


class Rule:
    """The values a key allows. `coerce` returns the value as the configuration holds it,
    or raises HParamError; for traced keys, `to_trainer`/`from_trainer` convert to and from
    the float the compiled step receives."""

    def describe(self) -> str:
        raise NotImplementedError

    def coerce(self, name: str, value: Any) -> Any:
        raise NotImplementedError

    def to_trainer(self, value: Any) -> Any:
        return value

    def from_trainer(self, value: Any) -> Any:
        return value

    def integer_range(self) -> IntRange | None:
        """The integers the key (or each of its items) allows, where it holds integers."""
        return None


@dataclasses.dataclass(frozen=True)
class IntRange(Rule):
    """Integers in [low, high]; an integral float (2e6) is taken as its integer."""

    low: int
    high: int

    def __contains__(self, value: object) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and self.low <= value <= self.high

    def describe(self) -> str:
        return f"an integer in [{self.low}, {self.high}]"

    def integer_range(self) -> IntRange:
        return self

    def coerce(self, name: str, value: Any) -> int:
        number = value
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            number = int(value)
        if isinstance(number, bool) or not isinstance(number, int):
            raise _expect(name, "an integer", value)
        if number not in self:
            raise _expect(name, self.describe(), value)
        return number


@dataclasses.dataclass(frozen=True)
class Widths(Rule):
    """A non-empty list of integers in [low, high] (layer widths)."""

    low: int = 1
    high: int = INT32_MAX

    def describe(self) -> str:
        return f"a list of positive integers up to {self.high}, like [64, 64]"

    def integer_range(self) -> IntRange:
        return IntRange(self.low, self.high)

    def coerce(self, name: str, value: Any) -> tuple[int, ...]:
        if isinstance(value, str):
            parts = [v.strip() for v in value.strip("[]() ").split(",") if v.strip()]
            try:
                value = [int(v) for v in parts]
            except ValueError:
                raise _expect(name, self.describe(), value) from None
        width = IntRange(self.low, self.high)
        if not isinstance(value, (list, tuple)) or not value or not all(v in width for v in value):
            raise _expect(name, self.describe(), value)
        return tuple(value)


@dataclasses.dataclass(frozen=True)
class Number(Rule):
    """A finite number within bounds (each inclusive unless marked open). `float32`: the
    value must also hold as the float32 the trainer receives (1e39 is inf there, 1e-50 is 0)."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    float32: bool = False
    unit: str = ""  # "seconds": "a number of seconds in [0.01, 60]"

    def describe(self) -> str:
        what = f"a number of {self.unit}" if self.unit else "a number"
        if self.low is not None and self.high is not None:
            return (
                f"{what} in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}{')' if self.high_open else ']'}"
            )
        if self.low is not None:
            return f"{what} {'>' if self.low_open else '>='} {self.low:g}"
        if self.high is not None:
            return f"{what} {'<' if self.high_open else '<='} {self.high:g}"
        return what

    def ok(self, number: float) -> bool:
        if self.low is not None and (number <= self.low if self.low_open else number < self.low):
            return False
        if self.high is not None and (number >= self.high if self.high_open else number > self.high):
            return False
        return True

    def coerce(self, name: str, value: Any) -> float:
        allowed = self.describe()
        if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
            raise _expect(name, allowed, value)
        try:
            number = float(value)
        except OverflowError:  # an integer beyond the float range
            number = math.inf
        if not math.isfinite(number):
            # The trainer's hyperparameters say why; elsewhere the range says enough.
            raise _expect(name, allowed, value, ", which is not a finite number" if self.float32 else "")
        if self.float32:
            as_float32 = float(np.float32(number)) if abs(number) <= _FLOAT32_MAX else math.inf
            if not math.isfinite(as_float32):
                raise _expect(name, allowed, value, ", which is too large for a 32-bit float")
        if not self.ok(number):
            raise _expect(name, allowed, value)
        if self.float32 and not self.ok(as_float32):
            raise _expect(name, allowed, value, f", which is {as_float32:g} as a 32-bit float")
        return number


@dataclasses.dataclass(frozen=True)
class Switch(Rule):
    """true or false; a traced switch reaches the trainer as 1.0 or 0.0."""

    def describe(self) -> str:
        return "true or false"

    def coerce(self, name: str, value: Any) -> bool:
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        if not isinstance(value, bool):
            raise _expect(name, self.describe(), value)
        return value

    def to_trainer(self, value: Any) -> float:
        return 1.0 if value else 0.0

    def from_trainer(self, value: Any) -> bool:
        return bool(value)


@dataclasses.dataclass(frozen=True)
class TrainerSwitch(Rule):
    """A traced switch as the trainer holds it: 0 or 1 (a config key shows it as a Switch)."""

    def describe(self) -> str:
        return "0 or 1"

    def coerce(self, name: str, value: Any) -> float:
        number = Number().coerce(name, value) if not isinstance(value, bool) else float(value)
        if number not in (0.0, 1.0):
            raise _expect(name, self.describe(), value)
        return number


@dataclasses.dataclass(frozen=True)
class Choice(Rule):
    options: tuple[str, ...]

    def describe(self) -> str:
        return "one of " + ", ".join(self.options)

    def coerce(self, name: str, value: Any) -> str:
        if not isinstance(value, str):
            raise _expect(name, "a string", value)
        if value not in self.options:
            raise _expect(name, self.describe(), value)
        return value


@dataclasses.dataclass(frozen=True)
class Names(Rule):
    """A list of distinct names from `options`, in the order given (a bare name or a
    comma-separated string, as `--set` passes one, is read as that list)."""

    options: tuple[str, ...]

    def describe(self) -> str:
        return "a list of names from " + ", ".join(self.options) + f', like ["{self.options[-1]}"]'

    def coerce(self, name: str, value: Any) -> tuple[str, ...]:
        if isinstance(value, str):
            value = [part.strip() for part in value.strip("[]() ").split(",") if part.strip()]
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise _expect(name, self.describe(), value)
        for item in value:
            if item not in self.options:
                raise _expect(name, self.describe(), value, f": {quote(item)} is not one of them")
        return tuple(dict.fromkeys(value))


@dataclasses.dataclass(frozen=True)
class Table(Rule):
    """A table of keyword arguments: string keys; strings, numbers, booleans, arrays or
    tables as values (what TOML holds), at most `depth` levels deep."""

    depth: int = 8

    def describe(self) -> str:
        return "a table of keyword arguments, like {size = 5}"

    def coerce(self, name: str, value: Any) -> dict:
        if not isinstance(value, dict) or not self._fits(value, self.depth):
            raise _expect(name, self.describe(), value)
        return dict(value)

    def _fits(self, value: Any, depth: int) -> bool:
        if depth < 0:
            return False
        if isinstance(value, dict):
            return all(isinstance(k, str) and self._fits(v, depth - 1) for k, v in value.items())
        if isinstance(value, list):
            return all(self._fits(v, depth - 1) for v in value)
        return isinstance(value, (str, int, float, bool))


# --- the key ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Key:
    """One setting, declared once.

    `kind`: STATIC (compiled in), TRACED (a float32 argument of the compiled step) or RUN
    (the session's). `live`: editable while training (traced keys only). `resumable`: a
    resumed run may change it (default: everything but static keys). `algos`: the
    algorithms that read it (None: all; an algorithm's package declares the keys only it
    reads, and fills this in). `after`: where an algorithm's key sits in the table (after
    the key named here; None: at the end), the order of the reference, the editor and the
    trainer's types. `actions`: the action space it matters for ("discrete" or
    "continuous"; None: both). `field`: the trainer's name for it when that differs.
    `config`: False for the trainer's internal values, which no user sets."""

    name: str
    default: Any
    meaning: str
    rule: Rule
    kind: str
    live: bool = False
    resumable: bool | None = None
    algos: tuple[str, ...] | None = None
    after: str | None = None
    actions: str | None = None
    field: str | None = None
    config: bool = True

    def __post_init__(self):
        assert self.kind in (STATIC, TRACED, RUN), self.kind
        assert not self.live or self.kind == TRACED, f"{self.name}: only traced keys can be edited live"
        assert self.actions in (None, *ACTION_KINDS), self.actions

    @property
    def attr(self) -> str:
        """The trainer's field name."""
        return self.field or self.name

    @property
    def can_resume_with_change(self) -> bool:
        return self.kind != STATIC if self.resumable is None else self.resumable

    def reads(self, algo: str) -> bool:
        return self.algos is None or algo in self.algos

    def matters_for(self, algo: str | None, actions: str | None = None) -> bool:
        """Whether a run of `algo` on an env with `actions` reads it (None: not known)."""
        return (algo is None or self.reads(algo)) and (actions is None or self.actions in (None, actions))

    def coerce(self, value: Any) -> Any:
        return self.rule.coerce(self.name, value)

    def type_name(self) -> type:
        return type(self.default)


def fields_of(keys: Iterable[Key], kind: str) -> tuple[Key, ...]:
    return tuple(key for key in keys if key.kind == kind)


def static_config_type(keys: Iterable[Key], base: type) -> type:
    """A frozen dataclass with one field per static key (trainer names), methods from `base`."""
    fields = [(k.attr, k.type_name(), dataclasses.field(default=k.default)) for k in fields_of(keys, STATIC)]
    cls = dataclasses.make_dataclass("StaticConfig", fields, bases=(base,), frozen=True)
    cls.__module__ = base.__module__
    return cls


def traced_fields_type(keys: Iterable[Key]) -> type:
    """A NamedTuple (a pytree without importing JAX) with one float32 field per traced key."""
    traced = fields_of(keys, TRACED)
    from typing import NamedTuple

    fields_type = NamedTuple("DynamicHParamsFields", [(k.attr, np.float32) for k in traced])
    fields_type.__module__ = __name__
    fields_type.__new__.__defaults__ = tuple(np.float32(k.rule.to_trainer(k.default)) for k in traced)
    return fields_type
