"""An imported env adapted to what the trainers step: its action space as the policy sees
it, observations as one float32 array, and an automatic reset at the end of an episode
(`adapt`, `ImportedEnv`). Failures are `env_source.EnvImportError`s, one line each.

JAX and gymnax are imported where they are used, as in `env_import`: gymnax is slow to import.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any, NamedTuple

from trainers.env_import import refusing_exit, traced_failure
from trainers.env_source import EnvImportError, EnvSource

UNSUPPORTED_SPACES = ("MultiDiscrete", "MultiBinary", "Tuple", "Dict")


@dataclasses.dataclass(frozen=True)
class ActionSpace:
    """The action space as the policy sees it."""

    discrete: bool
    num_actions: int
    shape: tuple[int, ...] = ()  # Box: the shape the env takes actions in
    low: Any = None
    high: Any = None


def action_space_of(space: Any, origin: str) -> ActionSpace:
    """Discrete or Box, by gymnax's classes or by their attributes (suites define their
    own space classes with the same fields)."""
    import numpy as np

    name = type(space).__name__
    box_like = all(hasattr(space, a) for a in ("low", "high", "shape"))
    if name == "Discrete" or (name not in UNSUPPORTED_SPACES and hasattr(space, "n") and not box_like):
        return ActionSpace(True, int(space.n))
    if name == "Box" or (name not in UNSUPPORTED_SPACES and box_like):
        shape = tuple(int(d) for d in space.shape)
        low = np.broadcast_to(np.asarray(space.low, np.float32), shape).reshape(-1)
        high = np.broadcast_to(np.asarray(space.high, np.float32), shape).reshape(-1)
        return ActionSpace(False, int(np.prod(shape, dtype=int)), shape, low, high)
    raise EnvImportError(
        f"env: {origin}'s action space {name} is not supported; rltui trains Discrete and Box action spaces"
    )


class RestartState(NamedTuple):
    """The state of an env rltui resets: the env's own state, and the state (with its
    observation) the env restarts from when an episode ends. `env_state` is the name
    gymnax's wrappers give the state they wrap, so renderers find the env's own inside."""

    env_state: Any
    restart_obs: Any  # as the policy sees it (flattened to obs_shape)
    restart_state: Any


class RestartKey(NamedTuple):
    """A rollout's step input: restart from the state's `restart_state` where the episode
    ends (drawn once per rollout, see `ImportedEnv.draw_restart`) instead of from a reset
    drawn for this step."""

    key: Any


class ImportedEnv:
    """An author's env as the trainers step it: float32 observations (a pytree of them
    flattened and joined into one vector), actions in the env's own shape, boolean
    terminated/truncated flags, and an automatic reset at the end of an episode with the
    last observation in `info["final_observation"]` (truncations are bootstrapped from it).
    An env whose step returns `final_observation` already resets itself. Any other is reset
    here, and its state is a `RestartState`: a rollout draws one restart state per env
    before its time loop (`draw_restart`) and steps with `RestartKey`s, so an ended episode
    restarts from it and the env's reset runs once per env and rollout, not on every step.
    Stepped with a plain key (evaluation, check-env), it restarts from a reset drawn from a
    split of the step's key; with a `step_keys.NoResetKey` (watching), it does not restart."""

    def __init__(self, env: Any, action: ActionSpace, obs_shape: tuple[int, ...], resets_itself: bool):
        self._env = env
        self._action = action
        self._obs_shape = obs_shape
        self._resets_itself = resets_itself

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "_env":
            raise AttributeError(name)
        return getattr(self._env, name)

    @property
    def resets_itself(self) -> bool:
        return self._resets_itself

    def observation_space(self, params) -> Any:
        import numpy as np
        from gymnax.environments import spaces

        return spaces.Box(-np.inf, np.inf, self._obs_shape, np.float32)

    def action_space(self, params) -> Any:
        return self._env.action_space(params)

    def _obs(self, obs):
        return as_flat_obs(obs, self._obs_shape)

    def reset(self, key, params=None):
        obs, state = self._env.reset(key, params)
        obs = self._obs(obs)
        if self._resets_itself:
            return obs, state
        # Until a rollout draws one, an ended episode restarts from the episode's first state.
        return obs, RestartState(state, obs, state)

    def draw_restart(self, key, state: RestartState, params=None) -> RestartState:
        """`state` with a fresh restart state, reset from `key`."""
        obs, fresh = self._env.reset(key, params)
        return RestartState(state.env_state, self._obs(obs), fresh)

    def step(self, key, state, action, params=None):
        import jax
        import jax.numpy as jnp

        from trainers.step_keys import NoResetKey

        if not self._action.discrete:
            action = jnp.reshape(action, self._action.shape)
        cached = isinstance(key, RestartKey)
        to_end = isinstance(key, NoResetKey)
        step_key = key.key if cached or to_end else key
        if not (self._resets_itself or cached):
            step_key, reset_key = jax.random.split(step_key)
        if to_end:
            from trainers.presampled_reset import PresampledResetWrapper

            if isinstance(self._env, PresampledResetWrapper):
                step_key = key  # gymnax's own auto-reset, which the wrapper leaves out when asked
        inner = state if self._resets_itself else state.env_state
        obs, next_state, reward, terminated, truncated, info = self._env.step(step_key, inner, action, params)
        terminated = jnp.asarray(terminated).astype(bool)
        truncated = jnp.asarray(truncated).astype(bool)
        info = dict(info) if isinstance(info, Mapping) else {}
        if self._resets_itself:
            final = self._obs(info["final_observation"])
            obs = self._obs(obs)
        elif to_end:
            obs = final = self._obs(obs)
            next_state = RestartState(next_state, state.restart_obs, state.restart_state)
        else:
            final = self._obs(obs)
            if cached:
                reset_obs, reset_state = state.restart_obs, state.restart_state
            else:
                reset_obs, reset_state = self._env.reset(reset_key, params)
                reset_obs = self._obs(reset_obs)
            done = terminated | truncated
            next_state = jax.tree.map(lambda r, s: jax.lax.select(done, r, s), reset_state, next_state)
            obs = jax.lax.select(done, reset_obs, final)
            next_state = RestartState(next_state, state.restart_obs, state.restart_state)
        info.update(terminated=terminated, truncated=truncated, final_observation=final)
        return obs, next_state, jnp.asarray(reward, jnp.float32).reshape(()), terminated, truncated, info


def as_flat_obs(obs: Any, shape: tuple[int, ...]) -> Any:
    """`obs` as one float32 array of `shape`: a single array keeps its shape (images stay
    images for the CNN), a pytree of arrays becomes one flat vector."""
    import jax
    import jax.numpy as jnp

    leaves = jax.tree.leaves(obs)
    if len(leaves) == 1:
        return jnp.asarray(leaves[0], jnp.float32).reshape(shape)
    return jnp.concatenate([jnp.asarray(leaf, jnp.float32).reshape(-1) for leaf in leaves])


class AdaptedEnv(NamedTuple):
    """An EnvSource ready for gymnax's observation and logging wrappers."""

    env: Any  # ImportedEnv
    params: Any
    obs_shape: tuple[int, ...]
    action: ActionSpace
    draw_step: Any  # see EnvSpec.draw_step


def adapt(source: EnvSource) -> AdaptedEnv:
    """Wrap `source` for the trainers, finding the observation shape and whether the env
    resets itself by tracing reset and step (shapes only: nothing is compiled or run).
    EnvImportError when either cannot be traced or the action space is not supported."""
    import jax
    import numpy as np

    from trainers.presampled_reset import PresampledResetWrapper

    env, params, origin = source
    try:
        with refusing_exit(f"{origin}'s action_space"):
            space = env.action_space(params)
    except EnvImportError:
        raise
    except Exception as err:  # noqa: BLE001
        raise traced_failure(err, "action_space", origin) from None
    action = action_space_of(space, origin)
    key = jax.ShapeDtypeStruct((2,), np.uint32)  # a raw threefry key, as jax.random.PRNGKey makes
    try:
        with refusing_exit(f"{origin}'s reset"):
            obs, state = jax.eval_shape(env.reset, key, params)
    except EnvImportError:
        raise
    except Exception as err:  # noqa: BLE001
        raise traced_failure(err, "reset", origin) from None
    leaves = jax.tree.leaves(obs)
    if not leaves:
        raise EnvImportError(f"env: {origin}'s reset returned no observation arrays")
    if len(leaves) == 1:
        obs_shape = tuple(int(d) for d in leaves[0].shape)
    else:
        obs_shape = (sum(int(np.prod(leaf.shape, dtype=int)) for leaf in leaves),)
    dtype = np.int32 if action.discrete else np.float32
    act = jax.ShapeDtypeStruct(() if action.discrete else action.shape, dtype)
    try:
        with refusing_exit(f"{origin}'s step"):
            out = jax.eval_shape(env.step, key, state, act, params)
    except EnvImportError:
        raise
    except Exception as err:  # noqa: BLE001
        raise traced_failure(err, "step", origin) from None
    if not isinstance(out, tuple) or len(out) != 6:
        got = f"{len(out)} values" if isinstance(out, tuple) else type(out).__name__
        raise EnvImportError(
            f"env: {origin}'s step returned {got}; expected gymnax 1.0's six: "
            "(obs, state, reward, terminated, truncated, info)"
        )
    info = out[5]
    resets_itself = isinstance(info, Mapping) and "final_observation" in info
    base, draw_step = env, None
    from gymnax.environments.environment import Environment

    if isinstance(env, Environment) and type(env).step is Environment.step:
        base = PresampledResetWrapper(env)  # gymnax's own auto-reset, drawn ahead of the time loop
        draw_step = functools.partial(base.draw_step, params=params)
    return AdaptedEnv(ImportedEnv(base, action, obs_shape, resets_itself), params, obs_shape, action, draw_step)
