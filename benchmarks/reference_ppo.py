"""A reference point for `throughput.py`: PPO written the way single-file pure-JAX trainers
write it (one closure, jitted whole; params as a flax pytree; optax chain; per-step RNG
splits; all samples shuffled into minibatches; `done` treated as terminal). It is here to
be timed beside rltui's trainer in the same process, so the comparison is a ratio on one
machine at one moment rather than a figure from somewhere else. Same network (64x64 tanh
towers, orthogonal init), same hyperparameters as rltui's defaults, same wrapped gymnax env.

It is a benchmark fixture, not a trainer: no truncation bootstrap, no device axis, no
metrics beyond the mean episode return per update (to show that it learns).
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax


class _ActorCritic(nn.Module):
    num_actions: int

    @nn.compact
    def __call__(self, obs):
        def tower(x, out, out_scale):
            for _ in range(2):
                x = nn.tanh(nn.Dense(64, kernel_init=nn.initializers.orthogonal(np.sqrt(2)))(x))
            return nn.Dense(out, kernel_init=nn.initializers.orthogonal(out_scale))(x)

        return tower(obs, self.num_actions, 0.01), tower(obs, 1, 1.0)[..., 0]


def make_train(spec, num_envs: int, num_steps: int, num_updates: int, epochs: int = 4, minibatches: int = 4,
               lr: float = 2.5e-4, gamma: float = 0.99, gae_lambda: float = 0.95, clip_eps: float = 0.2,
               ent_coef: float = 0.01, vf_coef: float = 0.5, max_grad_norm: float = 0.5):
    """`train(key) -> {"params": the trained parameters, "returns": mean episode return per update}`
    (NaN where none ended) for a discrete-action `spec` (trainers.envs.EnvSpec), jit-ready."""
    env, env_params = spec.env, spec.params
    network = _ActorCritic(spec.num_actions)
    steps_per_anneal = epochs * minibatches
    schedule = lambda count: lr * (1.0 - (count // steps_per_anneal) / num_updates)
    optimizer = optax.chain(optax.clip_by_global_norm(max_grad_norm), optax.adam(schedule, eps=1e-5))
    batch_size = num_envs * num_steps

    def loss_fn(params, obs, action, old_log_prob, old_value, advantage, target):
        logits, value = network.apply(params, obs)
        log_probs = jax.nn.log_softmax(logits)
        log_prob = jnp.take_along_axis(log_probs, action[:, None], axis=-1)[:, 0]
        value_clipped = old_value + jnp.clip(value - old_value, -clip_eps, clip_eps)
        value_loss = 0.5 * jnp.maximum(jnp.square(value - target), jnp.square(value_clipped - target)).mean()
        ratio = jnp.exp(log_prob - old_log_prob)
        advantage = (advantage - advantage.mean()) / (advantage.std() + 1e-8)
        surrogate = jnp.minimum(ratio * advantage, jnp.clip(ratio, 1 - clip_eps, 1 + clip_eps) * advantage)
        entropy = -(jnp.exp(log_probs) * log_probs).sum(-1).mean()
        return -surrogate.mean() + vf_coef * value_loss - ent_coef * entropy

    def env_step(runner, _):
        params, opt_state, env_state, obs, key = runner
        key, action_key, step_key = jax.random.split(key, 3)
        logits, value = network.apply(params, obs)
        action = jax.random.categorical(action_key, logits)
        log_prob = jnp.take_along_axis(jax.nn.log_softmax(logits), action[:, None], axis=-1)[:, 0]
        step = jax.vmap(env.step, in_axes=(0, 0, 0, None))
        next_obs, env_state, reward, terminated, truncated, info = step(
            jax.random.split(step_key, num_envs), env_state, action, env_params
        )
        done = jnp.logical_or(terminated, truncated)
        transition = (
            obs,
            action,
            log_prob,
            value,
            reward,
            done,
            info["returned_episode_returns"],
            info["returned_episode"],
        )
        return (params, opt_state, env_state, next_obs, key), transition

    def advantages(values, rewards, dones, last_value):
        def step(carry, xs):
            gae, next_value = carry
            value, reward, done = xs
            delta = reward + gamma * next_value * (1 - done) - value
            gae = delta + gamma * gae_lambda * (1 - done) * gae
            return (gae, value), gae

        _, advantage = jax.lax.scan(step, (jnp.zeros_like(last_value), last_value), (values, rewards, dones),
                                    reverse=True, unroll=16)
        return advantage, advantage + values

    def minibatch_step(carry, minibatch):
        params, opt_state = carry
        grads = jax.grad(loss_fn)(params, *minibatch)
        updates, opt_state = optimizer.update(grads, opt_state)
        return (optax.apply_updates(params, updates), opt_state), None

    def epoch(carry, _, batch):
        params, opt_state, key = carry
        key, perm_key = jax.random.split(key)
        perm = jax.random.permutation(perm_key, batch_size)
        shuffled = jax.tree.map(lambda x: jnp.take(x, perm, axis=0).reshape((minibatches, -1) + x.shape[1:]), batch)
        (params, opt_state), _ = jax.lax.scan(minibatch_step, (params, opt_state), shuffled)
        return (params, opt_state, key), None

    def update(runner, _):
        runner, (obs, action, log_prob, value, reward, done, ep_return, ep_done) = jax.lax.scan(
            env_step, runner, None, num_steps
        )
        params, opt_state, env_state, last_obs, key = runner
        _, last_value = network.apply(params, last_obs)
        advantage, target = advantages(value, reward, done, last_value)
        batch = jax.tree.map(lambda x: x.reshape((batch_size,) + x.shape[2:]),
                             (obs, action, log_prob, value, advantage, target))
        (params, opt_state, key), _ = jax.lax.scan(lambda c, x: epoch(c, x, batch), (params, opt_state, key),
                                                   None, epochs)
        finished = jnp.sum(ep_done)
        mean_return = jnp.where(finished > 0, jnp.sum(ep_return * ep_done) / jnp.maximum(finished, 1), jnp.nan)
        return (params, opt_state, env_state, last_obs, key), mean_return

    def train(key):
        key, init_key, reset_key = jax.random.split(key, 3)
        params = network.init(init_key, jnp.zeros((spec.obs_size,), jnp.float32))
        obs, env_state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(reset_key, num_envs), env_params)
        runner = (params, optimizer.init(params), env_state, obs, key)
        runner, returns = jax.lax.scan(update, runner, None, num_updates)
        # The trained parameters too, as trainers return them: were the returns all it gave
        # back, XLA could drop the last update's learning, which they do not depend on.
        return {"params": runner[0], "returns": returns}

    return train
