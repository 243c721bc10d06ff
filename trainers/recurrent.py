"""Recurrent policies: a hidden state per environment, carried through the rollout and
replayed exactly in the update.

Conventions, for one environment:

- A step fn is `(params, hidden, obs) -> (hidden, PolicyOutputs)` on one
  env (no batch axis); it is `jax.vmap`ped with `in_axes=(None, 0, 0)`: params shared,
  each env's hidden state and observation its own row. Sharing the hidden state across
  envs (in_axes None for it) would leak one episode's memory into every other env.
- Step t: `out_t, outputs_t = step(h_t, obs_t)`, then `h_{t+1} = 0 if done_t else out_t`
  with done = terminated or truncated. The reset happens right after the env step, before
  the next policy call, so the state entering a rollout segment (`TrainState.hidden`) is
  all the replay needs besides the stored observations and done flags.
- The bootstrap value of step t's final observation continues the same episode:
  `step(out_t, final_obs_t)`.
- The update minibatches over environments, never over time steps: each minibatch holds
  whole sequences, replayed from their segment's start state with the same resets, so at
  the first epoch the recomputed log-probs and values are the rollout's.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from trainers.envs import EnvSpec
from trainers.networks import PolicyOutputs, RecurrentActorCritic
from trainers.rollout import act_and_step, rollout_randomness
from trainers.types import Transition

StepFn = Callable[[Any, jax.Array, jax.Array], tuple[jax.Array, PolicyOutputs]]

# vmap over envs: hidden and obs split per env; every output per env (a state-independent
# log_std is broadcast).
_ENV_AXES = dict(in_axes=(None, 0, 0))


def reset_where_done(hidden: jax.Array, done: jax.Array) -> jax.Array:
    """Zeros where the step ended an episode; `hidden` has one more (feature) axis than `done`."""
    return jnp.where(done[..., None], jnp.zeros_like(hidden), hidden)


def _rollout_step(carry, xs, *, params, spec: EnvSpec, step_fn: StepFn):
    env_state, obs, hidden = carry
    noise, step_key = xs
    hidden, outputs = jax.vmap(step_fn, **_ENV_AXES)(params, hidden, obs)
    stepped = act_and_step(spec, outputs, obs, env_state, noise, step_key)
    done = jnp.logical_or(stepped.transition.terminated, stepped.transition.truncated)
    return (stepped.env_state, stepped.obs, reset_where_done(hidden, done)), (stepped.transition, hidden)


class RecurrentRollout(NamedTuple):
    """`rollout.Rollout` with the hidden states: `hidden` (env, H) is the state to continue
    from (reset where the last step ended an episode), `step_hidden` (time, env, H) the
    state each step's policy call produced (before any reset)."""

    env_state: Any
    obs: jax.Array
    hidden: jax.Array
    key: jax.Array
    traj: Transition
    step_hidden: jax.Array


def recurrent_rollout(
    params, env_state, obs, hidden, key, env_ids, *, num_global_envs: int, spec: EnvSpec, step_fn: StepFn,
    num_steps: int, noise_hold: int = 1,
) -> RecurrentRollout:
    """`rollout` with a hidden state per env."""
    randomness = rollout_randomness(key, env_ids, num_global_envs, spec, num_steps, noise_hold)
    step = functools.partial(_rollout_step, params=params, spec=spec, step_fn=step_fn)
    (env_state, obs, hidden), (traj, step_hidden) = jax.lax.scan(
        step, (env_state, obs, hidden), (randomness.noise, randomness.step_keys)
    )
    return RecurrentRollout(env_state, obs, hidden, randomness.key, traj, step_hidden)


def _replay_step(hidden, xs, *, params, network: RecurrentActorCritic):
    x, done = xs
    hidden, y = network.apply(params, hidden, x, method="recur")
    return reset_where_done(hidden, done), y


def _replay_env(params, start_hidden, x, done, *, network: RecurrentActorCritic) -> jax.Array:
    step = functools.partial(_replay_step, params=params, network=network)
    _, ys = jax.lax.scan(step, start_hidden, (x, done))
    return ys


def replay(
    network: RecurrentActorCritic, params, start_hidden: jax.Array, obs: jax.Array, done: jax.Array
) -> PolicyOutputs:
    """The policy's outputs over stored sequences (time, env, ...): each env re-run from its
    segment's start state `start_hidden` (env, H), reset where `done`, as in the rollout.
    Only the GRU cell runs inside the time scan; the embedding and the heads, which have no
    recurrence, run on all steps at once (fewer ops per scan step, which is what costs on
    CPU)."""
    x = network.apply(params, obs.astype(jnp.float32), method="encode")
    per_env = jax.vmap(functools.partial(_replay_env, network=network), in_axes=(None, 0, 1, 1), out_axes=1)
    return network.apply(params, per_env(params, start_hidden, x, done), method="heads")


def bootstrap_values(step_fn: StepFn, params, step_hidden: jax.Array, final_obs: jax.Array) -> jax.Array:
    """V of each step's final observation (time, env), continuing that step's episode from
    the state its policy call produced. All steps at once: no recurrence between them."""
    per_env = jax.vmap(step_fn, **_ENV_AXES)
    _, outputs = jax.vmap(per_env, in_axes=(None, 0, 0))(params, step_hidden, final_obs)
    return outputs.value


def env_minibatches(key: jax.Array, env_ids: jax.Array, num_global_envs: int, num_minibatches: int) -> jax.Array:
    """Local env indices of each minibatch, shape (num_minibatches, local envs // num_minibatches).

    Envs are grouped by global index into runs of `num_minibatches`; a permutation per group,
    keyed by the group's global index, sends each of its envs to a different minibatch. A
    device holds whole groups, so minibatch m is the same set of envs on N devices as on
    one, with equal shares per device (the gradient pmean stays an exact mean)."""
    num_groups = num_global_envs // num_minibatches
    local_groups = env_ids.shape[0] // num_minibatches
    keys = jax.random.split(key, num_groups)
    keys = jax.lax.dynamic_slice_in_dim(keys, env_ids[0] // num_minibatches, local_groups, axis=0)
    perms = jax.vmap(lambda k: jax.random.permutation(k, num_minibatches))(keys)  # (group, minibatch)
    return (jnp.arange(local_groups)[:, None] * num_minibatches + perms).T


def split_by_env(batch, start_hidden: jax.Array, indices: jax.Array):
    """Time-major `batch` leaves (time, env, ...) -> (minibatch, time, env', ...), and
    `start_hidden` (env, H) -> (minibatch, env', H), by the indices of `env_minibatches`."""
    sequences = jax.tree.map(lambda x: jnp.moveaxis(jnp.take(x, indices, axis=1), 1, 0), batch)
    return sequences, jnp.take(start_hidden, indices, axis=0)
