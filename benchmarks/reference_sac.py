"""A reference point for `offpolicy_throughput.py`: SAC written the way rejax writes it
(`rejax/algos/sac.py` with its replay-buffer, target-network and observation-normalising
mixins; one program jitted whole): an outer scan of evaluations, each after a `fori_loop`
of training iterations; an iteration steps every env once, extends a circular buffer (a
scatter per field) and, once past `fill_buffer` env steps, takes `num_epochs` gradient
steps, each on a batch drawn without replacement by `jax.random.choice` with weights over
the whole buffer; a gradient step is three updates in turn, each with its own Adam behind
an elementwise clip: the actor (against the critics), the twin critics (vmapped over
stacked parameters; the soft target from the target critics and the updated actor) and
the temperature; then the target critics move Polyak-wise, every iteration. The policy is
a tanh-squashed Gaussian (log std from its own head, clipped to [-10, 2]); evaluation runs
`eval_episodes` episodes of the sampled policy, each to its end in a `while_loop`. Its
defaults are rejax's Pendulum-v1 configuration (`configs/gymnax/pendulum.yaml`). It is
here to be timed beside rltui's SAC, on the same wrapped gymnax env, so that the comparison
is a ratio on one machine at one moment.

It is a benchmark fixture, not a trainer, and differs from the original where nothing is
timed or nothing here has it: no reward normalisation (off in the configuration), no
discrete-action branch; `done` is `terminated | truncated`, as the original's gymnax
`done` is. `evaluate=False` leaves out the evaluations (and the initial one), for timing
training alone.

    python benchmarks/reference_sac.py [--total-timesteps 1e4] [--seed 0]

trains Pendulum-v1 and prints the evaluation return every tenth of the run, to show that
it learns.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

_ACTIVATIONS = {"swish": nn.swish, "relu": nn.relu, "tanh": nn.tanh}
_LOG_STD_RANGE = (-10.0, 2.0)


class _MLP(nn.Module):
    hidden_sizes: tuple[int, ...]
    activation: str

    @nn.compact
    def __call__(self, x):
        for size in self.hidden_sizes:
            x = _ACTIVATIONS[self.activation](nn.Dense(size)(x))
        return x


class _Actor(nn.Module):
    num_actions: int
    hidden_sizes: tuple[int, ...]
    activation: str

    @nn.compact
    def __call__(self, obs):
        features = _MLP(self.hidden_sizes, self.activation)(obs)
        mean = nn.Dense(self.num_actions)(features)
        log_std = jnp.clip(nn.Dense(self.num_actions)(features), *_LOG_STD_RANGE)
        return mean, log_std


class _Critic(nn.Module):
    hidden_sizes: tuple[int, ...]
    activation: str

    @nn.compact
    def __call__(self, obs, action):
        x = _MLP(self.hidden_sizes, self.activation)(jnp.concatenate([obs, action], axis=-1))
        return nn.Dense(1)(x)[:, 0]


class _Stored(NamedTuple):
    obs: jax.Array
    action: jax.Array
    reward: jax.Array
    done: jax.Array
    next_obs: jax.Array


class _Buffer(NamedTuple):
    data: _Stored
    index: jax.Array
    full: jax.Array


class _ObsStats(NamedTuple):
    mean: jax.Array
    var: jax.Array
    count: jax.Array


class _State(NamedTuple):
    actor: dict
    critic: dict  # the twin critics' parameters, stacked on a leading axis
    critic_target: dict
    log_alpha: jax.Array
    actor_opt: optax.OptState
    critic_opt: optax.OptState
    alpha_opt: optax.OptState
    buffer: _Buffer
    obs_stats: _ObsStats
    env_state: object
    last_obs: jax.Array
    global_step: jax.Array
    key: jax.Array


def make_train(spec, num_envs: int = 1, buffer_size: int = 10_000, fill_buffer: int = 256, batch_size: int = 256,
               lr: float = 0.01, num_epochs: int = 1, total_timesteps: float = 10_000, eval_freq: int = 100,
               gamma: float = 0.99, polyak: float = 0.98, hidden_sizes: tuple[int, ...] = (64, 64),
               activation: str = "swish", normalize_observations: bool = True, max_grad_norm: float = math.inf,
               num_critics: int = 2, eval_episodes: int = 128, evaluate: bool = True):
    """`train(key) -> {"state", "eval_returns": the mean return of each evaluation (the first
    before training), "gradient_steps": taken in all}` for a continuous-action `spec`
    (trainers.envs.EnvSpec), jit-ready. Without `evaluate`, "eval_returns" is empty."""
    env, env_params = spec.env, spec.params
    num_actions = spec.num_actions
    action_loc = jnp.asarray((spec.action_high + spec.action_low) / 2)
    action_scale = jnp.asarray((spec.action_high - spec.action_low) / 2)
    actor_net = _Actor(num_actions, tuple(hidden_sizes), activation)
    critic_net = _Critic(tuple(hidden_sizes), activation)
    optimizer = optax.chain(optax.clip(max_grad_norm), optax.adam(learning_rate=lr))
    target_entropy = -num_actions
    iterations_per_eval = math.ceil(eval_freq / num_envs)
    num_evals = math.ceil(total_timesteps / eval_freq)
    max_steps = int(env_params.max_steps_in_episode)

    def normalize(stats: _ObsStats, obs):
        return (obs - stats.mean) / jnp.sqrt(stats.var + 1e-8) if normalize_observations else obs

    def update_stats(stats: _ObsStats, batch):
        batch_mean, batch_var, batch_count = batch.mean(axis=0), batch.var(axis=0), batch.shape[0]
        delta = batch_mean - stats.mean
        total = stats.count + batch_count
        m2 = stats.var * stats.count + batch_var * batch_count + delta ** 2 * stats.count * batch_count / total
        return _ObsStats(stats.mean + delta * batch_count / total, m2 / total, total)

    def sample_action(actor_params, obs, key):
        """(action in the env's bounds, log pi) of the squashed Gaussian, log pi before the scaling."""
        mean, log_std = actor_net.apply(actor_params, obs)
        u = mean + jnp.exp(log_std) * jax.random.normal(key, mean.shape)
        gaussian = -0.5 * jnp.sum(jnp.square((u - mean) / jnp.exp(log_std)) + 2 * log_std + math.log(2 * math.pi),
                                  axis=-1)
        log_det = jnp.sum(2.0 * (math.log(2.0) - u - jax.nn.softplus(-2.0 * u)), axis=-1)
        return action_loc + jnp.tanh(u) * action_scale, gaussian - log_det

    def q_values(critic_params, obs, action):
        return jax.vmap(critic_net.apply, in_axes=(0, None, None))(critic_params, obs, action)

    def buffer_extend(buffer: _Buffer, batch: _Stored) -> _Buffer:
        idx = (buffer.index + jnp.arange(num_envs)) % buffer_size
        data = jax.tree.map(lambda stored, new: stored.at[idx].set(new), buffer.data, batch)
        next_index = (buffer.index + num_envs) % buffer_size
        return _Buffer(data, next_index, jnp.logical_or(buffer.full, next_index <= buffer.index))

    def buffer_sample(buffer: _Buffer, key) -> _Stored:
        entries = jnp.where(buffer.full, buffer_size, buffer.index)
        weights = (jnp.arange(buffer_size) < entries) / entries
        rows = jax.random.choice(key, buffer_size, (batch_size,), replace=False, p=weights)
        return jax.tree.map(lambda stored: stored[rows], buffer.data)

    def collect(state: _State) -> _State:
        key, action_key, step_key = jax.random.split(state.key, 3)
        action, _ = sample_action(state.actor, normalize(state.obs_stats, state.last_obs), action_key)
        step = jax.vmap(env.step, in_axes=(0, 0, 0, None))
        next_obs, env_state, reward, terminated, truncated, _ = step(
            jax.random.split(step_key, num_envs), state.env_state, action, env_params)
        obs_stats = update_stats(state.obs_stats, next_obs) if normalize_observations else state.obs_stats
        stored = _Stored(state.last_obs, action, reward, jnp.logical_or(terminated, truncated), next_obs)
        return state._replace(buffer=buffer_extend(state.buffer, stored), obs_stats=obs_stats, env_state=env_state,
                              last_obs=next_obs, global_step=state.global_step + num_envs, key=key)

    def gradient_step(state: _State) -> _State:
        key, sample_key, actor_key, critic_key = jax.random.split(state.key, 4)
        batch = buffer_sample(state.buffer, sample_key)
        obs, next_obs = normalize(state.obs_stats, batch.obs), normalize(state.obs_stats, batch.next_obs)
        alpha = jnp.exp(state.log_alpha)

        def actor_loss(params):
            action, log_prob = sample_action(params, obs, actor_key)
            return jnp.mean(alpha * log_prob - q_values(state.critic, obs, action).min(axis=0)), log_prob

        grads, log_prob = jax.grad(actor_loss, has_aux=True)(state.actor)
        updates, actor_opt = optimizer.update(grads, state.actor_opt, state.actor)
        actor = optax.apply_updates(state.actor, updates)

        def critic_loss(params):
            next_action, next_log_prob = sample_action(actor, next_obs, critic_key)
            next_q = q_values(state.critic_target, next_obs, next_action).min(axis=0) - alpha * next_log_prob
            target = batch.reward + gamma * (1 - batch.done) * next_q
            q = q_values(params, obs, batch.action)
            return jax.vmap(lambda qi: optax.l2_loss(qi, target))(q).sum(axis=0).mean()

        grads = jax.grad(critic_loss)(state.critic)
        updates, critic_opt = optimizer.update(grads, state.critic_opt, state.critic)
        critic = optax.apply_updates(state.critic, updates)

        def alpha_loss(log_alpha):
            return jnp.mean(-jnp.exp(log_alpha) * (log_prob + target_entropy))

        grads = jax.grad(alpha_loss)(state.log_alpha)
        updates, alpha_opt = optimizer.update(grads, state.alpha_opt, state.log_alpha)
        return state._replace(actor=actor, critic=critic, log_alpha=optax.apply_updates(state.log_alpha, updates),
                              actor_opt=actor_opt, critic_opt=critic_opt, alpha_opt=alpha_opt, key=key)

    def iteration(_, carry):
        state, gradient_steps = carry
        state = collect(state)
        learning = state.global_step > fill_buffer
        state = jax.lax.cond(learning, lambda s: jax.lax.fori_loop(0, num_epochs, lambda _, s: gradient_step(s), s),
                             lambda s: s, state)
        critic_target = jax.tree.map(lambda p, t: t * polyak + p * (1 - polyak), state.critic, state.critic_target)
        gradient_steps = gradient_steps + jnp.where(learning, num_epochs, 0)
        return state._replace(critic_target=critic_target), gradient_steps

    def evaluation(state: _State, key):
        """The sampled policy's mean return over `eval_episodes` episodes, each run to its end."""

        def episode(key):
            reset_key, key = jax.random.split(key)
            obs, env_state = env.reset(reset_key, env_params)

            def step(carry):
                key, env_state, obs, done, total, length = carry
                key, action_key, step_key = jax.random.split(key, 3)
                action, _ = sample_action(state.actor, normalize(state.obs_stats, obs)[None], action_key)
                obs, env_state, reward, terminated, truncated, _ = env.step(step_key, env_state, action[0],
                                                                             env_params)
                return key, env_state, obs, jnp.logical_or(terminated, truncated), total + reward, length + 1

            carry = (key, env_state, obs, jnp.bool_(False), jnp.float32(0.0), jnp.int32(0))
            carry = jax.lax.while_loop(lambda c: (c[5] < max_steps) & ~c[3], step, carry)
            return carry[4]

        return jnp.mean(jax.vmap(episode)(jax.random.split(key, eval_episodes)))

    def train(key):
        key, reset_key, actor_key, critic_key, run_key = jax.random.split(key, 5)
        obs, env_state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(reset_key, num_envs), env_params)
        obs_ph, action_ph = jnp.zeros((1, spec.obs_size)), jnp.zeros((1, num_actions))
        actor = actor_net.init(actor_key, obs_ph)
        critic = jax.vmap(critic_net.init, in_axes=(0, None, None))(
            jax.random.split(critic_key, num_critics), obs_ph, action_ph)
        log_alpha = jnp.float32(0.0)
        empty = _Stored(jnp.zeros((buffer_size, spec.obs_size)), jnp.zeros((buffer_size, num_actions)),
                        jnp.zeros(buffer_size), jnp.zeros(buffer_size, bool), jnp.zeros((buffer_size, spec.obs_size)))
        state = _State(actor, critic, critic, log_alpha, optimizer.init(actor), optimizer.init(critic),
                       optimizer.init(log_alpha), _Buffer(empty, jnp.int32(0), jnp.bool_(False)),
                       _ObsStats(jnp.zeros(spec.obs_size), jnp.ones(spec.obs_size), jnp.float32(1e-4)), env_state, obs,
                       jnp.int32(0), run_key)

        def eval_iteration(carry, _):
            carry = jax.lax.fori_loop(0, iterations_per_eval, iteration, carry)
            if not evaluate:
                return carry, None
            state = carry[0]
            key, eval_key = jax.random.split(state.key)
            return (state._replace(key=key), carry[1]), evaluation(state, eval_key)

        first = evaluation(state, jax.random.fold_in(key, 1)) if evaluate else None
        (state, gradient_steps), returns = jax.lax.scan(eval_iteration, (state, jnp.int32(0)), None, num_evals)
        eval_returns = jnp.concatenate([first[None], returns]) if evaluate else jnp.zeros(0)
        return {"state": state, "eval_returns": eval_returns, "gradient_steps": gradient_steps}

    return train


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--total-timesteps", type=float, default=1e4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

    from trainers.envs import make_env

    train = jax.jit(make_train(make_env("Pendulum-v1"), total_timesteps=args.total_timesteps))
    out = jax.device_get(train(jax.random.PRNGKey(args.seed)))
    returns = out["eval_returns"]
    every = max(1, (len(returns) - 1) // 10)
    for index in range(0, len(returns), every):
        print(f"env step {index * 100:6d}: evaluation return {returns[index]:8.1f}")
    print(f"gradient steps: {int(out['gradient_steps'])}")


if __name__ == "__main__":
    main()
