"""What every logger shares: the `Logger` protocol its writers keep (`tensorboard`,
`wandb_logger`), an event's text as both write it (and `rltui export` after the fact), a
metrics record's numbers by their flat names (the CSV's columns; the loggers' own tags are
`layout`'s), how long one may take to start, and the check that a configured logger's
library is installed."""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from rltui.config.keys import ConfigError
from rltui.config.logger_kinds import LOGGERS
from rltui.runfiles.reader import MEMBERS, member_tag, population_shape

# Seconds a logger may take to start (W&B reaching its server) before the run goes on
# without it; W&B is told the same bound.
START_TIMEOUT = 30.0


def install_hint(name: str) -> str:
    return f'pip install "rltui[{LOGGERS[name].extra}]"'


def missing_module(name: str) -> str | None:
    """The module logger `name` needs when it is not installed, else None (nothing imported)."""
    module = LOGGERS[name].library
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    return None if found else module


def check_loggers(names: Iterable[str]) -> None:
    """ConfigError (one line, exit 2) naming the extra to install, for the first logger in
    `names` whose library is not installed; unknown names are the config's to refuse."""
    for name in names:
        if name in LOGGERS and (module := missing_module(name)) is not None:
            raise ConfigError(f"loggers: {name} needs the {module} package, which is not installed; "
                             f"install it with {install_hint(name)}")


def scalars(record: Mapping[str, Any]) -> dict[str, float]:
    """Every number of a metrics.jsonl record except its step (env_steps), by name; with
    several seeds each seed's value too, as `NAME/seed_I`. A population's record gives each
    member's values as `members/<m>/NAME` (one tag per member, so tools list them side by
    side), and with several seeds per member each agent's as `members/<m>/NAME/seed_<s>`.
    Undefined values (null, or a frozen member's) are left out, so a series has no points
    where the metric had no value."""
    out: dict[str, float] = {}
    for name, value in record.items():
        if name != "env_steps" and _finite(value):
            out[name] = float(value)
    shape = population_shape(record)
    if shape is not None:
        for name, values in record[MEMBERS].items():
            if isinstance(values, list):
                for m, value in enumerate(values):
                    if _finite(value):
                        out[f"{MEMBERS}/{m}/{name}"] = float(value)
    seeds = record.get("seeds")
    if isinstance(seeds, Mapping) and (shape is None or shape.seeds > 1):
        # One seed per member: the agents' values are the members' already.
        for name, values in seeds.items():
            if isinstance(values, list):
                for i, value in enumerate(values):
                    if _finite(value):
                        if shape is None:
                            out[f"{name}/seed_{i}"] = float(value)
                        else:
                            member, seed = divmod(i, shape.seeds)
                            out[member_tag(member, name, seed)] = float(value)
    return out


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def event_text(kind: str, message: str) -> str:
    return f"**{kind}**: {message}"


def event_kind(kind: str, data: Any) -> str:
    """The heading of an event's text: a population's change says which (`population pbt`,
    `population clone`, ...), as its message alone reads the same for a clone and PBT."""
    action = data.get("action") if isinstance(data, Mapping) and kind == "population" else None
    return f"{kind} {action}" if isinstance(action, str) and action else kind


class Logger(Protocol):
    """One destination. Any exception from a method switches the logger off."""

    label: str

    def write_records(self, records: list[dict[str, Any]]) -> None: ...

    def write_event(self, step: int, kind: str, message: str) -> None: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...
