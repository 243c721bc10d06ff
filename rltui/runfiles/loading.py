"""A run directory read into compact columns: its configuration, events and problems, and
one float column per metric, and a cache that reads a run again only when its files
change. Only files are read: config.toml is read as TOML, so the run's env module is never
imported."""

from __future__ import annotations

import dataclasses
import math
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from rltui.runfiles.names import CONFIG, EVENTS, METRICS, ORIGINAL_CONFIG, POPULATION
from rltui.runfiles.reader import RunFolder, member_tag, population_shape, read_run


@dataclasses.dataclass
class LoadedRun(RunFolder):
    """A run directory read once: its configuration, events and problems as `read_run`
    gives them, and its metrics as one float column per metric (NaN where a record has
    no value), so a run of 100k updates is a few arrays rather than 100k dicts."""

    path: Path
    config: dict[str, Any]
    events: list[dict[str, Any]]
    problems: list[str]
    steps: np.ndarray  # env steps of each record
    wall: np.ndarray  # wall time (s) of each record
    columns: dict[str, np.ndarray]
    updates: int
    started: float | None  # when its configuration was first written (epoch seconds)
    load_seconds: float
    members: int = 0  # a population's size (0: one configuration)
    seeds_per_member: int = 1
    member_table: tuple[dict[str, Any], ...] = ()  # each member's values, state, parent (population.jsonl)

    @property
    def env_steps(self) -> int:
        return int(self.steps[-1]) if len(self.steps) else 0

    @property
    def wall_time(self) -> float:
        return float(self.wall[-1]) if len(self.wall) and math.isfinite(self.wall[-1]) else 0.0

    def metrics(self) -> list[str]:
        return list(self.columns)

    @property
    def is_population(self) -> bool:
        return self.members > 0

    def curve(self, metric: str, x_axis: str = "steps") -> tuple[np.ndarray, np.ndarray]:
        """The x (env steps or wall time) and finite values of `metric`."""
        values = self.columns.get(metric)
        if values is None:
            return np.array([]), np.array([])
        xs = self.steps if x_axis == "steps" else self.wall
        keep = np.isfinite(values) & np.isfinite(xs)
        return xs[keep].astype(float), values[keep]


def _column(values: list[Any]) -> np.ndarray:
    try:
        out = np.array(values, dtype=float)  # None becomes NaN
    except (TypeError, ValueError):
        out = np.array([v if isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan for v in values],
                       dtype=float)
    return out


def _numeric(value: Any) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


def load_run(path: Path) -> LoadedRun:
    """Read a run directory into columns. Never raises for a damaged run: what cannot be
    read is in `problems`."""
    started_clock = time.perf_counter()
    try:
        data = read_run(path)
    except (OSError, ValueError, MemoryError, RecursionError) as err:  # a directory that vanished mid-read, say
        return LoadedRun(Path(path), {}, [], [f"unreadable ({type(err).__name__})"], np.array([], dtype=np.int64),
                         np.array([]), {}, 0, None, time.perf_counter() - started_clock)
    records = data.records
    names: dict[str, None] = {}
    seed_names: dict[tuple[str, int], None] = {}
    member_names: dict[str, int] = {}
    shape = None
    for record in records[:64] + records[-64:]:  # every record of a run carries the same keys
        for key, value in record.items():
            if key not in ("update", "env_steps", "wall_time", "seeds") and _numeric(value):
                names.setdefault(key, None)
        for key, values in (record.get("seeds") or {}).items() if isinstance(record.get("seeds"), dict) else ():
            if isinstance(values, list):
                for i in range(len(values)):
                    seed_names.setdefault((key, i), None)
        shape = population_shape(record) or shape
        for key, values in (record.get("members") or {}).items() if shape is not None else ():
            if isinstance(values, list):
                member_names[key] = max(member_names.get(key, 0), len(values))
    # Plain comprehensions over the records, one per column: a huge run is 100k records.
    columns = {name: _column([r.get(name) for r in records]) for name in names}
    if shape is not None:
        # A population: each member's series; its agents' only where a member has several seeds.
        for name, count in member_names.items():
            lists = [_member_list(r, name) for r in records]
            for m in range(count):
                columns[member_tag(m, name)] = _column([v[m] if v is not None and m < len(v) else None for v in lists])
    if shape is None or shape.seeds > 1:
        for name in dict.fromkeys(name for name, _ in seed_names):
            lists = [_seed_list(r, name) for r in records]
            for (seed_name, i) in seed_names:
                if seed_name == name:
                    tag = f"{name}/seed_{i}" if shape is None else member_tag(i // shape.seeds, name, i % shape.seeds)
                    columns[tag] = _column([v[i] if v is not None and i < len(v) else None for v in lists])
    steps = np.nan_to_num(_column([r.get("env_steps") for r in records]), nan=0).astype(np.int64)
    wall = _column([r.get("wall_time") for r in records])
    updates = int(records[-1].get("update", 0) or 0) if records else 0
    members = shape.members if shape is not None else data.num_members
    return LoadedRun(data.path, data.config, data.events, data.problems, steps, wall, columns, updates,
                     _started(data.path), time.perf_counter() - started_clock, members,
                     shape.seeds if shape is not None else 1, tuple(data.member_table()))


def _member_list(record: dict, name: str) -> list | None:
    members = record.get("members")
    values = members.get(name) if isinstance(members, dict) else None
    return values if isinstance(values, list) else None


def _seed_list(record: dict, name: str) -> list | None:
    seeds = record.get("seeds")
    values = seeds.get(name) if isinstance(seeds, dict) else None
    return values if isinstance(values, list) else None


def _started(path: Path) -> float | None:
    for name in (ORIGINAL_CONFIG, CONFIG, METRICS):  # a resume rewrites config.toml, not the original
        try:
            return (path / name).stat().st_mtime
        except OSError:
            continue
    return None


def signature(path: Path) -> tuple:
    """What changes when a run's files do: each file's mtime and size."""
    out = []
    for name in (CONFIG, METRICS, EVENTS, POPULATION):
        try:
            info = os.stat(path / name)
            out.append((info.st_mtime_ns, info.st_size, info.st_ino))
        except OSError:
            out.append(None)
    return tuple(out)


class RunCache:
    """Loaded runs, each read again only when its files changed (thread-safe: the view
    loads in a worker thread)."""

    def __init__(self, loader: Callable[[Path], LoadedRun] = load_run):
        self._loader = loader
        self._runs: dict[Path, tuple[tuple, LoadedRun]] = {}
        self._lock = threading.Lock()

    def get(self, path: Path) -> LoadedRun:
        key = signature(path)
        with self._lock:
            cached = self._runs.get(path)
        if cached is not None and cached[0] == key:
            return cached[1]
        run = self._loader(path)
        with self._lock:
            self._runs[path] = (key, run)
        return run

    def cached(self, path: Path) -> LoadedRun | None:
        with self._lock:
            cached = self._runs.get(path)
        return cached[1] if cached is not None else None
