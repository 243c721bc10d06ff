"""REINFORCE, declared: the keys only it has and its own defaults for shared keys. The
update is `trainer.py`, its losses `losses.py`. Plain Python: the configuration reads it
before JAX starts."""

from __future__ import annotations

from trainers.algorithms.algorithm import Algorithm
from trainers.keys import TRACED, Key, Switch

ALGORITHM = Algorithm(
    name="reinforce",
    package=__name__,
    keys=(
        Key("baseline", True, "reinforce: subtract a learned value baseline V(s) from the return", Switch(), TRACED,
            live=True, after="anneal_updates"),
        Key("normalize_returns", True, "reinforce: normalise the returns (advantages) over each batch", Switch(),
            TRACED, live=True, after="baseline"),
    ),
    unused_keys=("num_minibatches", "update_epochs"),  # one gradient step per rollout
    # One gradient step per long rollout, and its gradient norm (~100-170, mostly the value
    # regression on raw returns) would be clipped on every step by PPO's max_grad_norm of 0.5.
    defaults={"num_envs": 8, "num_steps": 512, "lr": 5e-3, "max_grad_norm": 100.0, "total_timesteps": 614_400},
)
