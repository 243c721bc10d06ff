"""Jumanji's environments (`jumanji:Snake-v1`) with gymnax's interface.

Jumanji steps without a key and returns a `TimeStep`: its last step ends a true
termination when its `discount` is 0 and a time-limit truncation (bootstrapped) when the
discount stays above 0. The bare env does not reset itself; rltui's wrapper resets and
keeps the final observation. Observations are pytrees (a grid, an action mask, a step
count...): the wrapper flattens them into one vector. Many of Jumanji's envs take
multi-discrete actions, which rltui's policies do not produce: those are refused when
the env is made, naming the spec, and so are multi-agent ones (a reward per agent).
"""

from __future__ import annotations

from typing import Any

from flax import struct

from trainers.env_source import EnvImportError

# The limit episodes are checked and evaluated against for an env that declares none
# (it ends its episodes itself: a full board, every city visited...).
UNDECLARED_LIMIT = 1000


@struct.dataclass
class JumanjiParams:
    max_steps_in_episode: int = struct.field(pytree_node=False, default=UNDECLARED_LIMIT)


def env_names() -> list[str]:
    import jumanji

    return sorted(jumanji.registered_environments())


def _action_space(spec: Any, origin: str) -> Any:
    """gymnax's space for a DiscreteArray or a float BoundedArray; EnvImportError for any other spec."""
    import numpy as np
    from gymnax.environments import spaces
    from jumanji import specs

    kind = type(spec).__name__
    if isinstance(spec, specs.DiscreteArray):
        return spaces.Discrete(int(spec.num_values))
    if (isinstance(spec, specs.BoundedArray) and not isinstance(spec, specs.MultiDiscreteArray)
            and np.issubdtype(np.dtype(spec.dtype), np.floating)):
        shape = tuple(int(d) for d in spec.shape)
        low = np.broadcast_to(np.asarray(spec.minimum, np.float32), shape)
        high = np.broadcast_to(np.asarray(spec.maximum, np.float32), shape)
        return spaces.Box(low, high, shape, np.float32)
    if kind == "BoundedArray":
        kind = f"BoundedArray of {np.dtype(spec.dtype)}"
    raise EnvImportError(
        f"env: {origin}'s action spec {kind} is not supported; "
        "rltui trains DiscreteArray and float BoundedArray action specs"
    )


class JumanjiEnv:
    def __init__(self, env: Any, origin: str):
        self._env = env
        reward_shape = tuple(int(d) for d in env.reward_spec.shape)
        if reward_shape:
            raise EnvImportError(
                f"env: {origin} gives a reward of shape {reward_shape} (one per agent); rltui trains single-agent envs"
            )
        self._action_space = _action_space(env.action_spec, origin)

    @property
    def default_params(self) -> JumanjiParams:
        limit = getattr(self._env, "time_limit", None)
        return JumanjiParams(int(limit) if limit else UNDECLARED_LIMIT)

    def reset(self, key, params=None):
        state, timestep = self._env.reset(key)
        return timestep.observation, state

    def step(self, key, state, action, params=None):
        import jax.numpy as jnp

        state, timestep = self._env.step(state, action)
        last = timestep.last()
        ends = timestep.discount == 0
        return (timestep.observation, state, jnp.asarray(timestep.reward, jnp.float32),
                last & ends, last & ~ends, {})

    def observation_space(self, params=None):
        import jax
        import numpy as np
        from gymnax.environments import spaces

        leaves = jax.tree.leaves(self._env.observation_spec.generate_value())
        if len(leaves) == 1:
            return spaces.Box(-np.inf, np.inf, tuple(leaves[0].shape), leaves[0].dtype)
        size = sum(int(np.prod(leaf.shape, dtype=int)) for leaf in leaves)
        return spaces.Box(-np.inf, np.inf, (size,), np.float32)  # the pytree, as the wrapper flattens it

    def action_space(self, params=None):
        return self._action_space


def make(name: str, **kwargs: Any) -> tuple[JumanjiEnv, JumanjiParams]:
    import jumanji

    from trainers.env_source import EnvRef, describe_call, one_line

    try:
        made = jumanji.make(name, **kwargs)
    except Exception as err:  # noqa: BLE001 - an env may fetch data or reject its arguments
        call = describe_call(EnvRef(f"jumanji:{name}", kwargs))
        raise EnvImportError(f"env: {call} raised {one_line(err)}") from None
    env = JumanjiEnv(made, f"jumanji:{name}")
    return env, env.default_params
