"""Advantage and return estimators, as reverse `lax.scan`s over the time axis."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def _gae_step(carry, xs):
    gamma, gae_lambda, next_gae = carry
    reward, value, next_value, terminated, done = xs
    # Termination: the next state has no value. Truncation: `next_value` already holds the
    # value of the final observation, so it bootstraps. Either way the recursion is cut.
    delta = reward + gamma * next_value * (1.0 - terminated) - value
    gae = delta + gamma * gae_lambda * (1.0 - done) * next_gae
    return (gamma, gae_lambda, gae), gae


def gae(rewards, values, next_values, terminated, truncated, gamma, gae_lambda):
    """Generalised advantage estimates for arrays of shape (time, ...).

    `next_values[t]` is the value of the state reached by step t: V(obs[t+1]) while the
    episode continues, V(final observation) where step t truncated (ignored where it
    terminated). Returns (advantages, value targets).
    """
    terminated = terminated.astype(rewards.dtype)
    done = jnp.maximum(terminated, truncated.astype(rewards.dtype))
    init = (jnp.asarray(gamma, rewards.dtype), jnp.asarray(gae_lambda, rewards.dtype), jnp.zeros_like(rewards[0]))
    _, advantages = jax.lax.scan(_gae_step, init, (rewards, values, next_values, terminated, done), reverse=True)
    return advantages, advantages + values


def _return_step(carry, xs):
    gamma, next_return = carry
    reward, done = xs
    ret = reward + gamma * (1.0 - done) * next_return
    return (gamma, ret), ret


def discounted_returns(rewards, dones, gamma, bootstrap=None):
    """Monte-Carlo returns G_t = r_t + gamma * G_{t+1}, cut where `dones[t]`.

    `bootstrap` (shape rewards[0]) seeds the return after the last step; zeros if None.
    """
    last = jnp.zeros_like(rewards[0]) if bootstrap is None else bootstrap
    init = (jnp.asarray(gamma, rewards.dtype), last)
    _, returns = jax.lax.scan(_return_step, init, (rewards, dones.astype(rewards.dtype)), reverse=True)
    return returns
