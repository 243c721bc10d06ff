"""Action values beyond what the rewards allow: a critic diverging while still finite.

Where an algorithm's `q_mean` estimates discounted sums of rewards alone
(`Algorithm.values_bounded_by_rewards`: PQN, DQN), no true value exceeds
max |reward| / (1 - gamma) in size. A Q-learner that overestimates without limit (the deadly
triad) drifts far past that long before anything turns NaN, and the divergence guard, which
reads non-finite values only, says nothing meanwhile. The session's watch compares each
update's mean Q, per agent, with that bound for the largest |reward| the agent has seen so
far (`reward_max`), and warns when it is passed by `MARGIN` times, once for each time an
agent goes past: the agent warns again only after its Q has been back within the bound
itself (after a rollback, say). Within one chunk an agent reports its first warning.
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
    def __init__(self, algo: str, seeds_per_member: int | None = None):
        """`seeds_per_member`: a population's, whose agents are named by member (and seed);
        None: agents are a run's seeds."""
        declared = algorithm(algo)
        self.enabled = declared.values_bounded_by_rewards
        self._hint = "lowering lr" + (
            ", or raising target_period," if any(key.name == "target_period" for key in declared.keys) else "")
        self._seeds_per_member = seeds_per_member
        # The largest discount (below 1) the run has trained with: values learned at 0.99
        # stay within 0.99's bound while a lower gamma, edited in, brings them down.
        self._gamma = 0.0
        self._reward_max: np.ndarray | None = None  # per agent, over the run so far
        self._seen_before = math.nan  # the largest reward the store recalls from before a resume
        self._warned: np.ndarray | None = None  # per agent: past the bound, not yet back within it

    def resume_from(self, reward_max: Sequence[float]) -> None:
        """On a resume: the `reward_max` of the records the session recalls from before the
        checkpoint (its recent ones; several agents' as their mean) counts as seen, so that a
        sparse reward not met again yet still bounds the values learned from it."""
        finite = [r for r in reward_max if math.isfinite(r)]
        self._seen_before = max(finite, default=math.nan)

    def check(self, rows: Sequence[dict[str, Any]], first_update: int, gamma: Any) -> list[Beyond]:
        """The warnings of `rows` (updates `first_update`, `first_update` + 1, ...) at
        discount `gamma` (the run's, or each agent's: the largest counts): each agent's first
        in the chunk, in update order. A gamma of 1 has no bound: such a chunk is passed over."""
        current = float(np.max(gamma))
        if not self.enabled or not rows or not 0.0 <= current < 1.0:
            return []
        self._gamma = gamma = max(self._gamma, current)
        # A chunk's rows at once (updates x agents): the session thread does this between
        # chunks, while the trainer waits.
        if "per_seed" in rows[0]:
            q = np.array([row["per_seed"]["q_mean"] for row in rows], np.float64)
            reward = np.array([row["per_seed"]["reward_max"] for row in rows], np.float64)
        else:
            q = np.array([[row["q_mean"]] for row in rows], np.float64)
            reward = np.array([[row["reward_max"]] for row in rows], np.float64)
        agents = reward.shape[1]
        if self._reward_max is None or self._reward_max.shape != (agents,):
            self._reward_max = np.full(agents, self._seen_before)
            self._warned = np.zeros(agents, bool)
        seen = np.fmax.accumulate(np.vstack([self._reward_max[None], reward]), axis=0)[1:]
        self._reward_max = seen[-1]
        bound = seen / (1.0 - gamma)
        with np.errstate(invalid="ignore"):
            over = np.isfinite(q) & (bound > 0) & (np.abs(q) > MARGIN * bound)
            settled = np.abs(q) <= bound  # False where either is NaN
        found: list[tuple[int, int]] = []  # (row, agent) of each agent's first warning
        for agent in range(agents):
            over_rows, settled_rows = np.flatnonzero(over[:, agent]), np.flatnonzero(settled[:, agent])
            if not over_rows.size:
                self._warned[agent] &= not settled_rows.size
                continue
            # A row past the bound warns unless the agent's last row before it that was past
            # the bound or back within it was past it (for its first, unless it was warned).
            before = np.concatenate([[-1], over_rows[:-1]])
            settled_since = np.searchsorted(settled_rows, over_rows) > np.searchsorted(settled_rows, before)
            warns = settled_since | ((before < 0) & (not self._warned[agent]))
            self._warned[agent] = over_rows[-1] > (settled_rows[-1] if settled_rows.size else -1)
            if warns.any():
                found.append((int(over_rows[np.argmax(warns)]), agent))
        return [Beyond(first_update + row, self._message(first_update + row, q[row, agent], seen[row, agent], gamma,
                                                         self._agent_name(agent) if agents > 1 else None))
                for row, agent in sorted(found)]

    def _agent_name(self, agent: int) -> str:
        if self._seeds_per_member is None:
            return f"seed {agent}"
        member, seed = divmod(agent, self._seeds_per_member)
        return f"member {member}" + (f" (seed {seed})" if self._seeds_per_member > 1 else "")

    def _message(self, update: int, q: float, reward: float, gamma: float, agent: str | None) -> str:
        who = "" if agent is None else f" for {agent}"
        bound = reward / (1.0 - gamma)
        return (f"Q values diverging{who}: mean Q {q:,.4g} at update {update:,} is more than {MARGIN:g}x the "
                f"±{bound:,.4g} that the rewards seen allow (largest |reward| {reward:.3g} / (1 - gamma {gamma:g})); "
                f"{self._hint} usually helps")
