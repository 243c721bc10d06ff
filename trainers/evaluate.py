"""Run a trained policy for whole episodes: one episode per environment, vmapped."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from trainers import networks
from trainers.envs import EnvSpec
from trainers.rollout import env_action


def _eval_step(carry, key, *, params, spec: EnvSpec, apply_fn, greedy: bool):
    env_state, obs, returns, finished = carry
    act_key, step_key = jax.random.split(key)
    policy_out, log_std, _ = apply_fn(params, obs)
    if greedy:
        action = networks.greedy_action(policy_out, spec.discrete)
    else:
        keys = jax.random.split(act_key, obs.shape[0])
        action = jax.vmap(networks.sample_action, in_axes=(0, 0, None, None))(keys, policy_out, log_std, spec.discrete)
    step = jax.vmap(spec.env.step, in_axes=(0, 0, 0, None))
    obs, env_state, reward, terminated, truncated, _ = step(
        jax.random.split(step_key, obs.shape[0]), env_state, env_action(spec, action), spec.params
    )
    returns = returns + jnp.where(finished, 0.0, reward)
    finished = finished | terminated | truncated
    return (env_state, obs, returns, finished), None


def evaluate(params, key, *, spec: EnvSpec, apply_fn, episodes: int, greedy: bool = True) -> jax.Array:
    """Returns of `episodes` episodes (one per env), each run to termination or the env's
    time limit."""
    reset_key, run_key = jax.random.split(key)
    obs, env_state = jax.vmap(spec.env.reset, in_axes=(0, None))(jax.random.split(reset_key, episodes), spec.params)
    max_steps = int(spec.params.max_steps_in_episode)
    init = (env_state, obs, jnp.zeros(episodes), jnp.zeros(episodes, bool))
    step = functools.partial(_eval_step, params=params, spec=spec, apply_fn=apply_fn, greedy=greedy)
    (_, _, returns, _), _ = jax.lax.scan(step, init, jax.random.split(run_key, max_steps))
    return returns
