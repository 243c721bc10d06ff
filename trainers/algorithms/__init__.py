"""The algorithms, by name: the one table that the `algo` key's choices, the trainer's key
and metric tables (`trainers.hparams`, `trainers.metrics_spec`) and the dispatch to a
trainer (`make_trainer`) read. Each algorithm is a package beside this module, declared
by an `Algorithm` record (`algorithm.py`); adding one is adding its package and its entry
here (docs/algorithms.md, "Adding an algorithm")."""

from __future__ import annotations

from typing import Any

from trainers.algorithms import dqn, ppo, pqn, reinforce, sac
from trainers.algorithms.algorithm import Algorithm

# The first is the default of the `algo` key.
ALGORITHMS: dict[str, Algorithm] = {
    algorithm.name: algorithm for algorithm in (ppo.ALGORITHM, reinforce.ALGORITHM, pqn.ALGORITHM, dqn.ALGORITHM,
                                        sac.ALGORITHM)
}
DEFAULT_ALGORITHM = next(iter(ALGORITHMS))


def algorithm(name: str) -> Algorithm:
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise ValueError(f"algo: expected one of {', '.join(ALGORITHMS)}, got {name!r}") from None


def action_problem(name: str, actions: str, env: str) -> str | None:
    """Why `name` cannot train on `env`, whose actions are `actions` ("discrete" or
    "continuous"), naming the algorithms that can; None where it can."""
    if algorithm(name).takes(actions):
        return None
    takes = listed(algorithm(name).actions)
    others = listed([other for other, a in ALGORITHMS.items() if a.takes(actions)])
    return f"algo: {name} takes {takes} actions; {env} has {actions} ones ({others} take them)"


def bounds_problem(name: str, env: str, low: Any, high: Any) -> str | None:
    """Why `name` cannot act in `env`'s Box of bounds `low`..`high`: an algorithm that
    squashes its actions into the bounds needs them finite. None where it can."""
    import numpy as np

    if not algorithm(name).squashes_actions or (np.isfinite(low).all() and np.isfinite(high).all()):
        return None
    return f"algo: {name} squashes its actions into the env's bounds; {env} has unbounded ones"


def listed(words, conjunction: str = "and") -> str:
    """"a", "a and b", "a, b and c" (or another `conjunction`: "a, b or c")."""
    words = list(words)
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} {conjunction} {words[-1]}"


def acting_by_values() -> str:
    """The algorithms whose network gives action values, acting greedily on them (and
    epsilon-greedily when sampled), listed: "pqn and dqn"."""
    from trainers.algorithms.algorithm import from_the_policy

    return listed(name for name, a in ALGORITHMS.items() if a.sample_epsilon is not from_the_policy)


def make_trainer(static: Any, num_devices: int = 1) -> Any:
    """The trainer of `static.algo` for `static`, split over `num_devices` (an
    `OnPolicyTrainer`); every one runs through `parallel.DataParallel` the same way."""
    return algorithm(static.algo).make_trainer(static, num_devices)
