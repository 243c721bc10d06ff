"""Per-update metric records, ring buffers of recent history, and immutable snapshots."""

from __future__ import annotations

import collections
import dataclasses
import math
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from rltui.session.events import SessionState
from rltui.session.history import CAPACITY as CURVE_CAPACITY
from rltui.session.history import SEED_PREFIX, CurveBuffer, Curves, empty_curves
from trainers.metrics_spec import (  # noqa: F401
    EPISODE_RETURN,
    METRIC_NAMES,
    METRIC_SPECS,
    RECORDED_METRICS,
    SPS,
    TRAINER_METRICS,
)


def _json_value(name: str, value: float) -> float | int | None:
    """A metric as metrics.jsonl holds it: null where undefined, a count as an integer."""
    if not math.isfinite(value):
        return None
    return int(value) if METRIC_SPECS[name].integer else value


# Each recorded metric and whether it is a count, looked up once: a record is written per
# update, thousands a second where updates are small.
_RECORDED_COUNTS = tuple((name, METRIC_SPECS[name].integer) for name in RECORDED_METRICS)
# Each declared metric and whether the session measures it itself (read from the record's
# field of that name) rather than the trainer (read from its values).
_SERIES_SOURCES = tuple((name, METRIC_SPECS[name].source == "session") for name in METRIC_NAMES)


@dataclasses.dataclass(frozen=True)
class UpdateRecord:
    """One update, as written to metrics.jsonl. `episode_return` is None when no episode
    finished during the update."""

    update: int  # 1-based: updates completed after this one
    env_steps: int
    wall_time: float  # seconds since the run started
    sps: float
    values: Mapping[str, float]  # RECORDED_METRICS -> float (NaN where undefined or not evaluated)
    # With several agents: `values` holds their mean and this each agent's own values
    # (a population's agents member-major: member m's seed s is m * num_seeds + s).
    per_seed: Mapping[str, tuple[float, ...]] = dataclasses.field(default_factory=dict)
    # A population: each member's mean over its seeds (NaN for a member that did not train).
    per_member: Mapping[str, tuple[float, ...]] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", MappingProxyType(dict(self.values)))
        object.__setattr__(self, "per_seed", MappingProxyType({k: tuple(v) for k, v in self.per_seed.items()}))
        object.__setattr__(self, "per_member", MappingProxyType({k: tuple(v) for k, v in self.per_member.items()}))

    @property
    def overlay_returns(self) -> tuple[float, ...]:
        """The returns the chart overlays: each member's in a population, else each seed's."""
        return self.per_member.get(EPISODE_RETURN) or self.per_seed.get(EPISODE_RETURN, ())

    def get(self, name: str) -> float:
        return self.values.get(name, math.nan)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "update": self.update,
            "env_steps": self.env_steps,
            "wall_time": round(self.wall_time, 4),
            SPS: round(self.sps, 1),
        }
        values = self.values
        for name, count in _RECORDED_COUNTS:
            value = float(values.get(name, math.nan))
            out[name] = (int(value) if count else value) if math.isfinite(value) else None
        if self.per_seed:
            out["seeds"] = {
                name: [_json_value(name, float(v)) for v in self.per_seed[name]]
                for name in RECORDED_METRICS
                if name in self.per_seed
            }
        if self.per_member:
            out["members"] = {
                name: [_json_value(name, float(v)) for v in self.per_member[name]]
                for name in RECORDED_METRICS
                if name in self.per_member
            }
        return out


def record_from_json(data: Mapping[str, Any]) -> UpdateRecord:
    """The inverse of `UpdateRecord.to_json` (null back to NaN): a metrics.jsonl line, or a
    snapshot message's record, read back."""
    values = {}
    for name in RECORDED_METRICS:
        value = data.get(name)
        values[name] = math.nan if value is None else float(value)
    return UpdateRecord(
        update=int(data["update"]),
        env_steps=int(data["env_steps"]),
        wall_time=float(data["wall_time"]),
        sps=float(data[SPS]),
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


@dataclasses.dataclass(frozen=True)
class MetricsSnapshot:
    """What listeners see after each chunk: plain immutable data, safe to keep and share."""

    state: SessionState
    update: int
    total_updates: int
    env_steps: int
    total_env_steps: int
    elapsed: float
    sps: float
    hparams: Mapping[str, float]
    new_records: tuple[UpdateRecord, ...]
    # Recent values of every declared metric, oldest first (a RecentHistory when made by a
    # MetricsStore: it carries the whole run's curves too, see `curves`).
    history: Mapping[str, tuple[float, ...]]
    history_env_steps: tuple[int, ...]
    # With several seeds: recent episode returns of each seed (a population: of each
    # member), aligned with `history`.
    seed_returns: tuple[tuple[float, ...], ...] = ()
    # A population's members (rltui.session.population.PopulationView); None for one agent.
    population: Any = None

    @property
    def curves(self) -> Curves:
        """The whole run from update 1, bucketed: what the chart and the sparklines draw."""
        curves = getattr(self.history, "curves", None)
        if curves is None or (len(self.seed_returns) > 1 and not curves.seeds):  # made by hand, from plain values
            store = MetricsStore()
            store.extend(records_from_history(self.history, self.history_env_steps, self.seed_returns))
            curves = store.curves()
        return curves

    @property
    def latest_return(self) -> float | None:
        """Mean return of the most recent update in which an episode finished."""
        values = self.history.get(EPISODE_RETURN, ())
        for value in reversed(values):
            if math.isfinite(value):
                return value
        return None

    @property
    def seed_latest_returns(self) -> tuple[float | None, ...]:
        """With several seeds: each seed's return in the most recent update in which that
        seed finished an episode (None if it has not yet)."""
        return tuple(next((v for v in reversed(values) if math.isfinite(v)), None) for values in self.seed_returns)

    @property
    def eta_seconds(self) -> float | None:
        if self.sps <= 0:
            return None
        return max(0.0, (self.total_env_steps - self.env_steps) / self.sps)


class RecentHistory(Mapping[str, tuple[float, ...]]):
    """The recent values of every declared metric, oldest first (a mapping, as before), and
    `curves`: the whole run, bucketed (rltui.session.history). Built by `MetricsStore.history`,
    so every snapshot made from a store carries its curves."""

    def __init__(self, series: Mapping[str, tuple[float, ...]], curves: Curves):
        self._series = dict(series)
        self.curves = curves

    def __getitem__(self, name: str) -> tuple[float, ...]:
        return self._series[name]

    def __iter__(self):
        return iter(self._series)

    def __len__(self) -> int:
        return len(self._series)


class MetricsStore:
    """The whole run's curves (a bounded multi-resolution buffer) and ring buffers of the
    recent raw values, behind a lock; hands out immutable snapshots."""

    def __init__(self, capacity: int = 4096, curve_capacity: int = CURVE_CAPACITY):
        self._lock = threading.Lock()
        self._steps: collections.deque[int] = collections.deque(maxlen=capacity)
        self._updates: collections.deque[int] = collections.deque(maxlen=capacity)
        self._walls: collections.deque[float] = collections.deque(maxlen=capacity)
        # Every declared metric: the trainer's from each record's values, the session's own
        # (sps) from the record's field of that name.
        self._series = {name: collections.deque(maxlen=capacity) for name in METRIC_NAMES}
        self._capacity = capacity
        self._seed_returns: list[collections.deque[float]] = []
        self._curve_capacity = curve_capacity
        self._curves: CurveBuffer | None = None  # made at the first records: their seeds are its columns
        self._last_record: UpdateRecord | None = None

    def _buffer(self, seeds: int) -> CurveBuffer:
        if self._curves is None:
            self._curves = CurveBuffer(_columns(seeds), self._curve_capacity)
        return self._curves

    def extend(self, records: Iterable[UpdateRecord]) -> None:
        records = list(records)
        if not records:
            return
        # Column by column: a chunk can hold thousands of records, each with every metric.
        nan = math.nan
        columns = [[getattr(record, name) for record in records] if own
                   else [float(record.values.get(name, nan)) for record in records]
                   for name, own in _SERIES_SOURCES]
        returns = [record.overlay_returns for record in records]
        updates = [record.update for record in records]
        steps = [record.env_steps for record in records]
        walls = [record.wall_time for record in records]
        with self._lock:
            self._last_record = records[-1]
            self._steps.extend(steps)
            self._updates.extend(updates)
            self._walls.extend(walls)
            for (name, _), column in zip(_SERIES_SOURCES, columns):
                self._series[name].extend(column)
            widest = max(map(len, returns))
            while len(self._seed_returns) < widest:
                self._seed_returns.append(collections.deque(maxlen=self._capacity))
            if widest:
                for seed, series in enumerate(self._seed_returns[:widest]):
                    # A record with fewer returns than the widest adds none for the seeds it lacks.
                    series.extend(r[seed] for r in returns if len(r) > seed)
            buffer = self._buffer(len(returns[0]))
            seeds = len(buffer.columns) - len(METRIC_NAMES)
            values = np.full((len(records), len(buffer.columns)), np.nan)
            values[:, : len(columns)] = np.asarray(columns, dtype=float).T
            for i, overlay in enumerate(returns):
                if overlay and seeds:
                    values[i, len(columns) : len(columns) + min(seeds, len(overlay))] = overlay[:seeds]
            buffer.extend(updates, steps, walls, values)

    def drop_after(self, env_steps: int) -> None:
        """Forget the records past `env_steps` (a rollback to a checkpoint taken there)."""
        with self._lock:
            if self._last_record is not None and self._last_record.env_steps > env_steps:
                self._last_record = None
            while self._steps and self._steps[-1] > env_steps:
                for series in (self._steps, self._updates, self._walls, *self._series.values(), *self._seed_returns):
                    if series:
                        series.pop()
            if self._curves is not None:
                self._curves.drop_after(env_steps, self._tail(len(self._curves.columns)))

    def _tail(self, width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The recent raw rows, as the curve buffer's columns."""
        count = len(self._steps)
        values = np.full((count, width), np.nan)
        for j, series in enumerate(self._series.values()):
            values[:, j] = list(series)[-count:] if count else []
        for k, series in enumerate(self._seed_returns[: width - len(self._series)]):
            seed = list(series)[-count:]
            values[count - len(seed) :, len(self._series) + k] = seed
        return np.asarray(self._updates), np.asarray(self._steps, dtype=float), np.asarray(self._walls), values

    def load_curves(self, curves: Curves) -> None:
        """Start from `curves` (an attached client: the run's history message). Records
        already in them that arrive later count in the recent values only."""
        with self._lock:
            self._curves = CurveBuffer(curves.columns, self._curve_capacity)
            self._curves.load(curves)

    def curves(self) -> Curves:
        with self._lock:
            return self._curves.curves() if self._curves is not None else empty_curves(_columns(0))

    def history(self) -> tuple[RecentHistory, tuple[int, ...]]:
        with self._lock:
            series = {name: tuple(values) for name, values in self._series.items()}
            curves = self._curves.curves() if self._curves is not None else empty_curves(_columns(0))
            return RecentHistory(series, curves), tuple(self._steps)

    def last_record(self) -> UpdateRecord | None:
        """The latest record added (None after a rollback past it)."""
        with self._lock:
            return self._last_record

    def seed_returns(self) -> tuple[tuple[float, ...], ...]:
        with self._lock:
            return tuple(tuple(series) for series in self._seed_returns)


def _columns(seeds: int) -> tuple[str, ...]:
    return (*METRIC_NAMES, *(f"{SEED_PREFIX}{k}" for k in range(seeds if seeds > 1 else 0)))


def records_from_history(
    history: Mapping[str, Sequence[float]], steps: Sequence[int], seed_returns: Sequence[Sequence[float]] = ()
) -> list[UpdateRecord]:
    """Update records rebuilt from a snapshot's recent values (one made by hand, without
    curves), so that it can be drawn like any other."""
    lengths = [len(steps), *(len(v) for v in history.values()), *(len(v) for v in seed_returns)]
    count = min(lengths) if history else 0

    def at(values: Sequence[float], i: int) -> float:
        return float(values[len(values) - count + i])

    return [
        UpdateRecord(
            update=i + 1, env_steps=int(at(steps, i)), wall_time=0.0,
            sps=at(history[SPS], i) if SPS in history else math.nan,
            values={name: at(values, i) for name, values in history.items() if name != SPS},
            per_seed={EPISODE_RETURN: tuple(at(v, i) for v in seed_returns)} if len(seed_returns) > 1 else {},
        )
        for i in range(count)
    ]


def load_run_history(store: MetricsStore, path: Path, last_update: int | None = None, batch: int = 4096) -> int:
    """Feed `store` the update records of a run's metrics.jsonl (a resume: the curves
    start from update 1, not from the checkpoint), up to `last_update`. Streamed in batches:
    memory stays the store's, whatever the file's length. Lines that are not records (cut
    short by a crash) are passed over. Returns the number of records read."""
    from rltui.infra.read_limits import read_lines
    from trainers.json_text import loads

    count, pending = 0, []
    try:
        for line in read_lines(path):
            try:
                record = record_from_json(loads(line))
            except (ValueError, TypeError, KeyError, AttributeError, OverflowError):
                continue  # a line too long (None), damaged, or not a record
            if last_update is not None and record.update > last_update:
                break
            pending.append(record)
            if len(pending) >= batch:
                store.extend(pending)
                count, pending = count + len(pending), []
    except OSError:
        pass  # no history to show: the run goes on, its curves start at the checkpoint
    store.extend(pending)
    return count + len(pending)
