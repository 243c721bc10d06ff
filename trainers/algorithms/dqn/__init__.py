"""DQN (Mnih et al., 2015; double Q-learning, van Hasselt et al., 2016), declared: its keys
and metrics (the replay buffer's shared with every off-policy algorithm, `replay_keys`, and
epsilon-greedy exploration's with PQN, `action_values`), the shared ones it does not use,
its defaults and its batch rule. The update is `trainer.py`, its targets `losses.py`.
Plain Python: the configuration reads it before JAX starts."""

from __future__ import annotations

from typing import Any

from trainers.algorithms.action_values import EPSILON_KEYS, EPSILON_METRIC, TD_METRICS, final_epsilon
from trainers.algorithms.algorithm import Algorithm, BatchProblem
from trainers.keys import TRACED, Key, Switch, quote
from trainers.replay_keys import REPLAY_KEYS, REPLAY_METRICS, replay_batch_problem


def batch_problem(config: Any, num_devices: int) -> BatchProblem:
    """The Q-network is feed-forward (a GRU is refused); each device samples an equal share
    of `batch_size`; the buffer holds at least one rollout of every env."""
    if config.network == "gru":
        return "network", f"dqn takes mlp or cnn (its Q-network is feed-forward), got {quote(config.network)}"
    return replay_batch_problem(config, num_devices)


ALGORITHM = Algorithm(
    name="dqn",
    package=__name__,
    keys=(
        *EPSILON_KEYS,
        *REPLAY_KEYS,
        Key("double_q", False, "dqn: double Q-learning (the online network picks the next action, the target network "
            "values it)", Switch(), TRACED, live=True, after="target_period"),
    ),
    metrics=(*TD_METRICS, EPSILON_METRIC, *REPLAY_METRICS),
    unused_keys=("num_minibatches", "update_epochs", "ent_coef", "vf_coef", "log_std", "log_std_init"),
    unused_metrics=("policy_loss", "value_loss", "entropy", "approx_kl"),
    actions=("discrete",),
    # With its keys' own defaults: PureJaxRL's dqn.py CartPole configuration. One update is
    # one step of 10 envs, then one gradient step (replay ratio 0.1) of 128 transitions; the
    # target network is copied every 50 gradient steps (500 env steps); epsilon falls from 1
    # to 0.05 over the first half of the run.
    defaults={
        "num_envs": 10, "num_steps": 1, "hidden_sizes": (120, 84), "activation": "relu", "lr": 2.5e-4,
        "anneal_lr": False, "max_grad_norm": 10.0, "eps_end": 0.05, "eps_decay": 0.5, "buffer_size": 10_000,
        "batch_size": 128, "learning_starts": 10_000.0, "replay_ratio": 0.1, "tau": 1.0, "target_period": 50.0,
        "total_timesteps": 500_000,
    },
    batch_problem=batch_problem,
    sample_epsilon=final_epsilon,
    values_bounded_by_rewards=True,
)
