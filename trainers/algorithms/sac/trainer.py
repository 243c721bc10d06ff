"""SAC as pure functions over `TrainState` (declared in this package's `__init__.py`), on the
shared off-policy machinery (`trainers.replay`).

One update = rollout of `num_steps` in every env (the same scan as PPO's: u sampled from
the actor's Gaussian, the env given tanh(u) scaled to its bounds, `EnvSpec.squash_actions`)
-> the transitions added to the replay buffer (u as the action) -> the gradient steps due
at the replay ratio, each on a batch sampled from the buffer. One gradient step minimises
one sum whose terms each reach only their own parameters: the critics' regression onto
the soft target (`losses.soft_q_targets`, from the target critics and a fresh action of
the actor at s'), the actor's loss (the critics held constant) and, with `autotune`, the
temperature's; so one Adam over all of them (per-parameter, as three Adams of the same
learning rate would be) and the shared global-norm clip, then the target update
(`replay.target_update`: the target copy's critics are what the target reads).

Live without recompiling: lr, gamma, max_grad_norm, reward_scale, learning_starts,
replay_ratio, tau, target_period, autotune and alpha (all traced). buffer_size, batch_size,
num_envs, num_steps and the network are shapes: changing one recompiles.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import struct

from trainers import networks
from trainers.algorithms import action_problem, bounds_problem
from trainers.algorithms.sac import losses
from trainers.base import check_devices
from trainers.envs import make_env
from trainers.hparams import DynamicHParams, StaticConfig
from trainers.replay import Learned, OffPolicyTrainer, Replayed
from trainers.types import TrainState


@struct.dataclass
class SACLossInfo:
    td_loss: jax.Array  # the critics' loss
    q_mean: jax.Array  # mean Q of the stored actions, over critics
    actor_loss: jax.Array
    entropy: jax.Array  # -mean log pi of the actor's fresh actions
    alpha: jax.Array  # the temperature the step used


@dataclasses.dataclass(frozen=True)
class SAC(OffPolicyTrainer):
    """SAC for one static configuration, split data-parallel over `num_devices`."""

    @property
    def network(self) -> networks.SquashedGaussianActorCritic:
        return networks.SquashedGaussianActorCritic(
            num_actions=self.spec.num_actions,
            hidden_sizes=tuple(self.static.hidden_sizes),
            activation=self.static.activation,
            dtype=networks.matmul_dtype(self.static.precision),
        )

    @property
    def target_entropy(self) -> float:
        return -float(self.spec.num_actions)

    def actor(self, params, obs):
        return self.network.apply(params, obs.astype(jnp.float32), method="actor")

    def q_values(self, params, obs, action):
        return self.network.apply(params, obs.astype(jnp.float32), action, method="q_values")

    def temperature(self, params, hp: DynamicHParams) -> jax.Array:
        """alpha: the learned one with `autotune`, the `alpha` key's otherwise."""
        return jnp.where(hp.autotune > 0, jnp.exp(params["params"]["log_alpha"]), hp.alpha)

    def loss(self, params, target_params, batch: Replayed, hp: DynamicHParams, key: jax.Array):
        next_key, new_key = jax.random.split(key)
        alpha = self.temperature(params, hp)
        # The soft target: a fresh action of the actor at s', valued by the target critics.
        next_action, next_log_prob = losses.squashed_sample(next_key, *self.actor(params, batch.next_obs))
        next_q = jnp.min(self.q_values(target_params, batch.next_obs, next_action), axis=0)
        target = losses.soft_q_targets(batch.reward, batch.terminated, next_q, next_log_prob, alpha, hp.gamma)
        q = self.q_values(params, batch.obs, jnp.tanh(batch.action))
        critic_loss = losses.critic_loss(q, target)
        # The actor against the critics as they are (held constant).
        new_action, new_log_prob = losses.squashed_sample(new_key, *self.actor(params, batch.obs))
        new_q = jnp.min(self.q_values(jax.lax.stop_gradient(params), batch.obs, new_action), axis=0)
        actor_loss = losses.actor_loss(new_log_prob, new_q, alpha)
        temperature_loss = losses.temperature_loss(params["params"]["log_alpha"], new_log_prob, self.target_entropy)
        loss = critic_loss + actor_loss + jnp.where(hp.autotune > 0, temperature_loss, 0.0)
        return loss, SACLossInfo(td_loss=critic_loss, q_mean=jnp.mean(q), actor_loss=actor_loss,
                                 entropy=-jnp.mean(new_log_prob), alpha=alpha)

    def own_metrics(self, state: TrainState, learned: Learned, hp: DynamicHParams) -> dict[str, jax.Array]:
        return {"policy_loss": learned.info.actor_loss, "entropy": learned.info.entropy,
                "alpha": self.temperature(learned.params, hp)}


def make_trainer(static: StaticConfig, num_devices: int = 1) -> SAC:
    check_devices(static, num_devices)  # with SAC's rules (`batch_problem` in this package)
    spec = make_env(static.env_id)
    problem = action_problem("sac", spec.action_kind, static.env_id)
    if problem is not None:
        raise ValueError(problem)
    problem = bounds_problem("sac", static.env_id, spec.action_low, spec.action_high)
    if problem is not None:
        raise ValueError(problem)
    return SAC(static=static, spec=dataclasses.replace(spec, squash_actions=True), num_devices=num_devices)
