"""Craftax (`craftax:Craftax-Classic-Symbolic-v1`) with gymnax 1.0's interface.

Craftax keeps gymnax 0.x's step, which returns one `done` for death, lava and the time
limit alike; the adapter splits it: an episode that ends at the step limit is a
truncation (bootstrapped), any other end a termination. The variant without automatic
reset is used: rltui's wrapper resets, keeping the final observation. Craftax's own
params name the step limit `max_timesteps`; the adapter's params carry them with the
limit as `max_steps_in_episode`, which evaluation and check-env read.
"""

from __future__ import annotations

from typing import Any

from flax import struct

NAMES = ("Craftax-Classic-Symbolic-v1", "Craftax-Classic-Pixels-v1", "Craftax-Symbolic-v1", "Craftax-Pixels-v1")


@struct.dataclass
class CraftaxParams:
    env_params: Any  # Craftax's own EnvParams, passed to its reset and step
    max_steps_in_episode: int = struct.field(pytree_node=False, default=10000)


def env_names() -> list[str]:
    return list(NAMES)


class CraftaxEnv:
    def __init__(self, env: Any):
        self._env = env

    @property
    def default_params(self) -> CraftaxParams:
        inner = self._env.default_params
        return CraftaxParams(inner, int(inner.max_timesteps))

    def _inner(self, params: CraftaxParams | None) -> Any:
        return (self.default_params if params is None else params).env_params

    def reset(self, key, params=None):
        return self._env.reset(key, self._inner(params))

    def step(self, key, state, action, params=None):
        inner = self._inner(params)
        obs, state, reward, done, _ = self._env.step(key, state, action, inner)
        time_up = state.timestep >= inner.max_timesteps
        return obs, state, reward, done & ~time_up, done & time_up, {}

    def observation_space(self, params=None):
        return self._env.observation_space(self._inner(params))

    def action_space(self, params=None):
        return self._env.action_space(self._inner(params))


def make(name: str, **kwargs: Any) -> tuple[CraftaxEnv, CraftaxParams]:
    from craftax.craftax_env import make_craftax_env_from_name

    env = CraftaxEnv(make_craftax_env_from_name(name, auto_reset=False, **kwargs))
    return env, env.default_params
