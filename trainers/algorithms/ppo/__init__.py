"""PPO, declared: the keys and the metric only it has, and how its batch splits into
minibatches. The update is `trainer.py`, its losses `losses.py`, its tuned settings per
environment `presets.toml`. Plain Python: the configuration reads it before JAX starts."""

from __future__ import annotations

from typing import Any

from trainers.algorithms.algorithm import Algorithm, BatchProblem
from trainers.keys import TRACED, Key, Number, Switch
from trainers.metric import MetricSpec


def minibatches(config: Any) -> int:
    return config.num_minibatches


def batch_problem(config: Any, num_devices: int) -> BatchProblem:
    """Minibatches are sets of time steps, so `num_minibatches` divides `num_steps`; with a
    GRU they hold whole env sequences (the GRU is replayed over time), so it divides the
    environments of each device."""
    if config.network == "gru":
        per_device = config.num_envs // num_devices
        if per_device % config.num_minibatches:
            where = f"num_envs ({config.num_envs})" if num_devices == 1 else (
                f"the {per_device} environments each of {num_devices} devices holds")
            return "num_minibatches", f"with network = \"gru\" must divide {where}, got {config.num_minibatches}"
    elif config.num_steps % config.num_minibatches:
        return "num_minibatches", f"must divide num_steps ({config.num_steps}), got {config.num_minibatches}"
    return None


ALGORITHM = Algorithm(
    name="ppo",
    package=__name__,
    keys=(
        Key("gae_lambda", 0.95, "GAE lambda", Number(0, 1, float32=True), TRACED, live=True, after="gamma"),
        Key("bootstrap_truncated", True, "where a time limit cuts an episode, bootstrap from the value of its last "
            "observation; off: treat the cut as the episode's end (for envs whose time limit is part of the task "
            "and shows in the observation)", Switch(), TRACED, live=True, after="gae_lambda"),
        Key("clip_eps", 0.2, "PPO clip range for the policy ratio and the value",
            Number(0, low_open=True, float32=True), TRACED, live=True, after="bootstrap_truncated"),
    ),
    metrics=(MetricSpec("clip_frac", "clip fraction", "clip frac", after="approx_kl", group="loss"),),
    minibatches=minibatches,
    batch_problem=batch_problem,
)
