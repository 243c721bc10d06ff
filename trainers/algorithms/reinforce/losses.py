"""Pure pieces of the Monte-Carlo policy gradient (REINFORCE): which steps of a rollout
have a complete return, masked means, and the losses. No collectives: the caller passes
the count that turns a local sum into the mean over all devices (see `trainer.py`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def complete_episode_mask(dones: jax.Array) -> jax.Array:
    """1.0 where step t's episode ends (terminated or truncated) at some step t' >= t of the
    same rollout, else 0.0. Arrays are (time, ...).

    A rollout of a vectorised env stops mid-episode; the return-to-go of a step in that
    unfinished tail is unknown, so the step is left out. A step whose episode began in an
    earlier rollout still has its whole return-to-go here, so it is kept.
    """
    return jax.lax.cummax(dones.astype(jnp.float32), axis=0, reverse=True)


def masked_mean(x: jax.Array, valid: jax.Array, count: jax.Array) -> jax.Array:
    """sum(valid * x) / count. With `count` the number of valid steps this is the mean over
    them; a caller on N devices passes the mean count per device, so that averaging the
    result over devices gives the mean over all valid steps."""
    return jnp.sum(valid * x) / jnp.maximum(count, 1.0)


def policy_gradient_loss(log_prob, advantage, valid, count):
    """-mean(valid * log pi(a|s) * A), A = return (minus a baseline, maybe normalised).

    Its gradient is the REINFORCE estimate -E[grad log pi(a|s) * A]. The weight is a
    constant: `stop_gradient` keeps the return (and a learned baseline in it) out of the
    differentiation."""
    return -masked_mean(log_prob * jax.lax.stop_gradient(advantage), valid, count)


def value_regression_loss(value, returns, valid, count):
    """0.5 * mean(valid * (V(s) - G)^2): the learned baseline regresses on the return."""
    return 0.5 * masked_mean(jnp.square(value - jax.lax.stop_gradient(returns)), valid, count)
