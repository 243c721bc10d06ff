"""Navix's grid worlds (`navix:Navix-Empty-5x5-v0`) with gymnax's interface.

Navix steps a `Timestep` whose `step_type` tells a termination (2) from a time-limit
truncation (1). Its own `step` resets lazily, on the call after an episode ends, which would
spend a step on a transition that is not one; the adapter steps with `_step` (no reset)
and rltui's wrapper resets at once, keeping the final observation for bootstrapping.
"""

from __future__ import annotations

from typing import Any

from flax import struct


@struct.dataclass
class NavixParams:
    max_steps_in_episode: int = struct.field(pytree_node=False, default=100)


def env_names() -> list[str]:
    import navix

    return sorted(navix.registry())


class NavixEnv:
    def __init__(self, env: Any):
        self._env = env

    @property
    def default_params(self) -> NavixParams:
        return NavixParams(int(self._env.max_steps))

    def reset(self, key, params=None):
        timestep = self._env.reset(key)
        return timestep.observation, timestep

    def step(self, key, state, action, params=None):
        timestep = self._env._step(state, action)
        return (timestep.observation, timestep, timestep.reward, timestep.is_termination(),
                timestep.is_truncation(), {})

    def observation_space(self, params=None):
        from gymnax.environments import spaces

        space = self._env.observation_space
        return spaces.Box(space.minimum, space.maximum, tuple(space.shape), space.dtype)

    def action_space(self, params=None):
        from gymnax.environments import spaces

        space = self._env.action_space
        return spaces.Discrete(int(space.maximum) - int(space.minimum) + 1)


def make(name: str, **kwargs: Any) -> tuple[NavixEnv, NavixParams]:
    import navix

    env = NavixEnv(navix.make(name, **kwargs))
    return env, env.default_params
