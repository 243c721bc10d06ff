"""Typed carries for the training loop: named fields, never positional tuples."""

from __future__ import annotations

from typing import Any

import jax
from flax import struct


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


@struct.dataclass
class UpdateMetrics:
    """Scalars describing one update, already reduced over devices, epochs and minibatches.
    The fields are `metrics_spec.TRAINER_METRICS`, in order: a metric is declared there (its
    labels, format, which clients show it) and computed here."""

    episode_return: jax.Array  # mean over episodes completed in this update; NaN if none
    episode_length: jax.Array
    episodes: jax.Array  # number of episodes completed in this update
    policy_loss: jax.Array
    value_loss: jax.Array
    entropy: jax.Array
    approx_kl: jax.Array
    clip_frac: jax.Array
    grad_norm: jax.Array
    lr: jax.Array


@struct.dataclass
class ChunkMetrics:
    """`UpdateMetrics` of each update in a chunk: leaves of shape (max_chunk_updates,),
    of which the first `num_updates` are filled."""

    per_update: UpdateMetrics
    num_updates: jax.Array
    # A population's chunk: per agent, whether its state stayed finite (None otherwise).
    healthy: Any = None
