"""Proximal Policy Optimisation as pure functions over `TrainState`.

One update = rollout (scan over time of vmapped env+policy) -> GAE (reverse scan) ->
epochs x minibatches (nested scans of value_and_grad, gradients averaged over the device
axis with `lax.pmean`) -> optax. Every function here runs inside `parallel.DataParallel`'s
pmap, also on a single device, so `AXIS` is always bound.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.flatten_util
import jax.numpy as jnp
import optax
from flax import struct

from trainers import losses, networks
from trainers.envs import EnvSpec, make_env
from trainers.hparams import DynamicHParams, StaticConfig
from trainers.returns import gae
from trainers.rollout import reset_envs, rollout
from trainers.types import ChunkMetrics, TrainState, UpdateMetrics

AXIS = "devices"


@struct.dataclass
class Batch:
    """Training data of one update, leaves shaped (time, env, ...)."""

    obs: jax.Array
    action: jax.Array
    log_prob: jax.Array
    value: jax.Array
    advantage: jax.Array
    target: jax.Array


@struct.dataclass
class LossInfo:
    policy_loss: jax.Array
    value_loss: jax.Array
    entropy: jax.Array
    approx_kl: jax.Array
    clip_frac: jax.Array
    grad_norm: jax.Array


def make_optimizer(learning_rate, max_grad_norm):
    return optax.chain(optax.clip_by_global_norm(max_grad_norm), optax.adam(learning_rate, eps=1e-5))


def flat_optimizer(learning_rate, max_grad_norm):
    return optax.flatten(make_optimizer(learning_rate, max_grad_norm))


def annealed_lr(hp: DynamicHParams, update_idx: jax.Array) -> jax.Array:
    """Linear decay to zero over `anneal_updates`, computed inside the step so that an
    edited `lr` takes effect on the next update without recompiling."""
    frac = jnp.clip(1.0 - update_idx.astype(jnp.float32) / hp.anneal_updates, 0.0, 1.0)
    return hp.lr * jnp.where(hp.anneal_lr > 0, frac, 1.0)


def global_mean_std(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Mean and standard deviation over the whole batch on all devices."""
    mean = jax.lax.pmean(jnp.mean(x), AXIS)
    var = jax.lax.pmean(jnp.mean(jnp.square(x)), AXIS) - jnp.square(mean)
    return mean, jnp.sqrt(jnp.maximum(var, 0.0))


@dataclasses.dataclass(frozen=True)
class PPO:
    """PPO for one static configuration, split data-parallel over `num_devices`."""

    static: StaticConfig
    spec: EnvSpec
    num_devices: int = 1

    @property
    def network(self) -> networks.ActorCritic:
        return networks.ActorCritic(
            num_actions=self.spec.num_actions,
            discrete=self.spec.discrete,
            hidden_sizes=tuple(self.static.hidden_sizes),
            activation=self.static.activation,
        )

    @property
    def envs_per_device(self) -> int:
        return self.static.num_envs // self.num_devices

    @property
    def optimizer(self) -> optax.GradientTransformation:
        # The values given here are placeholders: inject_hyperparams keeps the live values in
        # opt_state, and `update` writes lr and max_grad_norm there each step. The optimizer
        # works on the params raveled into one vector (optax.flatten): the same arithmetic,
        # but a few large ops instead of several per leaf, which is most of a minibatch step's
        # cost on CPU at these sizes.
        return optax.inject_hyperparams(flat_optimizer)(learning_rate=0.0, max_grad_norm=1.0)

    def apply(self, params, obs):
        return self.network.apply(params, obs.astype(jnp.float32))

    def _env_ids(self) -> jax.Array:
        first = jax.lax.axis_index(AXIS) * self.envs_per_device
        return first + jnp.arange(self.envs_per_device)

    # --- init -------------------------------------------------------------------------------
    def init(self, key: jax.Array, hp: DynamicHParams) -> TrainState:
        """Same params on every device (same key); envs seeded by their global index."""
        key, params_key, env_key = jax.random.split(key, 3)
        dummy_obs = jnp.zeros((1, self.spec.obs_size), jnp.float32)
        params = self.network.init(params_key, dummy_obs)
        env_state, obs = reset_envs(env_key, self._env_ids(), self.static.num_envs, self.spec)
        # gymnax leaves some fields weakly typed (time=0); a state restored from host arrays
        # is strongly typed, and the difference would recompile the chunk.
        env_state = jax.tree.map(lambda x: jnp.asarray(x, dtype=x.dtype), env_state)
        return TrainState(
            params=params,
            opt_state=set_injected(self.optimizer.init(params), learning_rate=hp.lr, max_grad_norm=hp.max_grad_norm),
            env_state=env_state,
            obs=obs,
            key=key,
            update_idx=jnp.zeros((), jnp.int32),
        )

    # --- one update -------------------------------------------------------------------------
    def _loss(self, params, mb: Batch, advantage, hp: DynamicHParams):
        policy_out, log_std, value = self.apply(params, mb.obs)
        log_prob = networks.log_prob(policy_out, log_std, mb.action, self.spec.discrete)
        policy_loss, approx_kl, clip_frac = losses.clipped_surrogate_loss(log_prob, mb.log_prob, advantage, hp.clip_eps)
        value_loss = losses.clipped_value_loss(value, mb.value, mb.target, hp.clip_eps)
        entropy = jnp.mean(networks.entropy(policy_out, log_std, self.spec.discrete))
        total = losses.ppo_total_loss(policy_loss, value_loss, entropy, hp.vf_coef, hp.ent_coef)
        return total, (policy_loss, value_loss, entropy, approx_kl, clip_frac)

    def _minibatch_step(self, carry, mb: Batch, *, hp: DynamicHParams):
        params, opt_state = carry
        adv_mean, adv_std = global_mean_std(mb.advantage)
        advantage = losses.normalize(mb.advantage, adv_mean, adv_std)
        grad_fn = jax.value_and_grad(self._loss, has_aux=True)
        (_, aux), grads = grad_fn(params, mb, advantage, hp)
        flat_grads, unravel = jax.flatten_util.ravel_pytree(grads)
        flat_grads, aux = jax.lax.pmean((flat_grads, aux), AXIS)
        grad_norm = jnp.sqrt(jnp.sum(jnp.square(flat_grads)))  # = optax.global_norm(grads)
        updates, opt_state = self.optimizer.update(unravel(flat_grads), opt_state, params)
        params = optax.apply_updates(params, updates)
        return (params, opt_state), LossInfo(*aux, grad_norm=grad_norm)

    def _epoch(self, carry, key, *, batch: Batch, hp: DynamicHParams):
        # Minibatches are sets of time steps across all envs. The permutation key is the same
        # on every device, so minibatch m on N devices is exactly minibatch m on one device.
        num_steps, num_mb = self.static.num_steps, self.static.num_minibatches
        perm = jax.random.permutation(key, num_steps)
        shuffled = jax.tree.map(
            lambda x: jnp.take(x, perm, axis=0).reshape((num_mb, num_steps // num_mb) + x.shape[1:]), batch
        )
        step = functools.partial(self._minibatch_step, hp=hp)
        return jax.lax.scan(step, carry, shuffled)

    def update(self, state: TrainState, hp: DynamicHParams) -> tuple[TrainState, UpdateMetrics]:
        key, rollout_key, epoch_key = jax.random.split(state.key, 3)
        env_state, obs, _, traj = rollout(
            state.params, state.env_state, state.obs, rollout_key, self._env_ids(),
            num_global_envs=self.static.num_envs, spec=self.spec, apply_fn=self.apply, num_steps=self.static.num_steps,
        )
        # The value of the observation each step reached (before auto-reset): V(obs[t+1])
        # while an episode runs, and the truncation bootstrap where it was cut by a time limit.
        _, _, next_values = self.apply(state.params, traj.final_obs)
        advantage, target = gae(
            traj.reward, traj.value, next_values, traj.terminated, traj.truncated, hp.gamma, hp.gae_lambda
        )
        batch = Batch(traj.obs, traj.action, traj.log_prob, traj.value, advantage, target)

        lr = annealed_lr(hp, state.update_idx)
        opt_state = set_injected(state.opt_state, learning_rate=lr, max_grad_norm=hp.max_grad_norm)
        epoch = functools.partial(self._epoch, batch=batch, hp=hp)
        epoch_keys = jax.random.split(epoch_key, self.static.update_epochs)
        (params, opt_state), info = jax.lax.scan(epoch, (state.params, opt_state), epoch_keys)

        done = jnp.logical_or(traj.terminated, traj.truncated).astype(jnp.float32)
        episodes = jax.lax.psum(jnp.sum(done), AXIS)
        return_sum = jax.lax.psum(jnp.sum(traj.episode_return * done), AXIS)
        length_sum = jax.lax.psum(jnp.sum(traj.episode_length * done), AXIS)
        nan = jnp.float32(jnp.nan)
        metrics = UpdateMetrics(
            episode_return=jnp.where(episodes > 0, return_sum / jnp.maximum(episodes, 1.0), nan),
            episode_length=jnp.where(episodes > 0, length_sum / jnp.maximum(episodes, 1.0), nan),
            episodes=episodes,
            policy_loss=jnp.mean(info.policy_loss),
            value_loss=jnp.mean(info.value_loss),
            entropy=jnp.mean(info.entropy),
            approx_kl=jnp.mean(info.approx_kl),
            clip_frac=jnp.mean(info.clip_frac),
            grad_norm=jnp.mean(info.grad_norm),
            lr=lr,
        )
        new_state = TrainState(params, opt_state, env_state, obs, key, state.update_idx + 1)
        return new_state, metrics

    # --- a chunk of updates ----------------------------------------------------------------
    def _chunk_body(self, i, carry, *, hp: DynamicHParams):
        state, buffer = carry
        state, metrics = self.update(state, hp)
        buffer = jax.tree.map(lambda buf, x: buf.at[i].set(x.astype(buf.dtype)), buffer, metrics)
        return state, buffer

    def run_chunk(self, state: TrainState, hp: DynamicHParams, num_updates: jax.Array):
        """Run `num_updates` (traced, at most `static.max_chunk_updates`) updates.

        A traced count lets the host size chunks by measured time, and end a run on an exact
        update, with one compiled program.
        """
        size = self.static.max_chunk_updates
        empty = UpdateMetrics(*[jnp.full((size,), jnp.nan, jnp.float32) for _ in dataclasses.fields(UpdateMetrics)])
        num_updates = jnp.clip(num_updates, 0, size)
        body = functools.partial(self._chunk_body, hp=hp)
        state, buffer = jax.lax.fori_loop(0, num_updates, body, (state, empty))
        return state, ChunkMetrics(per_update=buffer, num_updates=num_updates)


def set_injected(opt_state, **values):
    hyperparams = dict(opt_state.hyperparams)
    for name, value in values.items():
        hyperparams[name] = jnp.asarray(value, dtype=jnp.asarray(opt_state.hyperparams[name]).dtype)
    return opt_state._replace(hyperparams=hyperparams)


def make_trainer(static: StaticConfig, num_devices: int = 1) -> PPO:
    if static.num_envs % num_devices:
        raise ValueError(
            f"num_envs: {static.num_envs} environments cannot be split evenly over {num_devices} devices"
        )
    if static.num_steps % static.num_minibatches:
        raise ValueError(f"num_minibatches: must divide num_steps ({static.num_steps})")
    return PPO(static=static, spec=make_env(static.env_id), num_devices=num_devices)
