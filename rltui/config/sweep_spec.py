"""One entry of a population's `sweep` table, parsed and checked (`parse_spec`), and the
rules of the population's keys (`SweepTable`, `Factors`): what the configuration's key
table (`rltui.config.keys`) needs of a sweep, below it. The members a sweep gives are
`rltui.config.sweep`'s.

A sweep maps a traced hyperparameter to a list of values or a distribution:

    [sweep]
    lr = [1e-4, 3e-4, 1e-3]              # a list: every value (a grid), or one drawn per member
    ent_coef = "loguniform(1e-4, 1e-2)"  # a distribution: needs sweep_size members drawn
    gamma = "uniform(0.95, 0.999)"
    vf_coef = "choice(0.5, 1.0)"

Plain Python and NumPy: specs are checked before JAX starts. Every bad spec is an
`HParamError` of one line naming the key.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from trainers.hparams import TRAINER_KEYS, validate_hparam
from trainers.keys import RUN, STATIC, TRACED, HParamError, Key, Rule, Switch
from trainers.quoting import QUOTE_LIMIT, closest, quote

# Agents (members x num_seeds) one run trains at most: beyond this the population is a typo
# or a job for several runs, and even tiny networks need gigabytes per thousand agents.
MAX_AGENTS = 4096

DISTRIBUTIONS = ("loguniform", "uniform", "choice")
_FORMS = "a list of values like [1e-4, 3e-4], or loguniform(lo, hi), uniform(lo, hi) or choice(a, b, ...)"
_CALL = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*\((.*)\)\s*$", re.DOTALL)

_TRAINER_KEYS = {key.name: key for key in TRAINER_KEYS if key.config}
# Every traced key a user can set: each member may hold its own value of any of them.
SWEEPABLE = tuple(name for name, key in _TRAINER_KEYS.items() if key.kind == TRACED)
# The numeric ones: what population-based training can perturb by a factor.
PERTURBABLE = tuple(name for name in SWEEPABLE if not isinstance(_TRAINER_KEYS[name].rule, Switch))


@dataclasses.dataclass(frozen=True)
class Spec:
    """One key's parsed spec: `values` (a list, or choice's options) or `low`/`high` (uniform
    and loguniform), each as the trainer takes it."""

    key: str
    kind: str  # "list" or one of DISTRIBUTIONS
    values: tuple[float, ...] = ()
    low: float = 0.0
    high: float = 0.0
    text: str = ""  # as the user wrote it, for messages

    @property
    def sampled_only(self) -> bool:
        """A continuous distribution: it has no grid, only draws."""
        return self.kind in ("uniform", "loguniform")

    def draw(self, rng: np.random.Generator, count: int) -> list[float]:
        if self.kind == "uniform":
            drawn = rng.uniform(self.low, self.high, count)
        elif self.kind == "loguniform":
            drawn = np.exp(rng.uniform(math.log(self.low), math.log(self.high), count))
        else:
            drawn = np.asarray(self.values)[rng.integers(0, len(self.values), count)]
        # Clipped to the bounds: exp(log(x)) may land an ulp outside them.
        low, high = (self.low, self.high) if self.sampled_only else (-math.inf, math.inf)
        return [_as_trainer(self.key, float(min(max(v, low), high))) for v in drawn]


def format_value(key: str, value: float) -> str:
    """A member's value as a label shows it: the shortest text of the float32 the trainer
    receives (0.0003, 1e-05); a switch as true/false."""
    if isinstance(_TRAINER_KEYS[key].rule, Switch):
        return "true" if value else "false"
    text = repr(float(str(np.float32(value))))
    return text[:-2] if text.endswith(".0") else text


def _as_trainer(key: str, value: Any) -> float:
    """`value` checked against `key`'s rule, as the trainer holds it (the float32's shortest
    decimal, so that labels and checkpoints agree with what trains)."""
    return float(str(np.float32(validate_hparam(key, value))))


# --- one key's spec ------------------------------------------------------------------------


def check_sweep_key(key: str, keys: Mapping[str, Key]) -> Key:
    """The traced key `key` names in the configuration's key table `keys`, or HParamError
    saying why it cannot be swept."""
    found = keys.get(key)
    if found is None:
        shown = key if key.isprintable() and len(key) <= QUOTE_LIMIT else quote(key)
        close = closest(key, keys)
        hint = f"did you mean {close}? " if close else ""
        raise HParamError(f"{shown}: unknown key in the sweep; {hint}sweepable keys: {', '.join(SWEEPABLE)}")
    if found.kind == STATIC:
        raise HParamError(
            f"{key}: cannot be swept: it changes the compiled program's shapes; launch one run per value"
        )
    if key == "seed":
        raise HParamError(f"{key}: cannot be swept: use num_seeds for several seeds (seed, seed+1, ...) per member")
    if found.kind == RUN:
        raise HParamError(f"{key}: cannot be swept: it is a setting of the whole run; launch one run per value")
    return found


def parse_spec(key: str, spec: Any, keys: Mapping[str, Key]) -> Spec:
    """`spec` (a list, or a distribution's text) for the traced key `key` of the key table
    `keys`, checked: every value, and both bounds of a distribution, within the key's rule.
    HParamError otherwise."""
    rule = check_sweep_key(key, keys).rule
    if isinstance(spec, (list, tuple)):
        if not spec:
            raise HParamError(f"{key}: the sweep's list is empty; give one value or more, like [{_example(key)}]")
        values = tuple(_as_trainer(key, value) for value in spec)
        repeated = next((v for i, v in enumerate(values) if v in values[:i]), None)
        if repeated is not None:
            raise HParamError(f"{key}: {format_value(key, repeated)} appears twice in the sweep's list")
        return Spec(key, "list", values, text=quote(list(spec)))
    if not isinstance(spec, str):
        one = f" (one value: --set {key}={spec})" if isinstance(spec, (int, float)) else ""
        raise HParamError(f"{key}: expected {_FORMS}; got {quote(spec)}{one}")
    call = _CALL.match(spec)
    if call is None:
        raise HParamError(f"{key}: expected {_FORMS}; got {quote(spec)}")
    name, body = call.group(1), call.group(2)
    text = f"{name}({body.strip()})"
    if name not in DISTRIBUTIONS:
        raise HParamError(
            f"{key}: unknown distribution {quote(name)}; expected loguniform(lo, hi), uniform(lo, hi) or "
            "choice(a, b, ...)"
        )
    args = [part.strip() for part in body.split(",")] if body.strip() else []
    numbers = [_number(key, text, arg) for arg in args]
    if name == "choice":
        if not numbers:
            raise HParamError(f"{key}: choice(a, b, ...) needs one value or more, got {quote(text)}")
        return dataclasses.replace(parse_spec(key, numbers, keys), kind="choice", text=text)
    if len(numbers) != 2:
        raise HParamError(f"{key}: {name}(lo, hi) takes 2 numbers, got {len(numbers)}: {quote(text)}")
    if isinstance(rule, Switch):
        raise HParamError(f"{key}: a switch is swept with [true, false] or choice(true, false), not {name}")
    low, high = numbers
    if name == "loguniform" and not low > 0:
        raise HParamError(f"{key}: loguniform(lo, hi) needs lo > 0, got {quote(text)}; use uniform for a range "
                          "from 0")
    if not low < high:
        raise HParamError(f"{key}: {name}(lo, hi) needs lo < hi, got {quote(text)}")
    try:
        low, high = validate_hparam(key, low), validate_hparam(key, high)
    except HParamError as err:
        raise HParamError(f"{err} (a bound of {text})") from None
    return Spec(key, name, low=low, high=high, text=text)


def _number(key: str, text: str, arg: str) -> Any:
    if arg.lower() in ("true", "false"):
        return arg.lower() == "true"
    try:
        return float(arg)
    except ValueError:
        raise HParamError(f"{key}: expected numbers in {quote(text)}, got {quote(arg)}") from None


def _example(key: str) -> str:
    default = _TRAINER_KEYS[key].default
    return str(default).lower() if isinstance(default, bool) else format_value(key, default)


@dataclasses.dataclass(frozen=True)
class SweepTable(Rule):
    """The `sweep` key's rule: a table from traced keys to specs, each spec checked on its
    own (what needs other keys, such as the algorithm, is checked by `sweep.plan_sweep`).
    `keys` gives the configuration's key table, which holds this rule's own key: the table
    is read when a value is checked, once it exists."""

    keys: Callable[[], Mapping[str, Key]] = dataclasses.field(compare=False)

    def describe(self) -> str:
        return ('a table from traced keys to a list of values or a distribution: lr = [1e-4, 3e-4], '
                'ent_coef = "loguniform(1e-4, 1e-2)"; uniform(lo, hi) and choice(a, b, ...) too')

    def coerce(self, name: str, value: Any) -> dict:
        if not isinstance(value, dict):
            raise HParamError(f"{name}: expected {self.describe()}, got {quote(value)}")
        for key, spec in value.items():
            parse_spec(str(key), spec, self.keys())
        return dict(value)


class Factors(Rule):
    """A non-empty list of positive numbers (PBT's perturbation factors)."""

    def describe(self) -> str:
        return "a list of positive numbers, like [0.8, 1.25]"

    def coerce(self, name: str, value: Any) -> tuple[float, ...]:
        if isinstance(value, str):
            try:
                value = [float(v) for v in value.strip("[]() ").split(",") if v.strip()]
            except ValueError:
                raise HParamError(f"{name}: expected {self.describe()}, got {quote(value)}") from None
        if not isinstance(value, (list, tuple)) or not value or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0 for v in value
        ):
            raise HParamError(f"{name}: expected {self.describe()}, got {quote(value)}")
        return tuple(float(v) for v in value)
