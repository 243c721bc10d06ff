"""The runs list's rows: one per run (a population's with its best member's return), their
sort orders, the filter's matching, a configuration's differences from the first selected
run's, and what Enter on a live run's row asks for (`AttachRequest`)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from rltui.runfiles.comparison import read_differences, show_value, swept_keys
from rltui.runfiles.discovery import STATES, RunState
from rltui.runfiles.loading import LoadedRun
from rltui.runfiles.reader import member_tag
from trainers.metrics_spec import EPISODE_RETURN


class AttachRequest(NamedTuple):
    """What the runs view exits with when Enter is pressed on a live run: `rltui runs` then
    attaches to it, and shows the list again after a detach."""

    run_dir: Path


@dataclasses.dataclass(frozen=True)
class RunRow:
    path: Path
    name: str
    env: str
    algo: str
    state: RunState
    env_steps: int
    updates: int
    latest: float
    best: float
    wall_time: float
    started: float | None
    problems: tuple[str, ...]
    population: str = ""  # "3x1": members x seeds per member; empty for one configuration
    best_member: int | None = None  # the population's member whose latest return is highest

    @property
    def damaged(self) -> bool:
        return bool(self.problems)


def row_of(run: LoadedRun, state: RunState) -> RunRow:
    """A run's row. A population shows as such ("ppo, population 3x1") with its best
    member's return: the member whose latest return is highest, and the best any member had."""
    algo = str(run.config.get("algo", "?"))
    latest, best = _latest_best(run.columns.get(EPISODE_RETURN, np.array([])))
    best_member, population = None, ""
    if run.is_population:
        population = f"{run.members}x{run.seeds_per_member}"
        algo = f"{algo}, population {population}"
        figures = {m: _latest_best(run.columns.get(member_tag(m, EPISODE_RETURN), np.array([])))
                   for m in range(run.members)}
        latest_of = {m: f[0] for m, f in figures.items() if math.isfinite(f[0])}
        bests = [f[1] for f in figures.values() if math.isfinite(f[1])]
        best_member = max(latest_of, key=lambda m: (latest_of[m], -m)) if latest_of else None
        latest = latest_of[best_member] if best_member is not None else math.nan
        best = max(bests) if bests else math.nan
    return RunRow(
        path=run.path, name=run.name, env=str(run.config.get("env", "?")), algo=algo,
        state=state, env_steps=run.env_steps, updates=run.updates, latest=latest, best=best,
        wall_time=run.wall_time, started=run.started, problems=tuple(run.problems),
        population=population, best_member=best_member,
    )


def _latest_best(values: np.ndarray) -> tuple[float, float]:
    finite = values[np.isfinite(values)]
    return (float(finite[-1]), float(finite.max())) if len(finite) else (math.nan, math.nan)


def differences(base: dict[str, Any] | None, config: dict[str, Any]) -> str:
    if base is None:
        return ""
    if base is config:
        return "(first)"
    return " ".join(read_differences(base, config)) or "(same)"


SORT_KEYS: dict[str, Callable[[RunRow], Any]] = {
    "started": lambda r: r.started or 0.0,
    "name": lambda r: r.name,
    "env": lambda r: r.env,
    "algo": lambda r: r.algo,
    "state": lambda r: STATES.index(r.state.name),
    "env steps": lambda r: r.env_steps,
    "latest": lambda r: r.latest if math.isfinite(r.latest) else -math.inf,
    "best": lambda r: r.best if math.isfinite(r.best) else -math.inf,
    "wall time": lambda r: r.wall_time,
}


def sort_rows(rows: Sequence[RunRow], key: str, descending: bool) -> list[RunRow]:
    return sorted(rows, key=SORT_KEYS[key], reverse=descending)


def matches(row: RunRow, config: dict[str, Any], text: str) -> bool:
    """Every word of `text` is in the row's name, env, algo, state or a key=value of its
    configuration (case ignored); not a swept key's plain value, which no member trains at."""
    words = text.lower().split()
    if not words:
        return True
    swept = swept_keys(config)
    haystack = " ".join([row.name, row.env, row.algo, row.state.name, "damaged" if row.damaged else "",
                         *(f"{k}={show_value(v)}" for k, v in config.items() if k not in swept)]).lower()
    return all(word in haystack for word in words)
