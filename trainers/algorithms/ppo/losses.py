"""PPO's pure loss functions. Each returns per-batch means; reductions over devices happen in the caller."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp


class SurrogateLoss(NamedTuple):
    loss: jax.Array
    approx_kl: jax.Array  # the low-variance estimator E[(r - 1) - log r] of KL(old || new)
    clip_frac: jax.Array  # fraction of samples whose ratio lies outside [1 - clip_eps, 1 + clip_eps]


def clipped_surrogate_loss(log_prob, old_log_prob, advantages, clip_eps) -> SurrogateLoss:
    """PPO's clipped policy objective, negated for minimisation, with its diagnostics."""
    log_ratio = log_prob - old_log_prob
    ratio = jnp.exp(log_ratio)
    unclipped = ratio * advantages
    clipped = jnp.clip(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * advantages
    loss = -jnp.mean(jnp.minimum(unclipped, clipped))
    approx_kl = jnp.mean((ratio - 1.0) - log_ratio)
    clip_frac = jnp.mean((jnp.abs(ratio - 1.0) > clip_eps).astype(jnp.float32))
    return SurrogateLoss(loss, approx_kl, clip_frac)


def clipped_value_loss(value, old_value, targets, clip_eps):
    """Half the squared error, taking the worse of the raw and the clipped prediction."""
    value_clipped = old_value + jnp.clip(value - old_value, -clip_eps, clip_eps)
    return 0.5 * jnp.mean(jnp.maximum((value - targets) ** 2, (value_clipped - targets) ** 2))
