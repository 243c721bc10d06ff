"""Collect experience: `lax.scan` over time of the `vmap`ped policy and env step."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from trainers import networks
from trainers.env_adapter import RestartKey
from trainers.envs import EnvSpec
from trainers.types import Transition

# (params, obs) -> outputs, batched over leading axes
ApplyFn = Callable[[Any, jax.Array], networks.PolicyOutputs]


class EnvStep(NamedTuple):
    """Every env stepped once: the state and observation to continue from, and what happened."""

    env_state: Any
    obs: jax.Array
    transition: Transition


class RolloutRandomness(NamedTuple):
    """All random inputs of a rollout; see `rollout_randomness`."""

    key: jax.Array  # the key to continue from
    noise: jax.Array  # (time, env, action): policy noise
    step_keys: Any  # (time, env, ...): env step keys, or what the spec's `draw_step` made of them


class RestartInputs(NamedTuple):
    """A rollout's step inputs for an env with `draw_restarts` (leaves (time, ...)): on its
    first step each env's restart state is drawn from `restart_key`, and every step is
    passed its `key` as a `RestartKey`, so an episode that ends restarts from that state."""

    key: jax.Array  # (time, env, ...): each step's keys
    restart_key: jax.Array  # (time, env, ...): the rollout's restart keys, the same at every step
    first: jax.Array  # (time,) bool: the rollout's first step


class Rollout(NamedTuple):
    """`num_steps` steps of this device's envs: the state to continue from and the trajectory."""

    env_state: Any
    obs: jax.Array
    key: jax.Array
    traj: Transition  # leaves (time, env, ...)


def env_keys(key: jax.Array, env_ids: jax.Array, num_global_envs: int, per_env: int = 1) -> jax.Array:
    """`per_env` keys for each environment, chosen by its global index from one split of
    `key`, so that an environment's randomness does not depend on how environments are
    split across devices. Shape (len(env_ids), per_env, key)."""
    keys = jax.random.split(key, (num_global_envs, per_env))
    return jax.lax.dynamic_slice_in_dim(keys, env_ids[0], env_ids.shape[0], axis=0)


def env_action(spec: EnvSpec, action: jax.Array) -> jax.Array:
    """What the env receives: continuous actions are clipped to the env's bounds (the
    policy's log-probability stays that of the unclipped sample), or with
    `spec.squash_actions` their tanh is scaled to them."""
    if spec.discrete:
        return action
    if spec.squash_actions:
        return networks.squashed(action, spec.action_low, spec.action_high)
    return jnp.clip(action, spec.action_low, spec.action_high)


def _policy_noise(key: jax.Array, spec: EnvSpec) -> jax.Array:
    """Noise for `networks.action_from_noise`: Gumbel for the categorical, standard normal
    for the Gaussian."""
    sample = jax.random.gumbel if spec.discrete else jax.random.normal
    return sample(key, (spec.num_actions,), jnp.float32)


def step_envs(spec: EnvSpec, env_state, action, step_input):
    """Every env stepped once with `action` (the env's own, see `env_action`), from one
    step's slice of `RolloutRandomness.step_keys`: gymnax's six outputs, batched over envs.
    With `RestartInputs`, the rollout's first step draws each env's restart state, under a
    `lax.cond` on an unbatched flag: only that step pays for the envs' resets."""
    if isinstance(step_input, RestartInputs):
        env_state = jax.lax.cond(
            step_input.first, spec.draw_restarts, lambda state, _: state, env_state, step_input.restart_key
        )
        step_input = RestartKey(step_input.key)
    step = jax.vmap(spec.env.step, in_axes=(0, 0, 0, None))
    return step(step_input, env_state, action, spec.params)


def act_and_step(spec: EnvSpec, outputs: networks.PolicyOutputs, obs, env_state, noise, step_key) -> EnvStep:
    """Sample actions from the policy's `outputs` with the pre-drawn `noise`, step every
    env once."""
    action = networks.action_from_noise(noise, outputs.policy_out, outputs.log_std, spec.discrete)
    log_prob = networks.log_prob(outputs.policy_out, outputs.log_std, action, spec.discrete)
    next_obs, env_state, reward, terminated, truncated, info = step_envs(
        spec, env_state, env_action(spec, action), step_key
    )
    transition = Transition(
        obs=obs,
        action=action,
        log_prob=log_prob,
        value=outputs.value,
        reward=reward.astype(jnp.float32),
        terminated=terminated,
        truncated=truncated,
        final_obs=info["final_observation"],
        episode_return=info["returned_episode_returns"],
        episode_length=info["returned_episode_lengths"],
    )
    return EnvStep(env_state, next_obs, transition)


def _rollout_step(carry, xs, *, params, spec: EnvSpec, apply_fn: ApplyFn):
    env_state, obs = carry
    noise, step_key = xs
    stepped = act_and_step(spec, apply_fn(params, obs), obs, env_state, noise, step_key)
    return (stepped.env_state, stepped.obs), stepped.transition


def rollout_randomness(
    key: jax.Array, env_ids: jax.Array, num_global_envs: int, spec: EnvSpec, num_steps: int, noise_hold: int = 1
) -> RolloutRandomness:
    """All keys of a rollout, drawn before the time scan in a few batched RNG calls instead
    of several per step (on CPU each RNG call is a small loop, and per-op overhead dominates
    at few envs). Each env's keys come from its global index, so results do not depend on
    how envs are split over devices. The step inputs are keys, or, for a spec with
    `draw_step`, each key's split and reset state drawn here rather than inside the time
    loop (`presampled_reset`); for a spec with `draw_restarts`, `RestartInputs`: the
    rollout's restart keys come from a split of its key of their own, by global env index.

    `noise_hold` > 1 keeps each env's policy noise for that many steps (restarting with each
    rollout): temporally correlated exploration, as SB3's `sde_sample_freq` does. Every
    action is still a sample of the policy's distribution at its state, so log-probs and
    the PPO ratio are unchanged; what changes is that a push persists long enough to build
    momentum (MountainCarContinuous), where independent noise averages out."""
    restarts = int(spec.draw_restarts is not None)
    step_keys = jax.random.split(key, num_steps + 1 + restarts)
    key, restart_key, step_keys = step_keys[0], step_keys[1], step_keys[1 + restarts:]
    keys = jax.vmap(lambda k: env_keys(k, env_ids, num_global_envs, per_env=2))(step_keys)  # (time, env, 2)
    noise = jax.vmap(jax.vmap(lambda k: _policy_noise(k, spec)))(keys[:, :, 0])
    if noise_hold > 1:
        noise = noise[(np.arange(num_steps) // noise_hold) * noise_hold]
    step_keys = keys[:, :, 1]
    if spec.draw_step is not None:
        step_keys = jax.vmap(jax.vmap(spec.draw_step))(step_keys)
    if restarts:
        step_keys = restart_inputs(step_keys, env_keys(restart_key, env_ids, num_global_envs)[:, 0])
    return RolloutRandomness(key, noise, step_keys)


def restart_inputs(step_keys: jax.Array, restart_keys: jax.Array) -> RestartInputs:
    """`RestartInputs` for steps with keys `step_keys` (time, env, ...) and restart states
    drawn from `restart_keys` (env, ...)."""
    num_steps = step_keys.shape[0]
    # Broadcast over time because a scan's inputs all have a time axis: a few bytes per step.
    restart_keys = jnp.broadcast_to(restart_keys, (num_steps, *restart_keys.shape))
    return RestartInputs(step_keys, restart_keys, jnp.arange(num_steps) == 0)


def rollout(
    params, env_state, obs, key, env_ids, *, num_global_envs: int, spec: EnvSpec, apply_fn: ApplyFn, num_steps: int,
    noise_hold: int = 1,
) -> Rollout:
    """Run `num_steps` steps in each env of `env_ids` (contiguous global indices); see
    `rollout_randomness`."""
    randomness = rollout_randomness(key, env_ids, num_global_envs, spec, num_steps, noise_hold)
    step = functools.partial(_rollout_step, params=params, spec=spec, apply_fn=apply_fn)
    (env_state, obs), traj = jax.lax.scan(step, (env_state, obs), (randomness.noise, randomness.step_keys))
    return Rollout(env_state, obs, randomness.key, traj)


def reset_envs(key: jax.Array, env_ids: jax.Array, num_global_envs: int, spec: EnvSpec):
    keys = env_keys(key, env_ids, num_global_envs)[:, 0]
    obs, env_state = jax.vmap(spec.env.reset, in_axes=(0, None))(keys, spec.params)
    return env_state, obs
