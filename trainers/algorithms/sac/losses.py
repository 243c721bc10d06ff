"""SAC's targets and losses over rows of transitions: the squashed Gaussian's sample and
log-probability, the soft critic target, the actor's and the temperature's losses. No
collectives."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from trainers.networks import log_prob


def squashed_sample(key, mean, log_std):
    """A sample a = tanh(u), u ~ N(mean, exp(log_std)), and log pi(a): the Gaussian's
    log-density of u less log |da/du| = sum log(1 - tanh(u)^2), written as
    2 (log 2 - u - softplus(-2u)), which stays finite where tanh(u) rounds to +-1.
    Returns (a, log pi(a)); rows (..., actions) -> (..., actions), (...)."""
    u = mean + jnp.exp(log_std) * jax.random.normal(key, mean.shape, mean.dtype)
    return jnp.tanh(u), squashed_log_prob(u, mean, log_std)


def squashed_log_prob(u, mean, log_std):
    """log pi(tanh(u)) for pre-squash actions `u` of the Gaussian N(mean, exp(log_std))."""
    correction = 2.0 * (math.log(2.0) - u - jax.nn.softplus(-2.0 * u))
    return log_prob(mean, log_std, u, False) - jnp.sum(correction, axis=-1)


def soft_q_targets(reward, terminated, next_q, next_log_prob, alpha, gamma):
    """y = r + gamma * (min_i Q_target_i(s', a') - alpha * log pi(a'|s')), a' ~ pi(.|s'),
    no future where the step terminated; `next_q` is already the minimum over critics.
    Held constant (no gradient)."""
    soft_value = next_q - alpha * next_log_prob
    return jax.lax.stop_gradient(reward + gamma * (1.0 - terminated.astype(jnp.float32)) * soft_value)


def critic_loss(q, target):
    """Each critic's 0.5 * mean((Q_i(s, a) - y)^2), summed over critics; `q` (critics, rows)."""
    return jnp.sum(0.5 * jnp.mean(jnp.square(q - target[None]), axis=-1))


def actor_loss(log_prob_new, q_new, alpha):
    """mean(alpha * log pi(a~|s) - min_i Q_i(s, a~)), a~ a fresh sample of the actor;
    `alpha` held constant."""
    return jnp.mean(jax.lax.stop_gradient(alpha) * log_prob_new - q_new)


def temperature_loss(log_alpha, log_prob_new, target_entropy):
    """-alpha * mean(log pi(a~|s) + target entropy), alpha = exp(log_alpha): its gradient
    raises alpha while the policy's entropy is below the target and lowers it above."""
    return -jnp.exp(log_alpha) * jnp.mean(jax.lax.stop_gradient(log_prob_new) + target_entropy)
