"""A reference point for `offpolicy_throughput.py`: DQN written the way PureJaxRL's
single-file `dqn.py` writes it (one closure, jitted whole; flax params; one scan step per
step of every env; flashbax's flat buffer, added to every step and sampled for each
gradient step; epsilon-greedy with one `uniform` and one `randint` draw over the envs,
epsilon falling linearly with the env steps; a gradient step of Adam on the squared TD
error, under `lax.cond`, every `training_interval` env steps once past `learning_starts`;
the target network moved `tau` of the way, under `lax.cond`, every
`target_update_interval` env steps). Its defaults are PureJaxRL's CartPole configuration.
It is here to be timed beside rltui's DQN, on the same wrapped gymnax env, so that the
comparison is a ratio on one machine at one moment.

It is a benchmark fixture, not a trainer, and differs from the original where nothing is
timed or nothing here has it: no seeds axis, no logging; `done` is
`terminated | truncated`, as the original's gymnax `done` is. A greedy test during
training (the original has none) is an option, `test_every`, off unless given: the time
to a solved CartPole needs one on both sides.

    python benchmarks/reference_dqn.py [--total-timesteps 5e5] [--seed 0]

trains CartPole-v1 and prints the mean episode return and a greedy test every twentieth of
the run, to show that it learns.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NamedTuple

import flashbax
import flax.linen as nn
import jax
import jax.numpy as jnp
import optax


class _QNetwork(nn.Module):
    num_actions: int
    hidden_sizes: tuple[int, ...]

    @nn.compact
    def __call__(self, obs):
        x = obs
        for size in self.hidden_sizes:
            x = nn.relu(nn.Dense(size)(x))
        return nn.Dense(self.num_actions)(x)


class _Stored(NamedTuple):
    obs: jax.Array
    action: jax.Array
    reward: jax.Array
    done: jax.Array


class _Learner(NamedTuple):
    params: dict
    target_params: dict
    opt_state: optax.OptState
    timesteps: jax.Array
    gradient_steps: jax.Array


def make_train(spec, num_envs: int = 10, buffer_size: int = 10_000, batch_size: int = 128,
               total_timesteps: float = 5e5, eps_start: float = 1.0, eps_end: float = 0.05,
               eps_anneal_time: float = 25e4, target_update_interval: int = 500, lr: float = 2.5e-4,
               learning_starts: int = 10_000, training_interval: int = 10, gamma: float = 0.99, tau: float = 1.0,
               hidden_sizes: tuple[int, ...] = (120, 84), test_every: int = 0, test_envs: int = 128):
    """`train(key) -> {"params", "returns": the mean over envs of each env's latest episode
    return, per step of the envs (as the original logs it), "td_loss" per step (0 where no
    gradient step), "gradient_steps": taken in all, "test_returns": the latest greedy test's
    mean return, per step (NaN before any)}` for a discrete-action `spec`
    (trainers.envs.EnvSpec), jit-ready. With `test_every` > 0 a greedy test of `test_envs`
    envs for the env's episode limit runs after every `test_every`-th step of the envs."""
    env, env_params = spec.env, spec.params
    network = _QNetwork(spec.num_actions, tuple(hidden_sizes))
    num_steps = int(total_timesteps // num_envs)
    optimizer = optax.adam(lr)
    buffer = flashbax.make_flat_buffer(max_length=buffer_size, min_length=batch_size, sample_batch_size=batch_size,
                                       add_sequences=False, add_batch_size=num_envs)
    test_steps = int(env_params.max_steps_in_episode)

    def step_envs(key, env_state, action, count):
        step = jax.vmap(env.step, in_axes=(0, 0, 0, None))
        return step(jax.random.split(key, count), env_state, action, env_params)

    def eps_greedy(key, q, timesteps):
        random_key, choice_key = jax.random.split(key)
        eps = jnp.clip((eps_end - eps_start) / eps_anneal_time * timesteps + eps_start, eps_end)
        greedy = jnp.argmax(q, axis=-1)
        explore = jax.random.uniform(choice_key, greedy.shape) < eps
        return jnp.where(explore, jax.random.randint(random_key, greedy.shape, 0, q.shape[-1]), greedy)

    def learn(learner: _Learner, buffer_state, key):
        batch = buffer.sample(buffer_state, key).experience
        next_q = jnp.max(network.apply(learner.target_params, batch.second.obs), axis=-1)
        target = batch.first.reward + (1 - batch.first.done) * gamma * next_q

        def loss_fn(params):
            q = network.apply(params, batch.first.obs)
            q_taken = jnp.take_along_axis(q, batch.first.action[:, None], axis=-1)[:, 0]
            return jnp.mean(jnp.square(q_taken - target))

        loss, grads = jax.value_and_grad(loss_fn)(learner.params)
        updates, opt_state = optimizer.update(grads, learner.opt_state, learner.params)
        learner = learner._replace(params=optax.apply_updates(learner.params, updates), opt_state=opt_state,
                                   gradient_steps=learner.gradient_steps + 1)
        return learner, loss

    def test(params, key):
        """The greedy policy's mean return over the episodes `test_envs` envs end in an episode limit."""
        key, reset_key = jax.random.split(key)
        obs, env_state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(reset_key, test_envs), env_params)

        def step(carry, _):
            env_state, obs, key = carry
            key, step_key = jax.random.split(key)
            action = jnp.argmax(network.apply(params, obs), axis=-1)
            obs, env_state, _, _, _, info = step_envs(step_key, env_state, action, test_envs)
            return (env_state, obs, key), (info["returned_episode_returns"], info["returned_episode"])

        _, (returns, ended) = jax.lax.scan(step, (env_state, obs, key), None, test_steps)
        return jnp.nanmean(jnp.where(ended, returns, jnp.nan))

    def update_step(runner, _):
        learner, buffer_state, env_state, last_obs, key, test_return = runner
        key, action_key, step_key = jax.random.split(key, 3)
        q = network.apply(learner.params, last_obs)
        action = eps_greedy(action_key, q, learner.timesteps)
        obs, env_state, reward, terminated, truncated, info = step_envs(step_key, env_state, action, num_envs)
        done = jnp.logical_or(terminated, truncated)
        learner = learner._replace(timesteps=learner.timesteps + num_envs)
        buffer_state = buffer.add(buffer_state, _Stored(last_obs, action, reward, done))

        key, learn_key = jax.random.split(key)
        is_learn_time = (buffer.can_sample(buffer_state) & (learner.timesteps > learning_starts)
                         & (learner.timesteps % training_interval == 0))
        learner, loss = jax.lax.cond(is_learn_time, lambda ln, k: learn(ln, buffer_state, k),
                                     lambda ln, k: (ln, jnp.float32(0.0)), learner, learn_key)
        learner = jax.lax.cond(
            learner.timesteps % target_update_interval == 0,
            lambda ln: ln._replace(target_params=optax.incremental_update(ln.params, ln.target_params, tau)),
            lambda ln: ln, learner)
        if test_every:
            key, test_key = jax.random.split(key)
            test_return = jax.lax.cond((learner.timesteps // num_envs) % test_every == 0,
                                       lambda: test(learner.params, test_key), lambda: test_return)
        metrics = {"returns": info["returned_episode_returns"].mean(), "td_loss": loss, "test_returns": test_return}
        return (learner, buffer_state, env_state, obs, key, test_return), metrics

    def train(key):
        key, reset_key, init_key, run_key = jax.random.split(key, 4)
        obs, env_state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(reset_key, num_envs), env_params)
        example_obs, _ = env.reset(reset_key, env_params)
        buffer_state = buffer.init(_Stored(example_obs, jnp.int32(0), jnp.float32(0.0), jnp.bool_(False)))
        params = network.init(init_key, jnp.zeros(example_obs.shape, jnp.float32))
        learner = _Learner(params, jax.tree.map(jnp.copy, params), optimizer.init(params), jnp.int32(0),
                           jnp.int32(0))
        runner = (learner, buffer_state, env_state, obs, run_key, jnp.float32(jnp.nan))
        runner, metrics = jax.lax.scan(update_step, runner, None, num_steps)
        # The trained parameters too: were the metrics all it gave back, XLA could drop the
        # last gradient step, which they do not depend on.
        return {"params": runner[0].params, "gradient_steps": runner[0].gradient_steps, **metrics}

    return train


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--total-timesteps", type=float, default=5e5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import numpy as np

    from trainers.envs import make_env

    num_envs = 10
    num_steps = int(args.total_timesteps // num_envs)
    test_every = max(1, num_steps // 20)
    train = jax.jit(make_train(make_env("CartPole-v1"), num_envs, total_timesteps=args.total_timesteps,
                               test_every=test_every))
    out = jax.device_get(train(jax.random.PRNGKey(args.seed)))
    for index in range(test_every - 1, num_steps, test_every):
        recent = out["returns"][max(0, index - test_every + 1): index + 1]
        print(f"env step {(index + 1) * num_envs:7d}: mean episode return {np.mean(recent):6.1f}, "
              f"greedy test {out['test_returns'][index]:6.1f}")
    print(f"gradient steps: {int(out['gradient_steps'])}")


if __name__ == "__main__":
    main()
