"""DQN as pure functions over `TrainState` (declared in this package's `__init__.py`), on the
shared off-policy machinery (`trainers.replay`).

One update = rollout of `num_steps` in every env (the same scan as PPO's, actions
epsilon-greedy over the Q-network's values, as PQN's) -> the transitions added to the
replay buffer -> the gradient steps due at the replay ratio, each on a batch sampled from
the buffer: TD regression onto r + gamma * Q_target(s', a') (`losses.q_targets`; a' from
the target network, or the online one with `double_q`), gradients averaged over devices,
Adam with the shared global-norm clip, then the target update (`replay.target_update`).

Live without recompiling: lr, gamma, epsilon's schedule, max_grad_norm, reward_scale,
learning_starts, replay_ratio, tau, target_period and double_q (all traced). buffer_size,
batch_size, num_envs, num_steps and the network are shapes: changing one recompiles.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import struct

from trainers import networks
from trainers.algorithms import action_problem
from trainers.algorithms.dqn import losses
from trainers.algorithms.pqn.losses import epsilon as epsilon_schedule
from trainers.algorithms.pqn.losses import td_loss
from trainers.base import check_devices
from trainers.envs import make_env
from trainers.hparams import DynamicHParams, StaticConfig
from trainers.replay import Learned, OffPolicyTrainer, Replayed
from trainers.types import TrainState


@struct.dataclass
class DQNLossInfo:
    td_loss: jax.Array
    q_mean: jax.Array


@dataclasses.dataclass(frozen=True)
class DQN(OffPolicyTrainer):
    """DQN for one static configuration, split data-parallel over `num_devices`."""

    acts_by_values = True

    @property
    def network(self) -> networks.QNetwork:
        return networks.q_network(self.static, self.spec, norm="none")

    def epsilon(self, state: TrainState, hp: DynamicHParams) -> jax.Array:
        return epsilon_schedule(hp.eps_start, hp.eps_end, hp.eps_decay, hp.anneal_updates,
                                state.update_idx.astype(jnp.float32))

    def behaviour(self, outputs: networks.PolicyOutputs, state: TrainState, hp: DynamicHParams):
        logits = networks.epsilon_greedy_logits(outputs.policy_out, self.epsilon(state, hp))
        return outputs._replace(policy_out=logits)

    def loss(self, params, target_params, batch: Replayed, hp: DynamicHParams, key=None):
        # `key` unused: DQN's loss samples nothing.
        q = self.apply(params, batch.obs).policy_out
        next_target_q = self.apply(target_params, batch.next_obs).policy_out
        # The online network's values of s' pick a' for double Q only: a pass of their own,
        # run only while double_q is on, so that the gradient's backward pass covers the
        # rows of s alone.
        next_online_q = jax.lax.cond(
            hp.double_q > 0, lambda: jax.lax.stop_gradient(self.apply(params, batch.next_obs).policy_out),
            lambda: next_target_q)
        target = losses.q_targets(batch.reward, batch.terminated, next_target_q, next_online_q, hp.gamma,
                                  hp.double_q)
        q_taken = jnp.take_along_axis(q, batch.action[..., None].astype(jnp.int32), axis=-1)[..., 0]
        loss = td_loss(q_taken, target)
        return loss, DQNLossInfo(td_loss=loss, q_mean=jnp.mean(q_taken))

    def own_metrics(self, state: TrainState, learned: Learned, hp: DynamicHParams) -> dict[str, jax.Array]:
        return {"epsilon": self.epsilon(state, hp)}


def make_trainer(static: StaticConfig, num_devices: int = 1) -> DQN:
    check_devices(static, num_devices)  # with DQN's rules (`batch_problem` in this package)
    spec = make_env(static.env_id)
    problem = action_problem("dqn", "discrete" if spec.discrete else "continuous", static.env_id)
    if problem is not None:
        raise ValueError(problem)
    return DQN(static=static, spec=spec, num_devices=num_devices)
