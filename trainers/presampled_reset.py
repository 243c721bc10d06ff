"""gymnax's auto-reset with each step's randomness drawn ahead of the time loop.

gymnax's `step` splits its key and draws a fresh reset state on every step, whether or not
the episode ends: two RNG calls inside the rollout's `lax.scan`. On CPU each threefry call
lowers to a small rolled loop, a fixed cost paid on every step (docs/benchmarks.md). So
here the split and the reset draws happen before the scan, for every (time, env) in a few
batched calls (`draw_step`, vmapped), and `step` consumes the result.
The values are exactly gymnax's: the same split of the same key, the same reset draw.

Kept apart from `envs.py` because it subclasses gymnax's wrapper base, and gymnax is
imported lazily (it is slow to import).
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct
from gymnax.wrappers.purerl import GymnaxWrapper

from trainers.step_keys import NoResetKey


@struct.dataclass
class StepDraw:
    """One env step's randomness, drawn ahead: the key of the transition and the state (and
    observation) the env restarts from if this step ends the episode."""

    key: jax.Array
    reset_obs: Any
    reset_state: Any


class PresampledResetWrapper(GymnaxWrapper):
    """Wraps a gymnax base env (below the observation and logging wrappers, which pass the
    step's first argument through untouched). `step` takes a `StepDraw` from `draw_step`,
    or a `step_keys.NoResetKey` (the transition, without the reset); given a plain key it is the
    env's own `step`. An env with a `step` of its own (DeepSea: it carries episode totals
    across resets) is only ever given plain keys and `NoResetKey`s: its reset is its own,
    its transition is `step_env`'s."""

    def draw_step(self, key: jax.Array, params) -> StepDraw:
        """What gymnax's `step(key, ...)` would draw: the same split, the same reset."""
        key_step, key_reset = jax.random.split(key)
        reset_obs, reset_state = self._env.reset_env(key_reset, params)
        return StepDraw(key_step, reset_obs, reset_state)

    @functools.partial(jax.jit, static_argnames=("self",))
    def step(self, key, state, action, params=None):
        to_end = isinstance(key, NoResetKey)
        if not (to_end or isinstance(key, StepDraw)):
            return self._env.step(key, state, action, params)
        if params is None:
            params = self._env.default_params
        # gymnax's split of a plain key: the transition it would make.
        step_key = jax.random.split(key.key)[0] if to_end else key.key
        obs, next_state, reward, terminated, info = self._env.step_env(step_key, state, action, params)
        truncated = self._env.is_truncated(next_state, params)
        info = {**info, "terminated": terminated, "truncated": truncated, "final_observation": obs}
        if to_end:
            return obs, next_state, reward, terminated, truncated, info
        done = jnp.logical_or(terminated, truncated)
        select = lambda reset, stepped: jax.lax.select(done, reset, stepped)
        return (
            jax.tree.map(select, key.reset_obs, obs),
            jax.tree.map(select, key.reset_state, next_state),
            reward,
            terminated,
            truncated,
            info,
        )
