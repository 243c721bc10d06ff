"""Each agent's latest finished episode, carried forward: the rule that makes a mean over
seeds (or members) a curve rather than a sawtooth.

An agent finishes episodes at its own pace: in a given update some seeds end one and the
others do not. A mean over only the seeds that ended one swings with which seeds those
were. Instead, each seed's episode statistics (those a trainer reports per finished
episode: the return and the length) hold its latest finished episode's values until it
finishes another, and the mean is over every seed that has finished one (NaN only before
any has). The session applies this to the rows it records, so metrics.jsonl, the chart,
the headless line and the loggers all see the same values.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from trainers.metrics_spec import METRICS

# The per-episode statistics a trainer reports (NaN in an update where no episode ended).
CARRIED_METRICS = tuple(spec.name for spec in METRICS if spec.episodic and spec.source == "trainer")


class LatestEpisodes:
    """Per agent, the values of its latest finished episode. Not thread-safe: the session
    thread alone feeds it."""

    def __init__(self) -> None:
        self._latest: dict[str, np.ndarray] = {}
        self._last_update = 0

    def resume_from(self, per_seed: Mapping[str, tuple[float, ...]], update: int) -> None:
        """Start from a recorded update's values (a resume: the last record before its checkpoint)."""
        self._latest = {name: np.asarray(per_seed[name], np.float64) for name in CARRIED_METRICS if name in per_seed}
        self._last_update = update

    def carry(self, row: Mapping[str, Any], update: int) -> dict[str, Any]:
        """A backend row of update `update` (1-based) with each agent's episode statistics
        carried forward under "per_seed" and their mean over the agents that have one. A
        row of one agent (no "per_seed") is returned as it is. An update at or before the
        last one seen is a rollback: what was carried belongs to updates now undone."""
        if update <= self._last_update:
            self._latest = {}
        self._last_update = update
        per_seed = row.get("per_seed")
        if not per_seed:
            return dict(row)
        out = dict(row)
        seeds = dict(per_seed)
        for name in CARRIED_METRICS:
            if name not in seeds:
                continue
            values = np.asarray(seeds[name], np.float64)
            latest = self._latest.get(name)
            if latest is None or latest.shape != values.shape:
                latest = np.full(values.shape, math.nan)
            latest = np.where(np.isfinite(values), values, latest)
            self._latest[name] = latest
            seeds[name] = tuple(float(v) for v in latest)
            finite = latest[np.isfinite(latest)]
            out[name] = float(finite.mean()) if finite.size else math.nan
        out["per_seed"] = seeds
        return out
