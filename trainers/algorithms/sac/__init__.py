"""SAC (Haarnoja et al., 2018, with the learned temperature of "Soft Actor-Critic
Algorithms and Applications"), declared: its keys and metrics (the replay buffer's shared
with every off-policy algorithm, `replay_keys`; the TD metrics with the Q-learners,
`action_values`), the shared ones it does not use, its defaults and its batch rule. The
update is `trainer.py`, its targets and losses `losses.py`. Plain Python: the configuration
reads it before JAX starts."""

from __future__ import annotations

from typing import Any

from trainers.algorithms.action_values import TD_METRICS
from trainers.algorithms.algorithm import Algorithm, BatchProblem
from trainers.keys import TRACED, Key, Number, Switch, quote
from trainers.metric import MetricSpec
from trainers.replay_keys import REPLAY_KEYS, REPLAY_METRICS, replay_batch_problem


def batch_problem(config: Any, num_devices: int) -> BatchProblem:
    """The actor and critics are MLPs (a GRU or a CNN is refused); each device samples an
    equal share of `batch_size`; the buffer holds at least one rollout of every env."""
    if config.network != "mlp":
        return "network", f"sac takes mlp (its actor and critics are feed-forward MLPs), got {quote(config.network)}"
    return replay_batch_problem(config, num_devices)


ALGORITHM = Algorithm(
    name="sac",
    package=__name__,
    squashes_actions=True,
    keys=(
        *REPLAY_KEYS,
        Key("autotune", True, "sac: learn the entropy temperature alpha so that the policy's entropy approaches "
            "-(action dimensions); off, alpha stays at the `alpha` key's value", Switch(), TRACED, live=True,
            after="target_period"),
        Key("alpha", 0.2, "sac: the entropy temperature while autotune is off", Number(0, float32=True), TRACED,
            live=True, after="autotune"),
    ),
    metrics=(
        *TD_METRICS,
        MetricSpec("alpha", "entropy temperature alpha", "α", fmt=".3g",
                   sparkline=True, after="epsilon", group="schedule"),
        *REPLAY_METRICS,
    ),
    unused_keys=("num_minibatches", "update_epochs", "ent_coef", "vf_coef", "log_std", "log_std_init"),
    unused_metrics=("value_loss", "approx_kl"),
    actions=("continuous",),
    # CleanRL's sac_continuous_action.py settings, with one learning rate for the actor,
    # the critics and the temperature (rejax's choice): 256x256 ReLU networks, a buffer of
    # 1M, batches of 256, one gradient step per env step from 5,000 stored, Polyak
    # averaging at tau 0.005 after every gradient step.
    defaults={
        "num_envs": 1, "num_steps": 1, "hidden_sizes": (256, 256), "activation": "relu", "lr": 3e-4,
        "anneal_lr": False, "max_grad_norm": 10.0, "buffer_size": 1_000_000, "batch_size": 256,
        "learning_starts": 5_000.0, "replay_ratio": 1.0, "tau": 0.005, "target_period": 1.0,
        "total_timesteps": 1_000_000,
    },
    batch_problem=batch_problem,
)
