"""Run a trained policy for whole episodes: one episode per environment, vmapped."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from trainers import networks
from trainers.envs import EnvSpec, episode_limit
from trainers.rollout import env_action

# One env, one step: (params, hidden, obs) -> (hidden, PolicyOutputs); see
# OnPolicyTrainer.policy_step. A feed-forward policy passes `hidden` through.
StepFn = Callable[[Any, Any, jax.Array], tuple[Any, networks.PolicyOutputs]]


class _Episodes(NamedTuple):
    """The evaluation's scan carry: one episode per env."""

    env_state: Any
    obs: jax.Array
    hidden: Any
    returns: jax.Array  # each env's return so far
    finished: jax.Array  # whether each env's episode has ended


def _eval_step(carry: _Episodes, key, *, params, spec: EnvSpec, step_fn: StepFn, greedy: bool,
               epsilon: float | None):
    act_key, step_key = jax.random.split(key)
    obs = carry.obs
    # Per env: params shared, each env's hidden state its own. Each env runs one episode
    # (steps after it ends are not counted), so the hidden state is never reset here.
    # log_std comes out per env: broadcast when the std does not depend on the state.
    hidden, out = jax.vmap(step_fn, in_axes=(None, 0, 0))(params, carry.hidden, obs)
    policy_out, log_std = out.policy_out, out.log_std
    if greedy:
        action = networks.greedy_action(policy_out, spec.discrete)
    else:
        if epsilon is not None:  # action values: sampled is epsilon-greedy
            policy_out = networks.epsilon_greedy_logits(policy_out, jnp.float32(epsilon))
        keys = jax.random.split(act_key, obs.shape[0])
        action = jax.vmap(networks.sample_action, in_axes=(0, 0, 0, None))(keys, policy_out, log_std, spec.discrete)
    step = jax.vmap(spec.env.step, in_axes=(0, 0, 0, None))
    obs, env_state, reward, terminated, truncated, _ = step(
        jax.random.split(step_key, obs.shape[0]), carry.env_state, env_action(spec, action), spec.params
    )
    returns = carry.returns + jnp.where(carry.finished, 0.0, reward)
    finished = carry.finished | terminated | truncated
    return _Episodes(env_state, obs, hidden, returns, finished), None


def evaluate(
    params, key, *, spec: EnvSpec, step_fn: StepFn, initial_hidden: Any, episodes: int, greedy: bool = True,
    epsilon: float | None = None,
) -> jax.Array:
    """Returns of `episodes` episodes (one per env), each run to termination or the env's
    time limit. `initial_hidden`: (episodes, H) zeros for a recurrent policy, else None.
    `epsilon`: for a network whose outputs are action values, sampled actions are
    epsilon-greedy at this rate (None: sampled from the policy's distribution)."""
    reset_key, run_key = jax.random.split(key)
    obs, env_state = jax.vmap(spec.env.reset, in_axes=(0, None))(jax.random.split(reset_key, episodes), spec.params)
    max_steps = episode_limit(spec.params)
    init = _Episodes(env_state, obs, initial_hidden, jnp.zeros(episodes), jnp.zeros(episodes, bool))
    step = functools.partial(_eval_step, params=params, spec=spec, step_fn=step_fn, greedy=greedy, epsilon=epsilon)
    final, _ = jax.lax.scan(step, init, jax.random.split(run_key, max_steps))
    return final.returns
