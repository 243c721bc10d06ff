"""DQN's targets. No collectives."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def q_targets(reward, terminated, next_target_q, next_online_q, gamma, double_q):
    """One-step targets r + gamma * Q_target(s', a') for rows of transitions, with no future
    where the step terminated. a' is argmax of the target network's values, or with
    `double_q` (1.0; traced) of the online network's. Held constant (no gradient)."""
    greedy = jnp.where(double_q > 0, jnp.argmax(next_online_q, axis=-1), jnp.argmax(next_target_q, axis=-1))
    next_q = jnp.take_along_axis(next_target_q, greedy[..., None], axis=-1)[..., 0]
    return jax.lax.stop_gradient(reward + gamma * (1.0 - terminated.astype(jnp.float32)) * next_q)
