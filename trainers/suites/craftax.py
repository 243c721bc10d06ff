"""Craftax (`craftax:Craftax-Classic-Symbolic-v1`) with gymnax 1.0's interface.

Craftax keeps gymnax 0.x's step, which returns one `done` for death, lava and the time
limit alike; the adapter splits it: an episode that ends at the step limit is a
truncation (bootstrapped), any other end a termination. The variant without automatic
reset is used: rltui's wrapper resets, keeping the final observation.
"""

from __future__ import annotations

from typing import Any

NAMES = ("Craftax-Classic-Symbolic-v1", "Craftax-Classic-Pixels-v1", "Craftax-Symbolic-v1", "Craftax-Pixels-v1")


def env_names() -> list[str]:
    return list(NAMES)


class CraftaxEnv:
    def __init__(self, env: Any):
        self._env = env

    @property
    def default_params(self) -> Any:
        return self._env.default_params

    def reset(self, key, params=None):
        return self._env.reset(key, params)

    def step(self, key, state, action, params=None):
        params = self.default_params if params is None else params
        obs, state, reward, done, _ = self._env.step(key, state, action, params)
        time_up = state.timestep >= params.max_timesteps
        return obs, state, reward, done & ~time_up, done & time_up, {}

    def observation_space(self, params=None):
        return self._env.observation_space(params if params is not None else self.default_params)

    def action_space(self, params=None):
        return self._env.action_space(params if params is not None else self.default_params)


def make(name: str, **kwargs: Any) -> tuple[CraftaxEnv, Any]:
    from craftax.craftax_env import make_craftax_env_from_name

    env = CraftaxEnv(make_craftax_env_from_name(name, auto_reset=False, **kwargs))
    return env, env.default_params
