"""A reference point for `pqn_throughput.py`: PQN written the way purejaxql's single-file
gymnax trainer writes it (one closure, jitted whole; flax params; an optax chain of the
global-norm clip and RAdam on the parameter tree; per-step RNG splits with a key per env
and `uniform`/`randint` epsilon-greedy; the Q-values of every step stored; the Q(lambda)
reverse scan over `done`; every field of every transition shuffled, each with its own
permutation call, into minibatches of transitions; linear lr decay per gradient step and
linear epsilon decay per update; rewards scaled). Its defaults are purejaxql's CartPole
configuration. It is here to be timed beside rltui's PQN, on the same wrapped gymnax env,
so that the comparison is a ratio on one machine at one moment.

It is a benchmark fixture, not a trainer, and differs from the original where nothing is
timed or nothing here has it: no BatchNorm (the original computes one on the input and
discards it, and rltui's Q-network has none), no seeds axis, no logging; `done` is
`terminated | truncated`, as the original treats it. Its greedy test during training (the
original's `TEST_DURING_TRAINING`) is an option, `test_every`, off unless given.

    python benchmarks/reference_pqn.py [--total-timesteps 5e5] [--num-envs 32] [--seed 0]

trains CartPole-v1 and prints the mean episode return every few updates, to show that it
learns.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax


class _QNetwork(nn.Module):
    num_actions: int
    hidden_size: int
    num_layers: int

    @nn.compact
    def __call__(self, obs):
        x = obs
        for _ in range(self.num_layers):
            x = nn.relu(nn.LayerNorm()(nn.Dense(self.hidden_size)(x)))
        return nn.Dense(self.num_actions)(x)


def make_train(spec, num_envs: int = 32, num_steps: int = 64, num_updates: int = 244, epochs: int = 4,
               minibatches: int = 16, hidden_size: int = 256, num_layers: int = 2, lr: float = 1e-4,
               max_grad_norm: float = 10.0, gamma: float = 0.99, q_lambda: float = 0.95, eps_start: float = 1.0,
               eps_end: float = 0.2, eps_decay: float = 0.2, reward_scale: float = 0.1, test_every: int = 0,
               test_envs: int = 128):
    """`train(key) -> {"params", "returns": mean episode return per update (NaN where none
    ended), "td_loss" per update, "test_returns": the latest greedy test's mean return, per
    update (NaN before any)}` for a discrete-action `spec` (trainers.envs.EnvSpec), jit-ready.
    The schedules run over `num_updates`. With `test_every` > 0 a greedy test of `test_envs`
    envs for the env's episode limit runs before training and after every `test_every`-th
    update."""
    env, env_params = spec.env, spec.params
    network = _QNetwork(spec.num_actions, hidden_size, num_layers)
    batch_size = num_envs * num_steps
    assert batch_size % minibatches == 0
    eps_schedule = optax.linear_schedule(eps_start, eps_end, eps_decay * num_updates)
    lr_schedule = optax.linear_schedule(lr, 1e-20, num_updates * minibatches * epochs)
    optimizer = optax.chain(optax.clip_by_global_norm(max_grad_norm), optax.radam(learning_rate=lr_schedule))
    test_steps = int(env_params.max_steps_in_episode)

    def step_envs(key, env_state, action, count):
        step = jax.vmap(env.step, in_axes=(0, 0, 0, None))
        return step(jax.random.split(key, count), env_state, action, env_params)

    def eps_greedy(key, q, eps):
        random_key, choice_key = jax.random.split(key)
        greedy = jnp.argmax(q, axis=-1)
        explore = jax.random.uniform(choice_key, greedy.shape) < eps
        return jnp.where(explore, jax.random.randint(random_key, greedy.shape, 0, q.shape[-1]), greedy)

    def act(params, obs, key, eps, count):
        q = network.apply(params, obs)
        action = jax.vmap(eps_greedy)(jax.random.split(key, count), q, jnp.full(count, eps))
        return q, action

    def env_step(carry, _, params, eps):
        obs, env_state, key = carry
        key, action_key, step_key = jax.random.split(key, 3)
        q, action = act(params, obs, action_key, eps, num_envs)
        next_obs, env_state, reward, terminated, truncated, info = step_envs(step_key, env_state, action, num_envs)
        transition = {
            "obs": obs,
            "action": action,
            "reward": reward_scale * reward,
            "done": jnp.logical_or(terminated, truncated).astype(jnp.float32),
            "next_obs": next_obs,
            "q": q,
        }
        episode = (info["returned_episode_returns"], info["returned_episode"])
        return (next_obs, env_state, key), (transition, episode)

    def q_lambda_targets(params, transitions):
        # The reverse scan as purejaxql writes it: the carry starts from the last step's
        # bootstrap, and each step's target is cut to its reward where it ended an episode.
        last_q = jnp.max(network.apply(params, transitions["next_obs"][-1]), axis=-1) * (1 - transitions["done"][-1])
        last_return = transitions["reward"][-1] + gamma * last_q

        def step(carry, transition):
            lambda_return, next_q = carry
            bootstrap = transition["reward"] + gamma * (1 - transition["done"]) * next_q
            lambda_return = bootstrap + gamma * q_lambda * (lambda_return - next_q)
            lambda_return = (1 - transition["done"]) * lambda_return + transition["done"] * transition["reward"]
            return (lambda_return, jnp.max(transition["q"], axis=-1)), lambda_return

        earlier = jax.tree.map(lambda x: x[:-1], transitions)
        _, targets = jax.lax.scan(step, (last_return, last_q), earlier, reverse=True)
        return jnp.concatenate([targets, last_return[None]])

    def loss_fn(params, obs, action, target):
        q = network.apply(params, obs)
        q_taken = jnp.take_along_axis(q, action[:, None], axis=-1)[:, 0]
        return 0.5 * jnp.square(q_taken - target).mean()

    def minibatch_step(carry, minibatch):
        params, opt_state = carry
        transition, target = minibatch
        loss, grads = jax.value_and_grad(loss_fn)(params, transition["obs"], transition["action"], target)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), loss

    def epoch(carry, _, transitions, targets):
        params, opt_state, key = carry
        key, perm_key = jax.random.split(key)

        def shuffle(x):
            x = jax.random.permutation(perm_key, x.reshape((batch_size,) + x.shape[2:]))
            return x.reshape((minibatches, -1) + x.shape[1:])

        shuffled = jax.tree.map(shuffle, (transitions, targets))
        (params, opt_state), loss = jax.lax.scan(minibatch_step, (params, opt_state), shuffled)
        return (params, opt_state, key), loss

    def test(params, key):
        """The greedy policy's mean return over the episodes `test_envs` envs end in an episode limit."""
        key, reset_key = jax.random.split(key)
        obs, env_state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(reset_key, test_envs), env_params)

        def step(carry, _):
            env_state, obs, key = carry
            key, step_key = jax.random.split(key)
            _, action = act(params, obs, step_key, 0.0, test_envs)
            obs, env_state, _, _, _, info = step_envs(step_key, env_state, action, test_envs)
            return (env_state, obs, key), (info["returned_episode_returns"], info["returned_episode"])

        _, (returns, ended) = jax.lax.scan(step, (env_state, obs, key), None, test_steps)
        return jnp.nanmean(jnp.where(ended, returns, jnp.nan))

    def update(runner, _):
        params, opt_state, env_state, obs, key, n_updates, test_return = runner
        key, rollout_key = jax.random.split(key)
        step = lambda c, x: env_step(c, x, params, eps_schedule(n_updates))
        (obs, env_state, _), (transitions, (ep_return, ep_done)) = jax.lax.scan(
            step, (obs, env_state, rollout_key), None, num_steps
        )
        targets = q_lambda_targets(params, transitions)
        key, epoch_key = jax.random.split(key)
        (params, opt_state, _), loss = jax.lax.scan(
            lambda c, x: epoch(c, x, transitions, targets), (params, opt_state, epoch_key), None, epochs
        )
        n_updates = n_updates + 1
        if test_every:
            key, test_key = jax.random.split(key)
            test_return = jax.lax.cond(n_updates % test_every == 0, lambda: test(params, test_key),
                                       lambda: test_return)
        finished = jnp.sum(ep_done)
        mean_return = jnp.where(finished > 0, jnp.sum(ep_return * ep_done) / jnp.maximum(finished, 1), jnp.nan)
        metrics = {"returns": mean_return, "td_loss": loss.mean(), "test_returns": test_return}
        return (params, opt_state, env_state, obs, key, n_updates, test_return), metrics

    def train(key):
        key, init_key, test_key, reset_key, run_key = jax.random.split(key, 5)
        params = network.init(init_key, jnp.zeros((1, spec.obs_size), jnp.float32))
        test_return = test(params, test_key) if test_every else jnp.float32(jnp.nan)
        obs, env_state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(reset_key, num_envs), env_params)
        runner = (params, optimizer.init(params), env_state, obs, run_key, jnp.int32(0), test_return)
        runner, metrics = jax.lax.scan(update, runner, None, num_updates)
        # The trained parameters too: were the metrics all it gave back, XLA could drop the
        # last update's learning, which they do not depend on.
        return {"params": runner[0], **metrics}

    return train


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--total-timesteps", type=float, default=5e5)
    parser.add_argument("--num-envs", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import numpy as np

    from trainers.envs import make_env

    num_updates = int(args.total_timesteps // (args.num_envs * 64))
    test_every = max(1, num_updates // 20)  # the original's test interval, a twentieth of the run
    train = jax.jit(make_train(make_env("CartPole-v1"), args.num_envs, num_updates=num_updates, test_every=test_every))
    out = jax.device_get(train(jax.random.PRNGKey(args.seed)))
    for index in range(test_every - 1, num_updates, test_every):
        recent = out["returns"][max(0, index - test_every + 1): index + 1]
        print(f"update {index + 1:4d}: mean episode return {np.nanmean(recent):6.1f}, "
              f"greedy test {out['test_returns'][index]:6.1f}, TD loss {out['td_loss'][index]:.4f}")


if __name__ == "__main__":
    main()
