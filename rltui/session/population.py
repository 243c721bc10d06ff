"""A population's members as the session keeps them: each member's hyperparameters, its state
(training, frozen, diverged), its results, its lineage, and population-based training.

Plain Python and NumPy: the session asks it for the per-agent hyperparameters and the mask of
active agents before each chunk, and hands it each chunk's per-agent metrics after. Agents
are member-major: agent `m * num_seeds + s` is member m's seed s.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import math
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import numpy as np

from rltui.config.sweep import pbt_replace_count
from rltui.config.sweep_spec import PERTURBABLE
from trainers.hparams import LIVE_HPARAMS, TRAINER_KEYS, DynamicHParams, HParamError, check_changes, quote
from trainers.metrics_spec import EPISODE_RETURN, EVAL_RETURN, METRIC_SPECS

TREND_LENGTH = 32  # recent returns kept per member for its sparkline
_RULES = {key.attr: key.rule for key in TRAINER_KEYS}


class MemberState(str, enum.Enum):
    TRAINING = "training"
    FROZEN = "frozen"  # by the user: its state is kept, nothing updates it
    DIVERGED = "diverged"  # its update went non-finite: frozen at its last finite state


@dataclasses.dataclass(frozen=True)
class MemberView:
    """One leaderboard row."""

    index: int
    values: Mapping[str, float]  # its swept (or perturbed) hyperparameters
    state: MemberState
    latest_return: float | None
    best_return: float | None
    eval_return: float | None
    trend: tuple[float, ...]  # recent mean returns over its seeds, oldest first
    parent: int | None  # the member it was last cloned from


@dataclasses.dataclass(frozen=True)
class PopulationView:
    """What clients see of the population after each chunk: immutable."""

    keys: tuple[str, ...]  # the keys that differ between members (swept or perturbed)
    num_seeds: int
    members: tuple[MemberView, ...]
    pbt_every_updates: int = 0


@dataclasses.dataclass(frozen=True)
class PBTPolicy:
    every_updates: int = 0  # 0: off
    fraction: float = 0.25
    perturb: tuple[float, ...] = (0.8, 1.25)
    metric: str = EPISODE_RETURN  # or EVAL_RETURN
    keys: tuple[str, ...] = ()  # perturbed keys; empty: the swept ones
    seed: int = 0

    @property
    def enabled(self) -> bool:
        return self.every_updates > 0


@dataclasses.dataclass(frozen=True)
class Replacement:
    """One exploit-and-explore step: `target` takes over what `source` learned, with `values`."""

    target: int
    source: int
    values: Mapping[str, float]
    previous: Mapping[str, float]


def fit_value(name: str, value: float) -> float:
    """`value` for traced key `name`, pulled inside the key's bounds when a perturbation
    took it outside (gamma 0.99 x 1.25 becomes 1.0)."""
    rule = _RULES[name]
    for bound in ("high", "low"):
        limit = getattr(rule, bound, None)
        if limit is not None:
            value = min(value, limit) if bound == "high" else max(value, limit)
    return float(np.float32(value))


class Population:
    def __init__(self, base: DynamicHParams, members: Sequence[Mapping[str, float]], num_seeds: int,
                 pbt: PBTPolicy = PBTPolicy()):
        if len(members) < 2:
            raise ValueError("a population has at least two members")
        self.num_seeds = num_seeds
        self.pbt = pbt
        self.swept = tuple(name for name in base._fields if any(name in m for m in members))
        # What a clone's factor and PBT's explore multiply: the chosen keys, else the swept
        # numeric ones (a switch such as anneal_lr is 0 or 1, not a scale).
        self.perturbed = tuple(pbt.keys) or tuple(k for k in self.swept if k in PERTURBABLE)
        common = base.as_floats()
        self._values = [{**common, **{k: float(v) for k, v in m.items()}} for m in members]
        self._states = [MemberState.TRAINING] * len(members)
        self._parents: list[int | None] = [None] * len(members)
        self._best: list[float | None] = [None] * len(members)
        self._latest: list[float | None] = [None] * len(members)
        self._eval: list[float | None] = [None] * len(members)
        self._trend = [collections.deque(maxlen=TREND_LENGTH) for _ in members]
        # Returns since the last PBT step, per member: its score at the next one.
        self._window: list[list[float]] = [[] for _ in members]
        self._trainer_hparams: DynamicHParams | None = None
        # The changes in this history so far (population.jsonl's `seq`): a checkpoint keeps
        # it, so a resume or rollback knows which lines of the file its history holds. None
        # after a checkpoint that did not count them.
        self.changes: int | None = 0

    # --- what the trainer gets -------------------------------------------------------------
    @property
    def num_members(self) -> int:
        return len(self._values)

    @property
    def num_agents(self) -> int:
        return self.num_members * self.num_seeds

    @property
    def keys(self) -> tuple[str, ...]:
        """The keys shown per member: the swept ones, then any a later edit or clone made differ."""
        differ = [name for name in self._values[0]
                  if name not in self.swept and len({v[name] for v in self._values}) > 1]
        return (*self.swept, *differ)

    def trainer_hparams(self) -> DynamicHParams:
        """Every traced hyperparameter as one float32 per agent. Cached: the same arrays
        until something changes, so a chunk's call costs nothing."""
        if self._trainer_hparams is None:
            columns = {
                name: np.repeat(np.array([v[name] for v in self._values], np.float32), self.num_seeds)
                for name in DynamicHParams._fields
            }
            self._trainer_hparams = DynamicHParams(**columns)
        return self._trainer_hparams

    def active(self) -> np.ndarray:
        return np.repeat(np.array([s is MemberState.TRAINING for s in self._states]), self.num_seeds)

    def values(self, member: int) -> dict[str, float]:
        return dict(self._values[member])

    def state(self, member: int) -> MemberState:
        return self._states[member]

    # --- changes ---------------------------------------------------------------------------
    def check_members(self, members: Iterable[int] | None) -> tuple[int, ...]:
        """`members` as indices (None: every member), or HParamError naming a bad one."""
        if members is None:
            return tuple(range(self.num_members))
        out = []
        for m in members:
            if isinstance(m, bool) or not isinstance(m, int) or not 0 <= m < self.num_members:
                raise HParamError(f"member {quote(m)}: expected a member index from 0 to {self.num_members - 1}")
            out.append(m)
        if not out:
            raise HParamError("no member selected")
        return tuple(dict.fromkeys(out))

    def set_values(self, changes: Mapping[str, object], members: Iterable[int] | None) -> dict[int, dict[str, float]]:
        """Apply a live edit to `members`; returns each member's previous values of the edited keys."""
        checked = check_changes(changes)
        chosen = self.check_members(members)
        previous = {m: {k: self._values[m][k] for k in checked} for m in chosen}
        for m in chosen:
            self._values[m].update(checked)
        self._trainer_hparams = None
        return previous

    def set_frozen(self, members: Iterable[int], frozen: bool) -> tuple[int, ...]:
        """Freeze or thaw; returns the members whose state changed. Thawing a diverged member
        lets it train again from its last finite state."""
        changed = []
        for m in self.check_members(members):
            new = MemberState.FROZEN if frozen else MemberState.TRAINING
            if self._states[m] is not new and not (frozen and self._states[m] is MemberState.DIVERGED):
                self._states[m] = new
                changed.append(m)
        return tuple(changed)

    def clone(self, source: int, targets: Iterable[int], factors: Mapping[str, float] | float = 1.0
              ) -> list[Replacement]:
        """Record that each target takes over `source`'s agents and values, each key of the
        perturbed ones multiplied by its factor. The caller copies the agents' state."""
        (source,) = self.check_members([source])
        keys = self.perturbed
        if not isinstance(factors, Mapping):
            factors = {k: float(factors) for k in keys}
        for name, factor in factors.items():
            if name not in LIVE_HPARAMS:
                raise HParamError(f"{quote(name)}: not a live hyperparameter; live: {', '.join(LIVE_HPARAMS)}")
            if not (isinstance(factor, (int, float)) and math.isfinite(factor) and factor > 0):
                raise HParamError(f"clone factor for {name}: expected a positive number, got {quote(factor)}")
        out = []
        for target in self.check_members(targets):
            if target == source:
                raise HParamError(f"member {source}: cannot clone a member into itself")
            values = {k: fit_value(k, self._values[source][k] * f) for k, f in factors.items()}
            out.append(self._replace(target, source, values))
        return out

    def _replace(self, target: int, source: int, values: Mapping[str, float]) -> Replacement:
        previous = {k: self._values[target][k] for k in values}
        self._values[target] = {**self._values[source], **values}
        self._states[target] = MemberState.TRAINING
        self._parents[target] = source
        self._best[target] = self._best[source]
        self._latest[target] = self._latest[source]
        self._trend[target] = collections.deque(self._trend[source], maxlen=TREND_LENGTH)
        self._window[target] = []
        self._trainer_hparams = None
        return Replacement(target=target, source=source, values=MappingProxyType(dict(values)),
                           previous=MappingProxyType(previous))

    def agent_sources(self, replacements: Iterable[Replacement]) -> np.ndarray:
        """For the backend's clone: each agent's source agent (itself where nothing changes)."""
        source = np.arange(self.num_agents)
        for r in replacements:
            for s in range(self.num_seeds):
                source[r.target * self.num_seeds + s] = r.source * self.num_seeds + s
        return source

    # --- results ---------------------------------------------------------------------------
    def member_means(self, per_agent: Sequence[float], *, finite_only: bool = True) -> tuple[float, ...]:
        """Per agent values -> per member mean over its seeds (over the finite ones when
        `finite_only`: a seed that finished no episode has no return)."""
        values = np.asarray(per_agent, np.float64).reshape(self.num_members, self.num_seeds)
        out = []
        for row in values:
            keep = row[np.isfinite(row)] if finite_only else row
            out.append(float(keep.mean()) if keep.size else math.nan)
        return tuple(out)

    def shape_row(self, row: dict[str, Any]) -> dict[str, Any]:
        """A backend row of one update (its per-agent values under "per_seed") as the session
        records it: the means over the training agents, and each member's under "per_member";
        a frozen member's values are NaN (it did not update)."""
        per_agent = {name: np.asarray(values, np.float64) for name, values in row.get("per_seed", {}).items()}
        training = self.active()
        out = dict(row)
        per_member = {}
        for name, values in per_agent.items():
            values = np.where(training, values, np.nan)
            if METRIC_SPECS[name].combine == "sum":  # a count: the training agents' total
                out[name] = float(np.nansum(values))
                per_member[name] = tuple(float(x) for x in np.nansum(values.reshape(self.num_members, -1), axis=1))
                continue
            finite = values[np.isfinite(values)]
            out[name] = float(finite.mean()) if finite.size else math.nan
            per_member[name] = self.member_means(values)
        out["per_member"] = per_member
        return out

    def observe(self, per_member_returns: Sequence[float]) -> None:
        for m, value in enumerate(per_member_returns):
            if not math.isfinite(value):
                continue
            self._latest[m] = value
            self._trend[m].append(value)
            self._window[m].append(value)
            if self._best[m] is None or value > self._best[m]:
                self._best[m] = value

    def observe_eval(self, per_agent: Sequence[float]) -> None:
        for m, value in enumerate(self.member_means(per_agent)):
            if math.isfinite(value):
                self._eval[m] = value

    def mark_diverged(self, healthy: Sequence[bool]) -> tuple[int, ...]:
        """Members with an agent whose update went non-finite, now frozen; returns the new ones."""
        sick = np.logical_not(np.asarray(healthy, bool)).reshape(self.num_members, self.num_seeds).any(axis=1)
        new = tuple(int(m) for m in np.flatnonzero(sick) if self._states[m] is MemberState.TRAINING)
        for m in new:
            self._states[m] = MemberState.DIVERGED
        return new

    def all_stopped(self) -> bool:
        return all(s is not MemberState.TRAINING for s in self._states)

    # --- population-based training ---------------------------------------------------------
    def pbt_due(self, update: int) -> bool:
        return self.pbt.enabled and update > 0 and update % self.pbt.every_updates == 0

    def score(self, member: int) -> float:
        if self._states[member] is MemberState.DIVERGED:
            return -math.inf
        if self.pbt.metric == EVAL_RETURN:
            value = self._eval[member]
            return -math.inf if value is None else value
        window = self._window[member]
        return float(np.mean(window)) if window else -math.inf

    def pbt_step(self, update: int) -> list[Replacement]:
        """Exploit and explore: the bottom `fraction` of the members that may change (not
        frozen by the user) take over clones of the top `fraction`, each perturbed key
        multiplied by a factor drawn from `perturb`. Deterministic in (seed, update), so a
        resumed run replaces the same members as an uninterrupted one."""
        eligible = [m for m in range(self.num_members) if self._states[m] is not MemberState.FROZEN]
        if len(eligible) < 2:
            return []
        count = pbt_replace_count(len(eligible), self.pbt.fraction)
        ranked = sorted(eligible, key=lambda m: (self.score(m), -m), reverse=True)
        top, bottom = ranked[:count], ranked[-count:]
        rng = np.random.default_rng([self.pbt.seed, update])
        keys = self.perturbed
        out = []
        for target in bottom:
            source = int(top[rng.integers(len(top))])
            if not self.score(source) > self.score(target):
                continue  # nothing better to exploit (no episode finished yet, or a tie at the top)
            values = {k: fit_value(k, self._values[source][k] * float(rng.choice(self.pbt.perturb))) for k in keys}
            out.append(self._replace(target, source, values))
        for m in range(self.num_members):
            self._window[m] = []
        return out

    # --- display and checkpoints -----------------------------------------------------------
    def view(self) -> PopulationView:
        keys = self.keys
        members = tuple(
            MemberView(index=m, values=MappingProxyType({k: self._values[m][k] for k in keys}),
                       state=self._states[m], latest_return=self._latest[m], best_return=self._best[m],
                       eval_return=self._eval[m], trend=tuple(self._trend[m]), parent=self._parents[m])
            for m in range(self.num_members)
        )
        return PopulationView(keys=keys, num_seeds=self.num_seeds, members=members,
                              pbt_every_updates=self.pbt.every_updates)

    def to_metadata(self) -> dict[str, Any]:
        """What a checkpoint keeps, as plain data."""
        return {
            "num_seeds": self.num_seeds,
            "swept": list(self.swept),
            "members": [
                {"values": dict(self._values[m]), "state": self._states[m].value, "parent": self._parents[m],
                 "best_return": self._best[m], "latest_return": self._latest[m], "eval_return": self._eval[m],
                 "trend": list(self._trend[m]), "window": list(self._window[m])}
                for m in range(self.num_members)
            ],
            **({"changes": self.changes} if self.changes is not None else {}),
        }

    def restore(self, metadata: Mapping[str, Any]) -> None:
        """From `to_metadata` of the same population (same members and seeds). Each member
        gets back its own values of the keys members may differ in (the swept ones and every
        live-editable key); the rest, such as the updates the learning rate anneals over
        (from total_timesteps), are the run's as configured now."""
        members = metadata.get("members", [])
        if len(members) != self.num_members or metadata.get("num_seeds") != self.num_seeds:
            raise ValueError(
                f"the checkpoint holds a population of {len(members)} members x {metadata.get('num_seeds')} seeds, "
                f"this run {self.num_members} x {self.num_seeds}"
            )
        for m, saved in enumerate(members):
            self._values[m] = {**self._values[m], **{k: float(v) for k, v in saved["values"].items()
                                                     if k in LIVE_HPARAMS or k in self.swept}}
            self._states[m] = MemberState(saved.get("state", "training"))
            self._parents[m] = saved.get("parent")
            self._best[m] = saved.get("best_return")
            self._latest[m] = saved.get("latest_return")
            self._eval[m] = saved.get("eval_return")
            self._trend[m] = collections.deque(saved.get("trend", []), maxlen=TREND_LENGTH)
            self._window[m] = list(saved.get("window", []))
        self._trainer_hparams = None
        changes = metadata.get("changes")
        self.changes = changes if isinstance(changes, int) and not isinstance(changes, bool) else None

    def describe(self, member: int) -> str:
        return " ".join(f"{k}={self._values[member][k]:.4g}" for k in self.keys) or f"member {member}"
