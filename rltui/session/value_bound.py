"""Action values beyond what the rewards allow: a critic diverging while still finite.

Where an algorithm's `q_mean` estimates discounted sums of rewards alone
(`Algorithm.values_bounded_by_rewards`: PQN, DQN), no true value exceeds
max |reward| / (1 - gamma) in size. A Q-learner that overestimates without limit (the deadly
triad) drifts far past that long before anything turns NaN, and the divergence guard, which
reads non-finite values only, says nothing meanwhile. The session's watch compares each
update's mean Q, per agent, with that bound for the largest |reward| the agent has seen so
far (`reward_max`), and warns once when it is passed by `MARGIN` times; once every agent is
back within the bound itself (after a rollback, say) it warns again the next time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from trainers.algorithms import algorithm

# How far past the bound a mean Q must be before it counts: function approximation and the
# bootstrap overshoot a little in healthy runs; a diverging critic leaves it far behind.
MARGIN = 2.0


class Beyond(NamedTuple):
    """A warning, and the update it is about."""

    update: int
    message: str


class ValueBoundWatch:
    def __init__(self, algo: str):
        declared = algorithm(algo)
        self.enabled = declared.values_bounded_by_rewards
        self._hint = "lowering lr" + (
            ", or raising target_period," if any(key.name == "target_period" for key in declared.keys) else "")
        # The largest discount the run has trained with: values learned at gamma 0.99 stay
        # within 0.99's bound while a lower gamma, edited in, brings them down.
        self._gamma = 0.0
        self._reward_max: np.ndarray | None = None  # per agent, over the run so far
        self._seen_before = math.nan  # the largest reward of the run before this session (a resume)
        self._warned = False

    def resume_from(self, reward_max: Sequence[float]) -> None:
        """On a resume: the run's `reward_max` before its checkpoint counts as seen, so that
        a sparse reward not met again yet still bounds the values learned from it."""
        finite = [r for r in reward_max if math.isfinite(r)]
        self._seen_before = max(finite, default=math.nan)

    def check(self, rows: Sequence[dict[str, Any]], first_update: int, gamma: Any) -> Beyond | None:
        """The warning for the first of `rows` (updates `first_update`, `first_update` + 1,
        ...) whose mean Q passes the bound at discount `gamma` (the run's, or each agent's:
        the largest counts, and the largest of the run so far), or None."""
        self._gamma = gamma = max(self._gamma, float(np.max(gamma)))
        if not self.enabled or not rows or not 0.0 <= gamma < 1.0:
            return None
        # A chunk's rows at once (updates x agents): the session thread does this between
        # chunks, while the trainer waits.
        if "per_seed" in rows[0]:
            q = np.array([row["per_seed"]["q_mean"] for row in rows], np.float64)
            reward = np.array([row["per_seed"]["reward_max"] for row in rows], np.float64)
        else:
            q = np.array([[row["q_mean"]] for row in rows], np.float64)
            reward = np.array([[row["reward_max"]] for row in rows], np.float64)
        if self._reward_max is None or self._reward_max.shape != reward.shape[1:]:
            self._reward_max = np.full(reward.shape[1:], self._seen_before)
        seen = np.fmax.accumulate(np.vstack([self._reward_max[None], reward]), axis=0)[1:]
        self._reward_max = seen[-1]
        bound = seen / (1.0 - gamma)
        with np.errstate(invalid="ignore"):
            over = np.isfinite(q) & (bound > 0) & (np.abs(q) > MARGIN * bound)
            settled = np.all(np.abs(q) <= bound, axis=1)  # False while any is NaN
        over_rows, settled_rows = np.flatnonzero(over.any(axis=1)), np.flatnonzero(settled)
        if not over_rows.size:
            self._warned = self._warned and not settled_rows.size
            return None
        # A row past the bound warns unless the last row before it that was past the bound
        # or settled within it was past it (or, for the first, the earlier chunks left a warning).
        before = np.concatenate([[-1], over_rows[:-1]])
        settled_since = np.searchsorted(settled_rows, over_rows) > np.searchsorted(settled_rows, before)
        warns = settled_since | ((before < 0) & (not self._warned))
        self._warned = over_rows[-1] > (settled_rows[-1] if settled_rows.size else -1)
        if not warns.any():
            return None
        row = int(over_rows[np.argmax(warns)])
        agent = int(np.argmax(over[row]))
        update = first_update + row
        return Beyond(update, self._message(update, q[row, agent], seen[row, agent], gamma,
                                            agent if q.shape[1] > 1 else None))

    def _message(self, update: int, q: float, reward: float, gamma: float, agent: int | None) -> str:
        who = "" if agent is None else f" of agent {agent}"
        bound = reward / (1.0 - gamma)
        return (f"Q values diverging: mean Q{who} {q:,.4g} at update {update:,} is more than {MARGIN:g}x the "
                f"±{bound:,.4g} that the rewards seen allow (largest |reward| {reward:.3g} / (1 - gamma {gamma:g})); "
                f"{self._hint} usually helps")
