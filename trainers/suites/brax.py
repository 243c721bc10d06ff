"""Brax's physics envs (`brax:inverted_pendulum`) with gymnax's interface.

A bare Brax env has no time limit: the adapter wraps it in Brax's own `EpisodeWrapper`
(`episode_length` steps, 1000 unless the id's kwargs say otherwise), whose `State.done`
is set both when the env ends an episode and when time runs out, and whose
`info["truncation"]` tells the two apart. Brax's automatic reset is left out: rltui's
wrapper resets and keeps the final observation. Actions are continuous in [-1, 1].
"""

from __future__ import annotations

from typing import Any

from flax import struct

EPISODE_LENGTH = 1000  # Brax's own training default


@struct.dataclass
class BraxParams:
    max_steps_in_episode: int = struct.field(pytree_node=False, default=EPISODE_LENGTH)


def _brax_envs():
    """brax.envs, imported without the lines MuJoCo prints on stdout when its optional
    GPU backend (warp) is absent: stdout belongs to rltui's own output (`rltui envs`, --json)."""
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):
        import brax.envs
        import brax.envs.wrappers.training
    return brax.envs


def env_names() -> list[str]:
    # Brax registers its envs in a module-level dict and offers no public list of them.
    return sorted(_brax_envs()._envs)


class BraxEnv:
    def __init__(self, env: Any, episode_length: int):
        self._env = env
        self._episode_length = episode_length

    @property
    def default_params(self) -> BraxParams:
        return BraxParams(self._episode_length)

    def reset(self, key, params=None):
        state = self._env.reset(key)
        return state.obs, state

    def step(self, key, state, action, params=None):
        state = self._env.step(state, action)
        done = state.done > 0
        truncated = done & (state.info["truncation"] > 0)
        return state.obs, state, state.reward, done & ~truncated, truncated, {}

    def observation_space(self, params=None):
        import numpy as np
        from gymnax.environments import spaces

        return spaces.Box(-np.inf, np.inf, (int(self._env.observation_size),), np.float32)

    def action_space(self, params=None):
        import numpy as np
        from gymnax.environments import spaces

        return spaces.Box(-1.0, 1.0, (int(self._env.action_size),), np.float32)


def make(name: str, episode_length: int = EPISODE_LENGTH, **kwargs: Any) -> tuple[BraxEnv, BraxParams]:
    envs = _brax_envs()
    from brax.envs.wrappers.training import EpisodeWrapper

    from trainers.env_source import EnvImportError, EnvRef, describe_call, one_line

    try:
        env = EpisodeWrapper(envs.get_environment(name, **kwargs), int(episode_length), 1)
    except Exception as err:  # noqa: BLE001 - a backend or keyword the env rejects
        call = describe_call(EnvRef(f"brax:{name}", dict(kwargs, episode_length=episode_length)))
        raise EnvImportError(f"env: {call} raised {one_line(err)}") from None
    made = BraxEnv(env, int(episode_length))
    return made, made.default_params
