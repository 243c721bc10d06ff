"""Typed carries for the training loop: named fields, never positional tuples."""

from __future__ import annotations

from typing import Any

import jax
from flax import struct

from trainers.metrics_spec import TRAINER_METRICS


@struct.dataclass
class Transition:
    """One vectorised env step; every leaf has leading axes (time, env) after the rollout."""

    obs: jax.Array
    action: jax.Array
    log_prob: jax.Array
    value: jax.Array
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    final_obs: jax.Array  # observation reached by this step, before any auto-reset
    episode_return: jax.Array  # return of the episode this step completed (valid where done)
    episode_length: jax.Array


@struct.dataclass
class TrainState:
    """Everything one device needs to continue training exactly."""

    params: Any
    opt_state: Any
    env_state: Any
    obs: jax.Array
    key: jax.Array  # shared by all devices; per-env keys are derived by global env index
    update_idx: jax.Array  # int32 scalar: updates completed so far
    # Recurrent networks: each env's hidden state (env, H), reset where an episode ended.
    # None (no leaves) for feed-forward networks.
    hidden: Any = None
    # `normalize_obs`: running statistics of observations (normalize.RunningStats, the same
    # on every device). None when off.
    obs_stats: Any = None
    # `normalize_rewards`: running statistics of discounted returns (same on every device)
    # and each env's discounted return so far (env,). None when off.
    return_stats: Any = None
    discounted_return: Any = None
    # Off-policy algorithms (`trainers.replay`): the target network's parameters (the same on
    # every device) and this device's replay buffer with its counters (`replay.ReplayState`).
    # None for the on-policy ones.
    target_params: Any = None
    replay: Any = None


def _update_metrics_type() -> type:
    fields = {name: jax.Array for name in TRAINER_METRICS}
    namespace = {"__annotations__": fields, "__module__": __name__, "__doc__": (
        "Scalars describing one update, already reduced over devices, epochs and minibatches: "
        "one field per trainer metric (`metrics_spec.TRAINER_METRICS`, in order). A metric is "
        "declared there or in its algorithm's package, and computed by the trainer; an algorithm "
        "builds its metrics with `OnPolicyTrainer.report`.")}
    return struct.dataclass(type("UpdateMetrics", (), namespace))


UpdateMetrics = _update_metrics_type()


@struct.dataclass
class ChunkMetrics:
    """`UpdateMetrics` of each update in a chunk: leaves of shape (max_chunk_updates,),
    of which the first `num_updates` are filled."""

    per_update: UpdateMetrics
    num_updates: jax.Array
    # A population's chunk: per agent, whether its state stayed finite (None otherwise).
    healthy: Any = None
