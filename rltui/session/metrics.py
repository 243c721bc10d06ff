"""Per-update metric records, ring buffers of recent history, and immutable snapshots."""

from __future__ import annotations

import collections
import dataclasses
import math
import threading
from types import MappingProxyType
from typing import Any, Mapping

from rltui.session.events import SessionState
from trainers.metrics_spec import METRIC_NAMES, METRIC_SPECS, RECORDED_METRICS, TRAINER_METRICS  # noqa: F401


def _json_value(name: str, value: float) -> float | int | None:
    """A metric as metrics.jsonl holds it: null where undefined, a count as an integer."""
    if not math.isfinite(value):
        return None
    return int(value) if METRIC_SPECS[name].integer else value


@dataclasses.dataclass(frozen=True)
class UpdateRecord:
    """One update, as written to metrics.jsonl. `episode_return` is None when no episode
    finished during the update."""

    update: int  # 1-based: updates completed after this one
    env_steps: int
    wall_time: float  # seconds since the run started
    sps: float
    values: Mapping[str, float]  # RECORDED_METRICS -> float (NaN where undefined or not evaluated)
    # With several seeds: `values` holds their mean and this each seed's own values.
    per_seed: Mapping[str, tuple[float, ...]] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", MappingProxyType(dict(self.values)))
        object.__setattr__(self, "per_seed", MappingProxyType({k: tuple(v) for k, v in self.per_seed.items()}))

    def get(self, name: str) -> float:
        return self.values.get(name, math.nan)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "update": self.update,
            "env_steps": self.env_steps,
            "wall_time": round(self.wall_time, 4),
            "sps": round(self.sps, 1),
        }
        for name in RECORDED_METRICS:
            value = self.values.get(name, math.nan)
            out[name] = _json_value(name, float(value))
        if self.per_seed:
            out["seeds"] = {
                name: [_json_value(name, float(v)) for v in self.per_seed[name]]
                for name in RECORDED_METRICS
                if name in self.per_seed
            }
        return out


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
    history: Mapping[str, tuple[float, ...]]  # recent values of every declared metric, oldest first
    history_env_steps: tuple[int, ...]
    # With several seeds: recent episode returns of each seed, aligned with `history`.
    seed_returns: tuple[tuple[float, ...], ...] = ()

    @property
    def latest_return(self) -> float | None:
        """Mean return of the most recent update in which an episode finished."""
        values = self.history.get("episode_return", ())
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


class MetricsStore:
    """Ring buffers of recent metrics behind a lock; hands out immutable snapshots."""

    def __init__(self, capacity: int = 4096):
        self._lock = threading.Lock()
        self._steps: collections.deque[int] = collections.deque(maxlen=capacity)
        # Every declared metric: the trainer's from each record's values, the session's own
        # (sps) from the record's field of that name.
        self._series = {name: collections.deque(maxlen=capacity) for name in METRIC_NAMES}
        self._capacity = capacity
        self._seed_returns: list[collections.deque[float]] = []

    def extend(self, records: list[UpdateRecord]) -> None:
        with self._lock:
            for record in records:
                self._steps.append(record.env_steps)
                for name, series in self._series.items():
                    own = METRIC_SPECS[name].source == "session"
                    series.append(getattr(record, name) if own else float(record.get(name)))
                returns = record.per_seed.get("episode_return", ())
                while len(self._seed_returns) < len(returns):
                    self._seed_returns.append(collections.deque(maxlen=self._capacity))
                for series, value in zip(self._seed_returns, returns):
                    series.append(value)

    def drop_after(self, env_steps: int) -> None:
        """Forget the records past `env_steps` (a rollback to a checkpoint taken there)."""
        with self._lock:
            while self._steps and self._steps[-1] > env_steps:
                self._steps.pop()
                for series in (*self._series.values(), *self._seed_returns):
                    if series:
                        series.pop()

    def history(self) -> tuple[Mapping[str, tuple[float, ...]], tuple[int, ...]]:
        with self._lock:
            series = {name: tuple(values) for name, values in self._series.items()}
            return MappingProxyType(series), tuple(self._steps)

    def seed_returns(self) -> tuple[tuple[float, ...], ...]:
        with self._lock:
            return tuple(tuple(series) for series in self._seed_returns)
