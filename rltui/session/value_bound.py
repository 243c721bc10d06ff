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
from typing import Any

import numpy as np

from trainers.algorithms import algorithm

# How far past the bound a mean Q must be before it counts: function approximation and the
# bootstrap overshoot a little in healthy runs; a diverging critic leaves it far behind.
MARGIN = 2.0


class ValueBoundWatch:
    def __init__(self, algo: str):
        self.enabled = algorithm(algo).values_bounded_by_rewards
        self._reward_max: np.ndarray | None = None  # per agent, over the run so far
        self._seen_before = math.nan  # the largest reward of the run before this session (a resume)
        self._warned = False

    def resume_from(self, reward_max: Sequence[float]) -> None:
        """On a resume: the run's `reward_max` before its checkpoint counts as seen, so that
        a sparse reward not met again yet still bounds the values learned from it."""
        finite = [r for r in reward_max if math.isfinite(r)]
        self._seen_before = max(finite, default=math.nan)

    def check(self, rows: Sequence[dict[str, Any]], first_update: int, gamma: Any) -> str | None:
        """The warning for the first of `rows` (updates `first_update`, `first_update` + 1,
        ...) whose mean Q passes the bound at discount `gamma` (the run's, or each agent's:
        the largest counts), or None."""
        gamma = float(np.max(gamma))
        if not self.enabled or not 0.0 <= gamma < 1.0:
            return None
        found = None
        for offset, row in enumerate(rows):
            per_seed = row.get("per_seed", {})
            q = np.asarray(per_seed.get("q_mean", (row.get("q_mean", math.nan),)), np.float64)
            reward = np.asarray(per_seed.get("reward_max", (row.get("reward_max", math.nan),)), np.float64)
            if self._reward_max is None or self._reward_max.shape != reward.shape:
                self._reward_max = np.full(reward.shape, self._seen_before)
            self._reward_max = np.fmax(self._reward_max, reward)
            bound = self._reward_max / (1.0 - gamma)
            with np.errstate(invalid="ignore"):
                over = np.isfinite(q) & (bound > 0) & (np.abs(q) > MARGIN * bound)
                settled = bool(np.all(np.abs(q) <= bound))  # False while any is NaN
            if over.any():
                if found is None and not self._warned:
                    agent = int(np.argmax(over))
                    found = self._message(first_update + offset, q[agent], self._reward_max[agent], gamma,
                                          agent if q.size > 1 else None)
                self._warned = True
            elif settled:
                self._warned = False
        return found

    @staticmethod
    def _message(update: int, q: float, reward: float, gamma: float, agent: int | None) -> str:
        who = "" if agent is None else f" of agent {agent}"
        bound = reward / (1.0 - gamma)
        return (f"Q values diverging: mean Q{who} {q:,.4g} at update {update:,} is beyond the ±{bound:,.4g} that "
                f"the rewards seen allow (largest |reward| {reward:.3g} / (1 - gamma {gamma:g})); lowering lr "
                "usually helps")
