"""PQN as pure functions over `TrainState` (declared in this package's `__init__.py`).

One update = rollout (the same scan as PPO's, actions epsilon-greedy over the Q-network's
values) -> Q(lambda) targets by reverse scan (`losses.q_lambda_targets`) -> epochs x
minibatches of TD regression (`value_and_grad`, gradients averaged over devices with
`lax.pmean`) -> optax. No replay buffer and no target network: LayerNorm keeps the
bootstrapped regression stable (Gallici et al., 2024).

- Exploration: the rollout samples the epsilon-greedy distribution (`behaviour`), with
  epsilon computed inside the step from traced keys, so edits to eps_start, eps_end and
  eps_decay apply at the next update without recompiling, as do lr, gamma and q_lambda.
- Truncation bootstraps from max_a Q of the final observation; termination does not.
- The targets use the Q-values of the parameters that collected the rollout, fixed for
  the epochs that follow.
- Minibatches are sets of time steps across all envs, drawn by a permutation that is the
  same on every device, so minibatch m on N devices is minibatch m on one.
- The optimizer is RAdam with the shared global-norm clip, as PQN's reference uses.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import optax
from flax import struct

from trainers import networks
from trainers.algorithms import action_problem
from trainers.algorithms.pqn import losses
from trainers.base import OnPolicyTrainer, check_devices
from trainers.envs import make_env
from trainers.hparams import DynamicHParams, StaticConfig
from trainers.types import TrainState, UpdateMetrics


@struct.dataclass
class QBatch:
    """Training data of one update, leaves shaped (time, env, ...)."""

    obs: jax.Array
    action: jax.Array
    target: jax.Array  # Q(lambda) targets


@struct.dataclass
class QLossInfo:
    """One minibatch step's diagnostics; the gradient norm is filled in after the step."""

    td_loss: jax.Array
    q_mean: jax.Array
    grad_norm: jax.Array | None = None


def _flat_radam(learning_rate, max_grad_norm):
    return optax.flatten(optax.chain(optax.clip_by_global_norm(max_grad_norm), optax.radam(learning_rate)))


@dataclasses.dataclass(frozen=True)
class PQN(OnPolicyTrainer):
    """PQN for one static configuration, split data-parallel over `num_devices`."""

    acts_by_values = True

    @property
    def network(self) -> networks.QNetwork:
        return networks.q_network(self.static, self.spec, norm=self.static.norm_type)

    @property
    def optimizer(self) -> optax.GradientTransformation:
        return optax.inject_hyperparams(_flat_radam)(learning_rate=0.0, max_grad_norm=1.0)

    def epsilon(self, state: TrainState, hp: DynamicHParams) -> jax.Array:
        return losses.epsilon(hp.eps_start, hp.eps_end, hp.eps_decay, hp.anneal_updates,
                              state.update_idx.astype(jnp.float32))

    def behaviour(self, outputs: networks.PolicyOutputs, state: TrainState, hp: DynamicHParams):
        logits = networks.epsilon_greedy_logits(outputs.policy_out, self.epsilon(state, hp))
        return outputs._replace(policy_out=logits)

    def _loss(self, params, mb: QBatch) -> tuple[jax.Array, QLossInfo]:
        q = self.apply(params, mb.obs).policy_out
        q_taken = jnp.take_along_axis(q, mb.action[..., None].astype(jnp.int32), axis=-1)[..., 0]
        loss = losses.td_loss(q_taken, mb.target)
        return loss, QLossInfo(td_loss=loss, q_mean=jnp.mean(q_taken))

    def _minibatch_step(self, carry, mb: QBatch):
        params, opt_state = carry
        (_, info), grads = jax.value_and_grad(self._loss, has_aux=True)(params, mb)
        step = self.apply_gradients(params, opt_state, grads, info)
        return (step.params, step.opt_state), step.aux.replace(grad_norm=step.grad_norm)

    def _epoch(self, carry, key, *, batch: QBatch):
        return jax.lax.scan(self._minibatch_step, carry, self.time_step_minibatches(batch, key))

    def update(self, state: TrainState, hp: DynamicHParams) -> tuple[TrainState, UpdateMetrics]:
        key, rollout_key, epoch_key = jax.random.split(state.key, 3)
        epsilon = self.epsilon(state, hp)
        collected = self.collect(state, rollout_key, hp)
        traj = collected.traj
        # traj.value is max_a Q(obs[t]) from the rollout; the bootstrap values are max_a Q of
        # the observation each step reached, before any auto-reset.
        next_max_q = self.bootstrap_values(state.params, collected)
        target = losses.q_lambda_targets(traj.reward, traj.value, next_max_q, traj.terminated, traj.truncated,
                                         hp.gamma, hp.q_lambda)
        batch = QBatch(traj.obs, traj.action, target)

        epochs = self.train_epochs(state, hp, functools.partial(self._epoch, batch=batch), epoch_key)
        info = epochs.info

        metrics = self.report(
            traj,
            td_loss=jnp.mean(info.td_loss),
            q_mean=jnp.mean(info.q_mean),
            reward_max=self.reward_max(traj),
            epsilon=epsilon,
            grad_norm=jnp.mean(info.grad_norm),
            lr=epochs.lr,
        )
        return self.next_state(state, collected, epochs.params, epochs.opt_state, key), metrics


def make_trainer(static: StaticConfig, num_devices: int = 1) -> PQN:
    check_devices(static, num_devices)  # with PQN's rules (`batch_problem` in this package)
    spec = make_env(static.env_id)
    problem = action_problem("pqn", "discrete" if spec.discrete else "continuous", static.env_id)
    if problem is not None:
        raise ValueError(problem)
    return PQN(static=static, spec=spec, num_devices=num_devices)
