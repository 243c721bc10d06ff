"""Running statistics for observation and reward normalisation, kept in the training state.

Statistics are merged over every device's batch (`psum`), so each device holds the same
values and a run on N devices normalises exactly as on one. They change once per update,
after the rollout: the rollout, the stored batch and the loss all see one set of statistics,
so PPO's probability ratio starts at 1.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

OBS_CLIP = 10.0  # normalised observations are clipped to +-OBS_CLIP, as is usual
_EPS = 1e-8


@struct.dataclass
class RunningStats:
    """Mean and variance over `count` samples (count starts tiny, mean 0, var 1)."""

    count: jax.Array  # float32 scalar
    mean: jax.Array
    var: jax.Array


def initial_stats(shape: tuple[int, ...]) -> RunningStats:
    return RunningStats(jnp.float32(1e-4), jnp.zeros(shape, jnp.float32), jnp.ones(shape, jnp.float32))


def update_stats(stats: RunningStats, batch: jax.Array, axis_name: str) -> RunningStats:
    """Merge `batch` (samples along every axis before the stats' shape), summed over
    `axis_name`, into `stats` (Chan et al.'s parallel variance)."""
    batch = batch.reshape((-1,) + stats.mean.shape).astype(jnp.float32)
    count = jax.lax.psum(jnp.float32(batch.shape[0]), axis_name)
    mean = jax.lax.psum(jnp.sum(batch, axis=0), axis_name) / count
    var = jax.lax.psum(jnp.sum(jnp.square(batch - mean), axis=0), axis_name) / count
    total = stats.count + count
    delta = mean - stats.mean
    new_mean = stats.mean + delta * count / total
    m2 = stats.var * stats.count + var * count + jnp.square(delta) * stats.count * count / total
    return RunningStats(total, new_mean, m2 / total)


def normalize_obs(stats: RunningStats | None, obs: jax.Array) -> jax.Array:
    """`obs` standardised by `stats` and clipped; unchanged when `stats` is None."""
    if stats is None:
        return obs
    z = (obs.astype(jnp.float32) - stats.mean) / jnp.sqrt(stats.var + _EPS)
    return jnp.clip(z, -OBS_CLIP, OBS_CLIP)


def normalize_rewards(
    stats: RunningStats, discounted_return: jax.Array, reward: jax.Array, done: jax.Array, gamma, axis_name: str
) -> tuple[RunningStats, jax.Array, jax.Array]:
    """Rewards (time, env) divided by the running standard deviation of the discounted
    return. `discounted_return` (env,) is each env's return so far; it restarts after a step
    where an episode ended. Returns (stats, discounted_return, scaled rewards)."""

    def step(ret, xs):
        r, d = xs
        ret = ret * gamma + r
        return jnp.where(d, 0.0, ret), ret

    carried, returns = jax.lax.scan(step, discounted_return, (reward, done))
    stats = update_stats(stats, returns, axis_name)
    return stats, carried, reward / jnp.sqrt(stats.var + _EPS)
