"""A gymnax wrapper that hides observation components (a partially observable env).

Kept apart from `envs.py` because it subclasses gymnax's wrapper base, and gymnax is
imported lazily (it is slow to import).
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
from gymnax.environments import spaces
from gymnax.wrappers.purerl import GymnaxWrapper


class MaskObservationWrapper(GymnaxWrapper):
    """Keeps the flat observation components `kept`, in `reset`, `step` and the
    pre-reset `final_observation` alike (GAE bootstraps truncations from the latter)."""

    def __init__(self, env: Any, kept: tuple[int, ...]):
        super().__init__(env)
        self._kept = tuple(kept)

    def _mask(self, obs: jax.Array) -> jax.Array:
        return obs[..., jnp.asarray(self._kept)]

    def observation_space(self, params) -> spaces.Box:
        inner = self._env.observation_space(params)
        low = jnp.broadcast_to(jnp.asarray(inner.low), inner.shape)
        high = jnp.broadcast_to(jnp.asarray(inner.high), inner.shape)
        return spaces.Box(self._mask(low), self._mask(high), (len(self._kept),), inner.dtype)

    @functools.partial(jax.jit, static_argnames=("self",))
    def reset(self, key: jax.Array, params=None):
        obs, state = self._env.reset(key, params)
        return self._mask(obs), state

    @functools.partial(jax.jit, static_argnames=("self",))
    def step(self, key: jax.Array, state, action, params=None):
        obs, state, reward, terminated, truncated, info = self._env.step(key, state, action, params)
        info = {**info, "final_observation": self._mask(info["final_observation"])}
        return self._mask(obs), state, reward, terminated, truncated, info
