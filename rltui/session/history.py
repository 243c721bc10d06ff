"""The whole run's curves in bounded memory: a multi-resolution buffer of buckets.

Each bucket covers `width` consecutive updates and keeps, for every column (each metric,
and each seed's episode return), the minimum, maximum, sum and count of the finite values
and the last finite value. When the buffer is full, neighbouring buckets merge in pairs and
the width doubles, so a run of any length is held in at most `capacity` buckets: the mean
shows the trend, and the minimum and maximum keep every spike, however far back.

Plain NumPy, no textual: the session thread feeds it (a cost per chunk proportional to the
chunk plus the buffer's fixed size), and clients rebuild it from the control protocol.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np

CAPACITY = 1024  # buckets: a chart is at most a few hundred columns, two points each
SEED_PREFIX = "seed:"  # a seed's episode return column: seed:0, seed:1, ...

_SCALARS = ("count", "update_first", "update_last", "steps_first", "steps_last", "wall_first", "wall_last")
_MATRICES = ("lo", "hi", "total", "finite", "last")


class Series(NamedTuple):
    """One column, bucket by bucket: the minimum, maximum and mean of its finite values
    (NaN in a bucket with none)."""

    lo: np.ndarray
    hi: np.ndarray
    mean: np.ndarray


class Extremes(NamedTuple):
    low: float
    high: float


def _empty(columns: int) -> dict[str, np.ndarray]:
    state = {name: np.zeros(0, dtype=np.int64 if name in ("count", "update_first", "update_last") else float)
             for name in _SCALARS}
    state.update({name: np.zeros((0, columns)) for name in _MATRICES})
    return state


def _rows_state(updates, steps, walls, values: np.ndarray) -> dict[str, np.ndarray]:
    """Raw update rows as buckets of one update each."""
    finite = np.isfinite(values)
    kept = np.where(finite, values, np.nan)
    updates = np.asarray(updates, dtype=np.int64)
    steps, walls = np.asarray(steps, dtype=float), np.asarray(walls, dtype=float)
    return {
        "count": np.ones(len(values), dtype=np.int64),
        "update_first": updates, "update_last": updates,
        "steps_first": steps, "steps_last": steps,
        "wall_first": walls, "wall_last": walls,
        "lo": kept, "hi": kept, "last": kept,
        "total": np.where(finite, values, 0.0), "finite": finite.astype(float),
    }


def _reduce(state: dict[str, np.ndarray], starts: np.ndarray) -> dict[str, np.ndarray]:
    """Merge the runs of consecutive buckets that begin at `starts` into one bucket each."""
    size = len(state["count"])
    ends = np.append(starts[1:], size) - 1
    out = {
        "count": np.add.reduceat(state["count"], starts),
        "lo": np.fmin.reduceat(state["lo"], starts, axis=0),
        "hi": np.fmax.reduceat(state["hi"], starts, axis=0),
        "total": np.add.reduceat(state["total"], starts, axis=0),
        "finite": np.add.reduceat(state["finite"], starts, axis=0),
    }
    for name in ("update", "steps", "wall"):
        out[f"{name}_first"] = state[f"{name}_first"][starts]
        out[f"{name}_last"] = state[f"{name}_last"][ends]
    # The last finite value of each run: the latest bucket of it that has one.
    where = np.where(state["finite"] > 0, np.arange(size)[:, None], -1)
    latest = np.maximum.reduceat(where, starts, axis=0)
    picked = state["last"][np.clip(latest, 0, None), np.arange(state["last"].shape[1])]
    out["last"] = np.where(latest >= 0, picked, np.nan)
    return out


def _concat(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {name: np.concatenate([a[name], b[name]]) for name in a}


def _take(state: dict[str, np.ndarray], index) -> dict[str, np.ndarray]:
    return {name: array[index] for name, array in state.items()}


@dataclasses.dataclass(frozen=True, eq=False)
class Curves:
    """An immutable copy of a `CurveBuffer`: what a snapshot carries to the chart, the
    sparklines and attached clients."""

    columns: tuple[str, ...]
    width: int  # updates per full bucket
    state: Mapping[str, np.ndarray]  # read-only arrays, one entry per bucket
    latest: Mapping[str, float] = dataclasses.field(default_factory=dict)  # the latest update's values, NaN included

    def __len__(self) -> int:
        return len(self.state["count"])

    @property
    def seeds(self) -> int:
        return sum(1 for c in self.columns if c.startswith(SEED_PREFIX))

    @property
    def last_update(self) -> int:
        return int(self.state["update_last"][-1]) if len(self) else 0

    @property
    def updates(self) -> int:
        """How many updates the buckets hold."""
        return int(self.state["count"].sum())

    def _column(self, name: str) -> int | None:
        try:
            return self.columns.index(name)
        except ValueError:
            return None

    def series(self, name: str) -> Series:
        i = self._column(name)
        if i is None:
            nan = np.full(len(self), np.nan)
            return Series(nan, nan, nan)
        finite = self.state["finite"][:, i]
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(finite > 0, self.state["total"][:, i] / np.maximum(finite, 1), np.nan)
        return Series(self.state["lo"][:, i], self.state["hi"][:, i], mean)

    def seed_series(self) -> list[Series]:
        return [self.series(f"{SEED_PREFIX}{k}") for k in range(self.seeds)]

    def seed_band(self) -> tuple[np.ndarray, np.ndarray]:
        """The lowest and highest return of any seed in each bucket."""
        seeds = self.seed_series()
        if not seeds:
            nan = np.full(len(self), np.nan)
            return nan, nan
        with np.errstate(invalid="ignore"), _quiet():
            return np.nanmin([s.lo for s in seeds], axis=0), np.nanmax([s.hi for s in seeds], axis=0)

    def extremes(self, name: str) -> Extremes | None:
        """The lowest and highest finite value of the whole run, exactly."""
        lo, hi, _ = self.series(name)
        if not np.isfinite(lo).any():
            return None
        return Extremes(float(np.nanmin(lo)), float(np.nanmax(hi)))

    def latest_finite(self, name: str) -> float | None:
        i = self._column(name)
        if i is None:
            return None
        last = self.state["last"][:, i]
        finite = np.flatnonzero(np.isfinite(last))
        return float(last[finite[-1]]) if finite.size else None

    def x(self, axis: str = "steps") -> np.ndarray:
        """Each bucket's position: the middle of its env steps, or of its wall time."""
        key = "steps" if axis == "steps" else "wall"
        return (self.state[f"{key}_first"] + self.state[f"{key}_last"]) / 2

    def rebin(self, buckets: int) -> Curves:
        """At most `buckets` buckets, each merging a run of consecutive ones (exact: the
        minimum of minima, the maximum of maxima, the sums of sums)."""
        size = len(self)
        if size <= buckets:
            return self
        starts = np.unique((np.arange(buckets) * size) // buckets)
        state = _reduce(dict(self.state), starts)
        return Curves(self.columns, self.width * -(-size // buckets), _frozen(state), self.latest)

    # --- the control protocol ----------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        def numbers(array) -> list:
            return [None if not math.isfinite(v) else float(f"{v:.7g}") for v in array.tolist()]

        return {
            "columns": list(self.columns),
            "width": self.width,
            **{name: self.state[name].tolist() if name.startswith(("count", "update")) else numbers(self.state[name])
               for name in _SCALARS},
            **{name: [numbers(self.state[name][:, i]) for i in range(len(self.columns))] for name in _MATRICES},
            "latest": {k: (v if math.isfinite(v) else None) for k, v in self.latest.items()},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Curves:
        """ValueError (or TypeError) if `data` is not a history message's curves."""
        columns = tuple(str(c) for c in data["columns"])
        size = len(data["count"])
        state: dict[str, np.ndarray] = {}
        for name in _SCALARS:
            kind = np.int64 if name.startswith(("count", "update")) else float
            state[name] = np.asarray([math.nan if v is None else v for v in data[name]], dtype=kind)
        for name in _MATRICES:
            cols = data[name]
            if len(cols) != len(columns) or any(len(c) != size for c in cols):
                raise ValueError(f"curves: {name} does not match the columns")
            matrix = np.asarray([[math.nan if v is None else v for v in c] for c in cols], dtype=float)
            state[name] = matrix.T if columns else np.zeros((size, 0))
        if any(len(a) != size for a in state.values()):
            raise ValueError("curves: arrays of different lengths")
        latest = {str(k): math.nan if v is None else float(v) for k, v in (data.get("latest") or {}).items()}
        return cls(columns, max(1, int(data["width"])), _frozen(state), MappingProxyType(latest))


class _quiet:
    """numpy warns about all-NaN slices, which are routine here (no episode ended)."""

    def __enter__(self):
        import warnings

        self._catch = warnings.catch_warnings()
        self._catch.__enter__()
        warnings.simplefilter("ignore", RuntimeWarning)

    def __exit__(self, *exc):
        self._catch.__exit__(*exc)


def _frozen(state: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]:
    out = {}
    for name, array in state.items():
        array = np.array(array)  # a copy the buffer never writes to
        array.flags.writeable = False
        out[name] = array
    return MappingProxyType(out)


def empty_curves(columns: Sequence[str] = ()) -> Curves:
    return Curves(tuple(columns), 1, _frozen(_empty(len(columns))))


class CurveBuffer:
    """Mutable, not thread-safe (MetricsStore locks around it). At most `capacity`
    buckets; memory is fixed by `capacity` and the number of columns, whatever the run's
    length."""

    def __init__(self, columns: Sequence[str], capacity: int = CAPACITY):
        if capacity < 2 or capacity % 2:
            raise ValueError("capacity must be an even number of at least 2")
        self.columns = tuple(columns)
        self.capacity = capacity
        self.width = 1
        self._state = _empty(len(self.columns))
        self.latest: dict[str, float] = {}

    def __len__(self) -> int:
        return len(self._state["count"])

    @property
    def last_update(self) -> int:
        return int(self._state["update_last"][-1]) if len(self) else 0

    @property
    def nbytes(self) -> int:
        return sum(array.nbytes for array in self._state.values())

    def extend(self, updates: Sequence[int], steps: Sequence[float], walls: Sequence[float],
               values: np.ndarray) -> None:
        """Add update rows (`values`: one row per update, one column per column). Rows at or
        before the last update held are already in the buffer and are passed over."""
        updates = np.asarray(updates, dtype=np.int64)
        if not len(updates):
            return
        values = np.asarray(values, dtype=float).reshape(len(updates), len(self.columns))
        new = updates > self.last_update
        if not new.all():
            updates, steps, walls, values = updates[new], np.asarray(steps)[new], np.asarray(walls)[new], values[new]
            if not len(updates):
                return
        self.latest = dict(zip(self.columns, values[-1].tolist()))
        rows = _rows_state(updates, steps, walls, values)
        state = self._state
        if len(self) and state["count"][-1] < self.width:  # fill the last bucket first
            room = int(self.width - state["count"][-1])
            head = _take(rows, slice(0, room))
            rows = _take(rows, slice(room, None))
            merged = _reduce(_concat(_take(state, slice(-1, None)), head), np.array([0]))
            state = _concat(_take(state, slice(0, -1)), merged)
        if len(rows["count"]):
            state = _concat(state, _reduce(rows, np.arange(0, len(rows["count"]), self.width)))
        while len(state["count"]) > self.capacity:
            state = _reduce(state, np.arange(0, len(state["count"]), 2))
            self.width *= 2
        self._state = state

    def drop_after(self, env_steps: float, tail: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]) -> None:
        """Forget the updates past `env_steps` (a rollback). The bucket that holds both kept
        and forgotten updates is rebuilt from `tail`, the recent raw rows (updates, steps,
        walls, values) the caller keeps; updates older than the tail in that bucket are lost."""
        keep = self._state["steps_last"] <= env_steps
        cut = int(np.argmin(keep)) if not keep.all() else len(self)
        self._state = _take(self._state, slice(0, cut))
        updates, steps, walls, values = tail
        kept = np.asarray(steps) <= env_steps
        self.extend(np.asarray(updates)[kept], np.asarray(steps)[kept], np.asarray(walls)[kept],
                    np.asarray(values)[kept])
        if len(values) and kept.any():
            self.latest = dict(zip(self.columns, np.asarray(values)[kept][-1].tolist()))
        else:  # the latest update kept is older than the tail: its bucket's last values
            last = self._state["last"][-1] if len(self) else np.full(len(self.columns), np.nan)
            self.latest = dict(zip(self.columns, last.tolist()))

    def load(self, curves: Curves) -> None:
        """Take over `curves` (an attached client, from the run's history message)."""
        self.columns = curves.columns
        self.width = curves.width
        self._state = {name: np.array(array) for name, array in curves.state.items()}
        while len(self) > self.capacity:
            self._state = _reduce(self._state, np.arange(0, len(self), 2))
            self.width *= 2
        self.latest = dict(curves.latest)

    def curves(self) -> Curves:
        return Curves(self.columns, self.width, _frozen(self._state), MappingProxyType(dict(self.latest)))
