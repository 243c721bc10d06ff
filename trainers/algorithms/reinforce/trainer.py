"""REINFORCE (Monte-Carlo policy gradient) as pure functions over `TrainState` (declared
in this package's `__init__.py`).

J(theta) = E[G], grad J = E[grad log pi(a|s) * G]. One update = rollout (the same scan as
PPO's) -> discounted returns G_t by reverse scan, cut at every episode end -> one gradient
step of `-mean(log pi(a|s) * A)`, gradients averaged over devices with `lax.pmean`.

- Complete episodes only. The envs are vectorised and a rollout stops mid-episode, so the
  steps of each env after its last episode end in the rollout have no known return; they
  are masked out of every mean (loss, entropy, value loss, statistics, metrics). The next
  rollout continues those episodes, and its first steps do have complete returns-to-go, so
  they are used there. Keep `num_steps` well above the episode length (e.g. 512 on
  CartPole) or little data survives.
- Truncation (a time limit) ends an episode like termination and is not bootstrapped: G is
  the discounted sum of the rewards actually received, as in the textbook algorithm.
- A = G - baseline * V(s) with V(s) the value head (as computed in the rollout, i.e. by
  the current params); with `normalize_returns` on, A is then normalised to
  (A - mean) / (std + 1e-8), statistics over the valid steps of all devices. With the
  baseline off that is exactly return normalisation; with it on, the advantage is
  normalised. A is a constant of the loss (`stop_gradient`).
- With the baseline on, V(s) regresses on the raw return G with weight `vf_coef`; with it
  off the value head is not trained (value_loss is still reported).
- `baseline` and `normalize_returns` are traced float32 0/1 switches of `DynamicHParams`:
  toggling them, like editing lr, gamma, ent_coef, vf_coef or max_grad_norm, does not
  recompile. gae_lambda and clip_eps are unused.
- Metrics are the shared ones (`trainers.metrics_spec`): `approx_kl` is the estimator
  E[(r - 1) - log r] of KL(rollout policy || updated policy) over the valid steps (one
  extra forward pass). Another algorithm's own metric (PPO's `clip_frac`: nothing is
  clipped here) is NaN in every update; metrics.jsonl writes null, the dashboard's chart
  passes over it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from flax import struct

from trainers import networks
from trainers.algorithms.reinforce import losses
from trainers.base import (
    AXIS,
    OnPolicyTrainer,
    actor_critic_loss,
    annealed_lr,
    check_devices,
    set_injected,
    standardize,
)
from trainers.envs import make_env
from trainers.hparams import DynamicHParams, StaticConfig
from trainers.returns import discounted_returns
from trainers.types import TrainState, UpdateMetrics


@struct.dataclass
class PGBatch:
    """Training data of one update, leaves shaped (time, env, ...)."""

    obs: jax.Array
    action: jax.Array
    returns: jax.Array  # G_t, discounted, cut at episode ends
    advantage: jax.Array  # G_t - baseline * V(s_t), maybe normalised
    valid: jax.Array  # 1.0 where the step's episode ends within the rollout
    # Recurrent networks only (None otherwise): the resets and start states of the replay.
    done: Any = None
    start_hidden: Any = None


class MaskedMeanStd(NamedTuple):
    mean: jax.Array
    std: jax.Array
    count: jax.Array  # valid steps on all devices


def masked_global_mean_std(x: jax.Array, valid: jax.Array) -> MaskedMeanStd:
    """Mean and standard deviation of `x` over the valid steps of all devices, and the
    number of those steps. Two passes (mean, then squared deviations) for accuracy."""
    count, total = jax.lax.psum((jnp.sum(valid), jnp.sum(valid * x)), AXIS)
    mean = total / jnp.maximum(count, 1.0)
    var = jax.lax.psum(jnp.sum(valid * jnp.square(x - mean)), AXIS) / jnp.maximum(count, 1.0)
    return MaskedMeanStd(mean, jnp.sqrt(var), count)


def reinforce_advantage(returns, values, valid, hp: DynamicHParams):
    """A = G - baseline * V, normalised over the valid steps of all devices when
    `normalize_returns` is on."""
    advantage = returns - hp.baseline * values
    stats = masked_global_mean_std(advantage, valid)
    return jnp.where(hp.normalize_returns > 0, standardize(advantage, stats.mean, stats.std), advantage)


@struct.dataclass
class PGLossInfo:
    """The loss's aux: its terms, each a mean over the valid steps."""

    policy_loss: jax.Array
    value_loss: jax.Array
    entropy: jax.Array


@dataclasses.dataclass(frozen=True)
class REINFORCE(OnPolicyTrainer):
    """REINFORCE for one static configuration, split data-parallel over `num_devices`.
    Uses env_id, num_envs, num_steps, hidden_sizes, activation, network and max_chunk_updates of the
    static config (num_minibatches and update_epochs do not apply: one step per rollout)."""

    def _loss(self, params, batch: PGBatch, count, hp: DynamicHParams) -> tuple[jax.Array, PGLossInfo]:
        """Total loss on this device's batch. `count` is the mean number of valid steps per
        device, so that the pmean of this loss (and of its gradient) over devices is the
        mean over all valid steps."""
        out = self.sequence_outputs(params, batch.obs, batch.done, batch.start_hidden)
        log_prob = networks.log_prob(out.policy_out, out.log_std, batch.action, self.spec.discrete)
        policy_loss = losses.policy_gradient_loss(log_prob, batch.advantage, batch.valid, count)
        value_loss = losses.value_regression_loss(out.value, batch.returns, batch.valid, count)
        entropy = losses.masked_mean(
            networks.entropy(out.policy_out, out.log_std, self.spec.discrete), batch.valid, count
        )
        total = actor_critic_loss(policy_loss, value_loss, entropy, hp.baseline * hp.vf_coef, hp.ent_coef)
        return total, PGLossInfo(policy_loss=policy_loss, value_loss=value_loss, entropy=entropy)

    def update(self, state: TrainState, hp: DynamicHParams) -> tuple[TrainState, UpdateMetrics]:
        key, rollout_key = jax.random.split(state.key)
        collected = self.collect(state, rollout_key, hp)
        traj = collected.traj
        done = jnp.logical_or(traj.terminated, traj.truncated)
        valid = losses.complete_episode_mask(done)
        returns = discounted_returns(traj.reward, done, hp.gamma)  # no bootstrap, truncation included
        advantage = reinforce_advantage(returns, traj.value, valid, hp)
        batch = PGBatch(traj.obs, traj.action, returns, advantage, valid)
        if self.recurrent:  # one step on the whole batch: every env's sequence replayed at once
            batch = batch.replace(done=done, start_hidden=state.hidden)
        count = jax.lax.pmean(jnp.sum(valid), AXIS)

        lr = annealed_lr(hp, state.update_idx)
        opt_state = set_injected(state.opt_state, learning_rate=lr, max_grad_norm=hp.max_grad_norm)
        (_, info), grads = jax.value_and_grad(self._loss, has_aux=True)(state.params, batch, count, hp)
        step = self.apply_gradients(state.params, opt_state, grads, info)
        # No complete episode on any device: the gradient is zero, but Adam's momentum would
        # still move the params. Skip the step instead (count is the same on every device).
        keep = count > 0
        params, opt_state = jax.tree.map(
            lambda new, old: jnp.where(keep, new, old), (step.params, step.opt_state), (state.params, opt_state)
        )

        # KL(rollout policy || updated policy) on the valid steps, E[(r - 1) - log r].
        out = self.sequence_outputs(params, traj.obs, batch.done, batch.start_hidden)
        log_ratio = networks.log_prob(out.policy_out, out.log_std, traj.action, self.spec.discrete) - traj.log_prob
        approx_kl = jax.lax.pmean(losses.masked_mean(jnp.expm1(log_ratio) - log_ratio, valid, count), AXIS)

        metrics = self.report(
            traj,
            policy_loss=step.aux.policy_loss,
            value_loss=step.aux.value_loss,
            entropy=step.aux.entropy,
            approx_kl=approx_kl,
            grad_norm=step.grad_norm,
            lr=lr,
        )
        return self.next_state(state, collected, params, opt_state, key), metrics


def make_trainer(static: StaticConfig, num_devices: int = 1) -> REINFORCE:
    check_devices(static, num_devices)
    return REINFORCE(static=static, spec=make_env(static.env_id), num_devices=num_devices)
