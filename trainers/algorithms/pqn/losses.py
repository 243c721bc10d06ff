"""PQN's pure pieces: the epsilon schedule, the Q(lambda) targets and the TD loss. No
collectives."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from trainers.returns import gae


def epsilon(eps_start, eps_end, eps_decay, anneal_updates, update_idx, xp=jnp):
    """The exploration rate of the update with 0-based `update_idx`: linear from
    `eps_start` to `eps_end` over the first `eps_decay` of the run's `anneal_updates`
    updates, then `eps_end`. Every argument may be traced. `xp` is the array module: NumPy
    on the host (what a resume says of the schedule), so that both use this one formula."""
    decay_updates = xp.maximum(eps_decay * anneal_updates, 1.0)
    fraction = xp.clip(update_idx / decay_updates, 0.0, 1.0)
    return eps_start + fraction * (eps_end - eps_start)


def q_lambda_targets(reward, max_q, next_max_q, terminated, truncated, gamma, q_lambda):
    """Q(lambda) targets for arrays of shape (time, ...): G_t = r_t + gamma * ((1 - lambda) *
    max_a Q(s_{t+1}, a) + lambda * G_{t+1}), with G_{t+1} replaced by max_a Q(s_{t+1}, a) after
    the rollout's last step, no future where step t terminated, and only the bootstrap
    max_a Q(final observation) where a time limit cut the episode at step t.

    `max_q[t]` is max_a Q(obs[t], a) as the rollout computed it, `next_max_q[t]` that of the
    observation step t reached (before any auto-reset), which is `max_q[t + 1]` wherever step
    t did not end an episode. Under that condition these are the lambda-returns of
    `returns.gae` with V = max_a Q: its value targets (advantage + value) are these G_t."""
    _, targets = gae(reward, max_q, next_max_q, terminated, truncated, gamma, q_lambda)
    return targets


def td_loss(q_taken, target):
    """0.5 * mean((Q(s, a) - G)^2), the target held constant."""
    return 0.5 * jnp.mean(jnp.square(q_taken - jax.lax.stop_gradient(target)))
