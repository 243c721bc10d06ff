"""Environments by id, wrapped for training: gymnax's built-in ones by name, any other
env with gymnax's interface by import path (`my_pkg.envs:make_env`, see `env_import`), and
env objects the Python API registered (`object:Name`).

gymnax takes over a second to import, so it is imported inside `make_env` only.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

# Environments the trainers support: Box observations, Discrete or Box actions.
CLASSIC_CONTROL = ("CartPole-v1", "Acrobot-v1", "MountainCar-v0", "Pendulum-v1", "MountainCarContinuous-v0")
MINATAR = ("Asterix-MinAtar", "Breakout-MinAtar", "Freeway-MinAtar", "SpaceInvaders-MinAtar")
BSUITE = ("Catch-bsuite", "DeepSea-bsuite", "MemoryChain-bsuite", "UmbrellaChain-bsuite", "DiscountingChain-bsuite")
MISC = ("FourRooms-misc", "PointRobot-misc", "Reacher-misc", "Swimmer-misc", "Pong-misc")
# Partially observable variants: a gymnax env id and the observation components kept.
# CartPole-v1-pomdp shows cart position and pole angle only (its velocities are masked out),
# so a policy must remember past observations to act well: a test bed for `network = "gru"`.
MASKED_ENVS: dict[str, tuple[str, tuple[int, ...]]] = {"CartPole-v1-pomdp": ("CartPole-v1", (0, 2))}
SUPPORTED_ENVS: tuple[str, ...] = CLASSIC_CONTROL + MINATAR + BSUITE + MISC + tuple(MASKED_ENVS)
# Flattened observation size of each, known without building the env: building one starts
# JAX's backend, and the launcher sizes XLA's thread pool from these before that
# (`rltui.infra.runtime.resolve_cpu_threads`). A test keeps them equal to `make_env`'s.
OBS_SIZES: dict[str, int] = {
    "CartPole-v1": 4, "Acrobot-v1": 6, "MountainCar-v0": 2, "Pendulum-v1": 3, "MountainCarContinuous-v0": 2,
    "Asterix-MinAtar": 400, "Breakout-MinAtar": 400, "Freeway-MinAtar": 700, "SpaceInvaders-MinAtar": 600,
    "Catch-bsuite": 50, "DeepSea-bsuite": 64, "MemoryChain-bsuite": 3, "UmbrellaChain-bsuite": 3,
    "DiscountingChain-bsuite": 2,
    "FourRooms-misc": 4, "PointRobot-misc": 6, "Reacher-misc": 8, "Swimmer-misc": 16, "Pong-misc": 3600,
    "CartPole-v1-pomdp": 2,
}


@dataclasses.dataclass(frozen=True)
class EnvSpec:
    """An environment ready to train on, and what the policy needs to know about it."""

    env_id: str
    env: Any  # gymnax environment, wrapped (flat observations, episode statistics); see step_keys.NoResetKey
    params: Any  # gymnax EnvParams
    obs_shape: tuple[int, ...]  # before flattening
    discrete: bool
    num_actions: int  # discrete: number of actions; continuous: action dimension
    action_low: Any = None  # continuous only: arrays of shape (num_actions,)
    action_high: Any = None
    # key -> `presampled_reset.StepDraw`: a step's randomness, drawn before the rollout's
    # time loop and passed to `env.step` in place of its key. None: plain keys.
    draw_step: Any = None
    # (env_state, keys) -> env_state, batched over envs: each env's restart state drawn
    # afresh from its key, once per rollout before its steps, which then pass
    # `env_adapter.RestartKey`s (an env rltui resets, see `env_adapter.ImportedEnv`). None: the
    # env's step resets it by itself, from its key or its `draw_step`.
    draw_restarts: Any = None
    # Continuous only: the policy's actions are unbounded and the env receives their tanh
    # scaled to [action_low, action_high] (`rollout.env_action`); False: they are clipped.
    squash_actions: bool = False

    @property
    def action_kind(self) -> str:
        """One of `trainers.keys.ACTION_KINDS`: the keys that matter for this env say it."""
        return "discrete" if self.discrete else "continuous"

    @property
    def obs_size(self) -> int:
        size = 1
        for d in self.obs_shape:
            size *= d
        return size


def is_builtin(env_id: str) -> bool:
    return env_id in SUPPORTED_ENVS


# Steps an episode may last, for acting outside training, when the env declares no limit.
DEFAULT_EPISODE_LIMIT = 1000


def episode_limit(params) -> int:
    """The env's declared step limit (gymnax's `params.max_steps_in_episode`), or
    `DEFAULT_EPISODE_LIMIT` for an env that declares none."""
    return int(getattr(params, "max_steps_in_episode", DEFAULT_EPISODE_LIMIT))


def make_env(env_id: str) -> EnvSpec:
    """The env `env_id` names; `env_import.EnvImportError` (a ValueError, one line) when it
    cannot be built or trained on."""
    if env_id not in SUPPORTED_ENVS:
        from trainers import env_import
        from trainers.suites import suite_of

        if env_import.is_import_path(env_id) or env_import.is_object_id(env_id) or suite_of(env_id) is not None:
            return _make_imported(env_id)
        raise ValueError(f"env: unknown environment {env_id!r}; run `rltui envs` for the list")
    import gymnax
    import numpy as np
    from gymnax.environments import spaces
    from gymnax.environments.environment import Environment
    from gymnax.wrappers.purerl import FlattenObservationWrapper, LogWrapper

    from trainers.presampled_reset import PresampledResetWrapper

    base_id, kept = MASKED_ENVS.get(env_id, (env_id, None))
    base, params = gymnax.make(base_id)
    obs_shape = tuple(int(d) for d in base.observation_space(params).shape)
    space = base.action_space(params)
    draw_step = None
    # Every base env is wrapped, so that it takes a NoResetKey; one with its own `step`
    # (DeepSea) keeps it: stepped with plain keys, never drawn ahead.
    own_step = type(base).step is not Environment.step
    base = PresampledResetWrapper(base)
    if not own_step:
        draw_step = functools.partial(base.draw_step, params=params)
    flat = FlattenObservationWrapper(base)
    if kept is not None:
        from trainers.masked_env import MaskObservationWrapper

        flat, obs_shape = MaskObservationWrapper(flat, kept), (len(kept),)
    env = LogWrapper(flat)
    if isinstance(space, spaces.Discrete):
        return EnvSpec(env_id, env, params, obs_shape, True, int(space.n), draw_step=draw_step)
    low = np.broadcast_to(np.asarray(space.low, np.float32), space.shape)
    high = np.broadcast_to(np.asarray(space.high, np.float32), space.shape)
    return EnvSpec(env_id, env, params, obs_shape, False, int(np.prod(space.shape)), low, high, draw_step=draw_step)


@functools.cache
def _make_imported(env_id: str) -> EnvSpec:
    # Cached so that every trainer of this env shares one wrapped object, and so one
    # compiled program (the env is a static argument of the jitted steps).
    from gymnax.wrappers.purerl import FlattenObservationWrapper, LogWrapper

    from trainers import env_import
    from trainers.env_adapter import adapt

    adapted = adapt(env_import.load(env_id))
    env = LogWrapper(FlattenObservationWrapper(adapted.env))
    action = adapted.action
    draw_restarts = None
    if not adapted.env.resets_itself:
        draw_restarts = functools.partial(_draw_restarts, imported=adapted.env, params=adapted.params)
    return EnvSpec(
        env_id, env, adapted.params, adapted.obs_shape, action.discrete, action.num_actions,
        action.low, action.high, adapted.draw_step, draw_restarts,
    )


def _draw_restarts(env_state, keys, *, imported, params):
    """`EnvSpec.draw_restarts` for an imported env under `_make_imported`'s wrappers:
    LogWrapper keeps the imported env's `RestartState` as `env_state` (the flattening
    wrapper keeps no state of its own)."""
    import jax

    draw = jax.vmap(imported.draw_restart, in_axes=(0, 0, None))
    return env_state.replace(env_state=draw(keys, env_state.env_state, params))
