"""Proximal Policy Optimisation as pure functions over `TrainState` (declared in this
package's `__init__.py`).

One update = rollout (scan over time of vmapped env+policy) -> GAE (reverse scan) ->
epochs x minibatches (nested scans of value_and_grad, gradients averaged over the device
axis with `lax.pmean`) -> optax. Every function here runs inside `parallel.DataParallel`'s
pmap, also on a single device, so `AXIS` is always bound. With `network = "gru"` the
minibatches are whole environment sequences, replayed by the GRU (trainers/recurrent.py).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from flax import struct

from trainers import networks, recurrent
from trainers.algorithms.ppo import losses
from trainers.base import (
    AXIS,
    OnPolicyTrainer,
    actor_critic_loss,
    check_devices,
    standardize,
)
from trainers.envs import make_env
from trainers.hparams import DynamicHParams, StaticConfig
from trainers.returns import gae
from trainers.types import TrainState, UpdateMetrics


@struct.dataclass
class Batch:
    """Training data of one update, leaves shaped (time, env, ...)."""

    obs: jax.Array
    action: jax.Array
    log_prob: jax.Array
    value: jax.Array
    advantage: jax.Array
    target: jax.Array
    # Recurrent networks only (None otherwise): where each step ended an episode, and each
    # env's hidden state at the start of the rollout, (env, H) with no time axis.
    done: Any = None
    start_hidden: Any = None


@struct.dataclass
class LossInfo:
    """One minibatch step's diagnostics: the loss's aux, then the gradient norm, which the
    loss cannot know (None in the aux, filled in after the step)."""

    policy_loss: jax.Array
    value_loss: jax.Array
    entropy: jax.Array
    approx_kl: jax.Array
    clip_frac: jax.Array
    grad_norm: Any = None


class MeanStd(NamedTuple):
    mean: jax.Array
    std: jax.Array


def global_mean_std(x: jax.Array) -> MeanStd:
    """Mean and standard deviation over the whole batch on all devices."""
    mean = jax.lax.pmean(jnp.mean(x), AXIS)
    var = jax.lax.pmean(jnp.mean(jnp.square(x)), AXIS) - jnp.square(mean)
    return MeanStd(mean, jnp.sqrt(jnp.maximum(var, 0.0)))


@dataclasses.dataclass(frozen=True)
class PPO(OnPolicyTrainer):
    """PPO for one static configuration, split data-parallel over `num_devices`. Network,
    optimizer, init and the chunk of updates come from `OnPolicyTrainer`."""

    # --- one update -------------------------------------------------------------------------
    def _loss(self, params, mb: Batch, advantage, hp: DynamicHParams) -> tuple[jax.Array, LossInfo]:
        out = self.sequence_outputs(params, mb.obs, mb.done, mb.start_hidden)
        log_prob = networks.log_prob(out.policy_out, out.log_std, mb.action, self.spec.discrete)
        surrogate = losses.clipped_surrogate_loss(log_prob, mb.log_prob, advantage, hp.clip_eps)
        value_loss = losses.clipped_value_loss(out.value, mb.value, mb.target, hp.clip_eps)
        entropy = jnp.mean(networks.entropy(out.policy_out, out.log_std, self.spec.discrete))
        total = actor_critic_loss(surrogate.loss, value_loss, entropy, hp.vf_coef, hp.ent_coef)
        info = LossInfo(policy_loss=surrogate.loss, value_loss=value_loss, entropy=entropy,
                        approx_kl=surrogate.approx_kl, clip_frac=surrogate.clip_frac)
        return total, info

    def _minibatch_step(self, carry, mb: Batch, *, hp: DynamicHParams):
        params, opt_state = carry
        adv = global_mean_std(mb.advantage)
        advantage = standardize(mb.advantage, adv.mean, adv.std)
        grad_fn = jax.value_and_grad(self._loss, has_aux=True)
        (_, info), grads = grad_fn(params, mb, advantage, hp)
        step = self.apply_gradients(params, opt_state, grads, info)
        return (step.params, step.opt_state), step.aux.replace(grad_norm=step.grad_norm)

    def _epoch(self, carry, key, *, batch: Batch, hp: DynamicHParams):
        step = functools.partial(self._minibatch_step, hp=hp)
        if self.recurrent:
            return jax.lax.scan(step, carry, self._env_minibatches(batch, key))
        return jax.lax.scan(step, carry, self.time_step_minibatches(batch, key))

    def _env_minibatches(self, batch: Batch, key: jax.Array) -> Batch:
        """Recurrent: minibatches of whole env sequences (a GRU cannot be replayed from a
        shuffled set of time steps), leaves (minibatch, time, env', ...)."""
        indices = recurrent.env_minibatches(key, self._env_ids(), self.static.num_envs, self.static.num_minibatches)
        sequences, start_hidden = recurrent.split_by_env(batch.replace(start_hidden=None), batch.start_hidden, indices)
        return sequences.replace(start_hidden=start_hidden)

    def update(self, state: TrainState, hp: DynamicHParams) -> tuple[TrainState, UpdateMetrics]:
        key, rollout_key, epoch_key = jax.random.split(state.key, 3)
        collected = self.collect(state, rollout_key, hp)
        traj = collected.traj
        # The value of the observation each step reached (before auto-reset): V(obs[t+1])
        # while an episode runs, and the truncation bootstrap where it was cut by a time limit.
        next_values = self.bootstrap_values(state.params, collected)
        ended = jnp.where(hp.bootstrap_truncated > 0, traj.terminated, traj.terminated | traj.truncated)
        advantage, target = gae(traj.reward, traj.value, next_values, ended, traj.truncated, hp.gamma, hp.gae_lambda)
        batch = Batch(traj.obs, traj.action, traj.log_prob, traj.value, advantage, target)
        if self.recurrent:
            batch = batch.replace(done=jnp.logical_or(traj.terminated, traj.truncated), start_hidden=state.hidden)

        epochs = self.train_epochs(state, hp, functools.partial(self._epoch, batch=batch, hp=hp), epoch_key)
        info = epochs.info

        metrics = self.report(
            traj,
            policy_loss=jnp.mean(info.policy_loss),
            value_loss=jnp.mean(info.value_loss),
            entropy=jnp.mean(info.entropy),
            approx_kl=jnp.mean(info.approx_kl),
            clip_frac=jnp.mean(info.clip_frac),
            grad_norm=jnp.mean(info.grad_norm),
            lr=epochs.lr,
        )
        return self.next_state(state, collected, epochs.params, epochs.opt_state, key), metrics


def make_trainer(static: StaticConfig, num_devices: int = 1) -> PPO:
    check_devices(static, num_devices)  # with PPO's minibatch rule (`batch_problem` in this package)
    return PPO(static=static, spec=make_env(static.env_id), num_devices=num_devices)
