"""Loggers: a run's metrics and events, written besides metrics.jsonl and events.jsonl to
the tools people compare runs in (TensorBoard, Weights & Biases).

The `loggers` key names them. Each is a session listener, so it runs on the session's side
at chunk boundaries and never inside the compiled step. A logger that fails (a full disk,
a missing library, a network that went away) is reported once as a warning event and
switched off; training goes on.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from rltui.config import ConfigError
from rltui.export import MEMBERS, member_tag, population_shape
from rltui.session.controller import SessionListener
from rltui.session.events import SessionEvent, SessionState
from rltui.session.metrics import MetricsSnapshot

ALWAYS = "jsonl"  # metrics.jsonl and events.jsonl: written by the recorder whatever the key says


class Extra(NamedTuple):
    module: str  # what must be importable
    extra: str  # the optional dependency of rltui that installs it


EXTRAS: dict[str, Extra] = {
    "tensorboard": Extra("tensorboardX", "tensorboard"),
    "wandb": Extra("wandb", "wandb"),
}


def install_hint(name: str) -> str:
    return f'pip install "rltui[{EXTRAS[name].extra}]"'


def missing_module(name: str) -> str | None:
    """The module logger `name` needs when it is not installed, else None (nothing imported)."""
    module = EXTRAS[name].module
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    return None if found else module


def check_loggers(names: Iterable[str]) -> None:
    """ConfigError (one line, exit 2) naming the extra to install, for the first logger in
    `names` whose library is not installed; unknown names are the config's to refuse."""
    for name in names:
        if name in EXTRAS and (module := missing_module(name)) is not None:
            raise ConfigError(f"loggers: {name} needs the {module} package, which is not installed; "
                             f"install it with {install_hint(name)}")


def scalars(record: Mapping[str, Any]) -> dict[str, float]:
    """Every number of a metrics.jsonl record except its step (env_steps), by tag; with
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


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class LoggerListener(SessionListener):
    """Feeds the session's records and events to each logger; `warn` (the session's) logs
    a warning event for a logger that failed, which is then off for the rest of the run."""

    def __init__(self, loggers: list[Logger], warn: Callable[[str], None], steps_per_update: int):
        self._loggers = list(loggers)
        self._warn = warn
        self._steps_per_update = steps_per_update

    @property
    def active(self) -> tuple[str, ...]:
        return tuple(logger.label for logger in self._loggers)

    def on_metrics(self, snapshot: MetricsSnapshot) -> None:
        if not snapshot.new_records or not self._loggers:
            return
        records = [record.to_json() for record in snapshot.new_records]
        for logger in list(self._loggers):
            self._call(logger, "write_records", records)
            self._call(logger, "flush")

    def on_event(self, event: SessionEvent) -> None:
        step = int(event.data.get("env_steps", event.update * self._steps_per_update))
        kind = event_kind(event.kind, event.data)
        for logger in list(self._loggers):
            self._call(logger, "write_event", step, kind, event.message)

    def on_state(self, state: SessionState, message: str | None) -> None:
        if state.is_final:
            self.close()

    def _call(self, logger: Logger, method: str, *args) -> None:
        try:
            getattr(logger, method)(*args)
        except Exception as exc:  # noqa: BLE001 - any failure of a logger: it goes off, training goes on
            self._loggers = [known for known in self._loggers if known is not logger]
            _close_quietly(logger)
            self._warn(f"logger {logger.label} failed ({_describe(exc)}); it is off for the rest of this run")

    def close(self) -> None:
        loggers, self._loggers = self._loggers, []
        for logger in loggers:
            _close_quietly(logger)


def _close_quietly(logger: Logger) -> None:
    try:
        logger.close()
    except Exception:  # noqa: BLE001 - already reported, or the run is ending: nothing left to tell
        pass


def open_loggers(names: Iterable[str], run_dir: Path, config: Mapping[str, Any], steps_per_update: int,
                 warn: Callable[[str], None]) -> LoggerListener | None:
    """A listener for the loggers `names` (None when there are none besides jsonl). One that
    cannot start is reported with `warn` and left out."""
    loggers: list[Logger] = []
    for name in names:
        if name == ALWAYS:
            continue
        try:
            loggers.append(_open(name, Path(run_dir), config))
        except Exception as exc:  # noqa: BLE001 - a logger that cannot start is a warning, not a failed run
            warn(f"logger {name} could not start ({_describe(exc)}); the run goes on without it")
    if not loggers:
        return None
    return LoggerListener(loggers, warn, steps_per_update)


def _open(name: str, run_dir: Path, config: Mapping[str, Any]) -> Logger:
    if name == "tensorboard":
        from rltui.loggers.tensorboard import TensorBoardLogger

        return TensorBoardLogger(run_dir / TB_DIR, config)
    if name == "wandb":
        from rltui.loggers.wandb_logger import WandbLogger

        return WandbLogger(run_dir, config)
    raise ValueError(f"unknown logger {name!r}")


TB_DIR = "tb"
