"""What the algorithms that learn action values (PQN, DQN) declare alike: the epsilon-greedy
schedule's keys and the TD metrics (SAC lists the TD metrics too). Each algorithm lists
these same declarations among its own; the registry reads a declaration that several
algorithms list as read by all of them (`algorithm.placed`). Plain Python: the
configuration reads it before JAX starts."""

from __future__ import annotations

from trainers.keys import TRACED, Key, Number
from trainers.metric import MetricSpec

FRACTION = Number(0, 1, float32=True)


def final_epsilon(config) -> float:
    """Acting outside training (`Algorithm.sample_epsilon`), a sampled action explores at
    the rate the run's schedule ends with."""
    return config.eps_end


EPSILON_KEYS: tuple[Key, ...] = (
    Key("eps_start", 1.0, "exploration rate epsilon at the start (epsilon-greedy)", FRACTION, TRACED, live=True,
        after="gamma"),
    Key("eps_end", 0.2, "exploration rate epsilon after the decay", FRACTION, TRACED, live=True, after="eps_start"),
    Key("eps_decay", 0.2, "fraction of the run's updates over which epsilon falls linearly from eps_start to "
        "eps_end", FRACTION, TRACED, live=True, after="eps_end"),
)

TD_METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("td_loss", "TD loss", "TD loss", higher_is_better=False, sparkline=True, guards_divergence=True,
               after="episodes", group="loss"),
    MetricSpec("q_mean", "mean Q of the actions taken", "Q", fmt=".3g", sparkline=True, guards_divergence=True,
               after="td_loss", group="loss"),
    # What bounds the action values where they estimate discounted rewards alone
    # (`Algorithm.values_bounded_by_rewards`): |Q| <= max |reward| / (1 - gamma).
    MetricSpec("reward_max", "largest |reward| the learner saw in the update's rollout (after reward_scale)",
               "max |r|", fmt=".3g", after="q_mean", group="train"),
)
EPSILON_METRIC = MetricSpec("epsilon", "exploration rate epsilon", "ε", fmt=".3g", sparkline=True, after="q_mean",
                            group="schedule")
