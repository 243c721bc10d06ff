"""PQN (Gallici et al., "Simplifying Deep Temporal Difference Learning", 2024), declared: the
keys and metrics only it has, the shared ones it does not use, its defaults and its
minibatch rule. The update is `trainer.py`, its targets and loss `losses.py`, its tuned
settings per environment `presets.toml`. Plain Python: the configuration reads it before
JAX starts."""

from __future__ import annotations

from typing import Any

from trainers.algorithms.action_values import EPSILON_KEYS, EPSILON_METRIC, FRACTION, TD_METRICS, final_epsilon
from trainers.algorithms.algorithm import Algorithm, BatchProblem
from trainers.keys import STATIC, TRACED, Choice, Key
from trainers.quoting import quote

NORMS = ("layer_norm", "none")


def minibatches(config: Any) -> int:
    return config.num_minibatches


def batch_problem(config: Any, num_devices: int) -> BatchProblem:
    """Minibatches are sets of time steps, so `num_minibatches` divides `num_steps`. The
    Q-network is feed-forward: a GRU is refused here, before anything starts."""
    if config.network == "gru":
        return "network", f"pqn takes mlp or cnn (its Q-network is feed-forward), got {quote(config.network)}"
    if config.num_steps % config.num_minibatches:
        return "num_minibatches", f"must divide num_steps ({config.num_steps}), got {config.num_minibatches}"
    return None


ALGORITHM = Algorithm(
    name="pqn",
    package=__name__,
    keys=(
        *EPSILON_KEYS,  # placed after gamma, then q_lambda before them
        Key("q_lambda", 0.95, "pqn: lambda of the Q(lambda) targets (0: one-step Q-learning, 1: Monte Carlo "
            "returns)", FRACTION, TRACED, live=True, after="gamma"),
        Key("norm_type", "layer_norm", "pqn: normalisation after each hidden layer of the Q-network: "
            + ", ".join(NORMS), Choice(NORMS), STATIC, after="network"),
    ),
    metrics=(*TD_METRICS, EPSILON_METRIC),
    unused_keys=("ent_coef", "vf_coef", "log_std", "log_std_init"),
    unused_metrics=("policy_loss", "value_loss", "entropy", "approx_kl"),
    actions=("discrete",),
    # With its keys' own defaults: purejaxql's CartPole configuration (pqn_cartpole.yaml).
    defaults={
        "num_envs": 32, "num_steps": 64, "num_minibatches": 16, "update_epochs": 4, "hidden_sizes": (256, 256),
        "activation": "relu", "lr": 1e-4, "max_grad_norm": 10.0, "reward_scale": 0.1,
        "total_timesteps": 500_000,
    },
    minibatches=minibatches,
    batch_problem=batch_problem,
    sample_epsilon=final_epsilon,
    values_bounded_by_rewards=True,
)
