"""Collect experience: `lax.scan` over time of the `vmap`ped policy and env step."""

from __future__ import annotations

import functools
from typing import Any, Callable

import jax
import jax.numpy as jnp

from trainers import networks
from trainers.envs import EnvSpec
from trainers.types import Transition

# (params, obs) -> (policy_out, log_std, value), batched over leading axes
ApplyFn = Callable[[Any, jax.Array], tuple[jax.Array, jax.Array, jax.Array]]


def env_keys(key: jax.Array, env_ids: jax.Array, num_global_envs: int, per_env: int = 1) -> jax.Array:
    """`per_env` keys for each environment, chosen by its global index from one split of
    `key`, so that an environment's randomness does not depend on how environments are
    split across devices. Shape (len(env_ids), per_env, key)."""
    keys = jax.random.split(key, (num_global_envs, per_env))
    return jax.lax.dynamic_slice_in_dim(keys, env_ids[0], env_ids.shape[0], axis=0)


def env_action(spec: EnvSpec, action: jax.Array) -> jax.Array:
    """What the env receives: continuous actions are clipped to the env's bounds (the
    policy's log-probability stays that of the unclipped sample)."""
    if spec.discrete:
        return action
    return jnp.clip(action, spec.action_low, spec.action_high)


def _rollout_step(carry, _, *, params, env_ids, num_global_envs: int, spec: EnvSpec, apply_fn: ApplyFn):
    env_state, obs, key = carry
    key, step_key = jax.random.split(key)
    keys = env_keys(step_key, env_ids, num_global_envs, per_env=2)
    policy_out, log_std, value = apply_fn(params, obs)
    sample = jax.vmap(networks.sample_action, in_axes=(0, 0, None, None))
    action = sample(keys[:, 0], policy_out, log_std, spec.discrete)
    log_prob = networks.log_prob(policy_out, log_std, action, spec.discrete)
    step = jax.vmap(spec.env.step, in_axes=(0, 0, 0, None))
    next_obs, env_state, reward, terminated, truncated, info = step(
        keys[:, 1], env_state, env_action(spec, action), spec.params
    )
    transition = Transition(
        obs=obs,
        action=action,
        log_prob=log_prob,
        value=value,
        reward=reward.astype(jnp.float32),
        terminated=terminated,
        truncated=truncated,
        final_obs=info["final_observation"],
        episode_return=info["returned_episode_returns"],
        episode_length=info["returned_episode_lengths"],
    )
    return (env_state, next_obs, key), transition


def rollout(
    params, env_state, obs, key, env_ids, *, num_global_envs: int, spec: EnvSpec, apply_fn: ApplyFn, num_steps: int
):
    """Run `num_steps` steps in each env of `env_ids` (contiguous global indices).
    Returns (env_state, obs, key, Transition[time, env])."""
    step = functools.partial(
        _rollout_step, params=params, env_ids=env_ids, num_global_envs=num_global_envs, spec=spec, apply_fn=apply_fn
    )
    (env_state, obs, key), traj = jax.lax.scan(step, (env_state, obs, key), None, length=num_steps)
    return env_state, obs, key, traj


def reset_envs(key: jax.Array, env_ids: jax.Array, num_global_envs: int, spec: EnvSpec):
    keys = env_keys(key, env_ids, num_global_envs)[:, 0]
    obs, env_state = jax.vmap(spec.env.reset, in_axes=(0, None))(keys, spec.params)
    return env_state, obs
