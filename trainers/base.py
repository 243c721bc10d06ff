"""What every on-policy trainer shares: network, optimizer, init, a gradient step averaged
over devices, episode statistics, the metrics of an update, and the chunk of updates. It
knows no algorithm by name: each is a package of `trainers.algorithms`.

A trainer subclasses `OnPolicyTrainer` and defines `update(state, hp) -> (state,
UpdateMetrics)`, its metrics made by `report`; `run_chunk` scans it. Every function here runs inside
`parallel.DataParallel`'s pmap, also on a single device, so `AXIS` is always bound.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple

import jax
import jax.flatten_util
import jax.numpy as jnp
import optax
from flax import struct

from trainers import networks, normalize, recurrent
from trainers.envs import EnvSpec
from trainers.hparams import DynamicHParams, StaticConfig, annealed_rate, batch_split_problem
from trainers.metrics_spec import METRIC_SPECS, TRAINER_METRICS
from trainers.rollout import reset_envs, rollout
from trainers.types import ChunkMetrics, TrainState, Transition, UpdateMetrics

AXIS = "devices"


def make_optimizer(learning_rate, max_grad_norm):
    return optax.chain(optax.clip_by_global_norm(max_grad_norm), optax.adam(learning_rate, eps=1e-5))


def flat_optimizer(learning_rate, max_grad_norm):
    return optax.flatten(make_optimizer(learning_rate, max_grad_norm))


def annealed_lr(hp: DynamicHParams, update_idx: jax.Array) -> jax.Array:
    """Linear decay to zero over `anneal_updates`, computed inside the step so that an
    edited `lr` takes effect on the next update without recompiling."""
    return annealed_rate(hp.lr, hp.anneal_lr, hp.anneal_updates, update_idx.astype(jnp.float32), jnp)


def set_injected(opt_state, **values):
    hyperparams = dict(opt_state.hyperparams)
    for name, value in values.items():
        hyperparams[name] = jnp.asarray(value, dtype=jnp.asarray(opt_state.hyperparams[name]).dtype)
    return opt_state._replace(hyperparams=hyperparams)


def actor_critic_loss(policy_loss, value_loss, entropy, vf_coef, ent_coef):
    """An actor-critic's total loss: its policy term, the value term weighted by `vf_coef`,
    less the entropy bonus weighted by `ent_coef`."""
    return policy_loss + vf_coef * value_loss - ent_coef * entropy


def standardize(x, mean, std):
    """`x` shifted by `mean` and divided by `std` (advantage normalisation)."""
    return (x - mean) / (std + 1e-8)


class EpisodeStats(NamedTuple):
    """The episodes that ended during a rollout, over all devices; the means are NaN when
    none ended."""

    mean_return: jax.Array
    mean_length: jax.Array
    count: jax.Array


def episode_stats(traj) -> EpisodeStats:
    done = jnp.logical_or(traj.terminated, traj.truncated).astype(jnp.float32)
    episodes, return_sum, length_sum = jax.lax.psum(
        (jnp.sum(done), jnp.sum(traj.episode_return * done), jnp.sum(traj.episode_length * done)), AXIS
    )
    nan = jnp.float32(jnp.nan)
    mean = lambda total: jnp.where(episodes > 0, total / jnp.maximum(episodes, 1.0), nan)
    return EpisodeStats(mean_return=mean(return_sum), mean_length=mean(length_sum), count=episodes)


class GradientStep(NamedTuple):
    """One optimizer step's result (`OnPolicyTrainer.apply_gradients`)."""

    params: Any
    opt_state: Any
    aux: Any  # the loss's aux, averaged over devices
    grad_norm: jax.Array  # of the device-averaged gradient, before clipping


class Epochs(NamedTuple):
    """An update's epochs of gradient steps (`OnPolicyTrainer.train_epochs`)."""

    params: Any
    opt_state: Any
    info: Any  # each step's diagnostics, leaves (epoch, minibatch)
    lr: jax.Array  # the learning rate they trained at


def check_devices(static: StaticConfig, num_devices: int) -> None:
    problem = batch_split_problem(static, num_devices)
    if problem is not None:
        raise ValueError(f"{problem[0]}: {problem[1]}")


@struct.dataclass
class Collected:
    """A rollout and the state to continue from. `traj` holds what the learner sees: the
    observations as the policy saw them (normalised, when on) and the rewards after
    normalisation and `reward_scale`; its episode returns are the env's own."""

    env_state: Any
    obs: jax.Array
    hidden: Any  # recurrent: (env, H) after the last step's reset; None for the MLP
    traj: Transition
    step_hidden: Any  # recurrent: (time, env, H) from each step's policy call; None for the MLP
    # Normalisation statistics updated with this rollout (None when off); see TrainState.
    obs_stats: Any = None
    return_stats: Any = None
    discounted_return: Any = None


@dataclasses.dataclass(frozen=True)
class OnPolicyTrainer:
    """One static configuration, split data-parallel over `num_devices`. Subclasses define
    `update`."""

    static: StaticConfig
    spec: EnvSpec
    num_devices: int = 1
    # The network's `policy_out` are action values, acted on greedily or epsilon-greedily,
    # rather than a policy's logits or mean.
    acts_by_values = False

    @property
    def recurrent(self) -> bool:
        return self.static.recurrent

    @property
    def network(self) -> networks.ActorCritic | networks.RecurrentActorCritic:
        common = dict(
            num_actions=self.spec.num_actions,
            discrete=self.spec.discrete,
            hidden_sizes=tuple(self.static.hidden_sizes),
            activation=self.static.activation,
            dtype=networks.matmul_dtype(self.static.precision),
            log_std_mode=self.static.log_std,
            log_std_init=self.static.log_std_init,
        )
        if self.recurrent:
            return networks.RecurrentActorCritic(**common)
        image_shape = self.spec.obs_shape if self.static.network == "cnn" else None
        return networks.ActorCritic(image_shape=image_shape, **common)

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
        """Feed-forward network: outputs for observations with any leading axes."""
        return self.network.apply(params, obs.astype(jnp.float32))

    def policy_step(self, params, hidden, obs):
        """One env, one step: (hidden, obs) -> (hidden, outputs). The feed-forward network
        passes `hidden` through, so evaluation can treat both networks alike."""
        if not self.recurrent:
            return hidden, self.apply(params, obs)
        return self.network.apply(params, hidden, obs.astype(jnp.float32))

    def initial_hidden(self, num_envs: int) -> jax.Array | None:
        if not self.recurrent:
            return None
        return jnp.zeros((num_envs, self.network.hidden_size), jnp.float32)

    def act_step(self, acting, hidden, obs):
        """`policy_step` from raw observations, for acting outside training (evaluation):
        `acting` is `(params, obs_stats)` of a state (obs_stats None when not normalising)."""
        params, obs_stats = acting
        return self.policy_step(params, hidden, normalize.normalize_obs(obs_stats, obs))

    def behaviour(self, outputs: networks.PolicyOutputs, state: TrainState, hp: DynamicHParams):
        """The outputs a rollout samples its actions from: the network's own for a policy;
        an algorithm that explores otherwise (epsilon-greedy) turns them into that
        distribution here."""
        return outputs

    def collect(self, state: TrainState, key: jax.Array, hp: DynamicHParams) -> Collected:
        """One rollout of `num_steps` in this device's envs, from `state`; then the
        normalisation statistics are updated and the rewards shaped (see `Collected`)."""
        common = dict(num_global_envs=self.static.num_envs, spec=self.spec, num_steps=self.static.num_steps,
                      noise_hold=self.static.noise_hold)
        stats = state.obs_stats
        if not self.recurrent:
            apply_fn = lambda params, obs: self.behaviour(
                self.apply(params, normalize.normalize_obs(stats, obs)), state, hp)
            run = rollout(state.params, state.env_state, state.obs, key, self._env_ids(), apply_fn=apply_fn, **common)
            collected = Collected(env_state=run.env_state, obs=run.obs, hidden=None, traj=run.traj, step_hidden=None)
        else:
            def step_fn(params, h, obs):
                h, out = self.policy_step(params, h, normalize.normalize_obs(stats, obs))
                return h, self.behaviour(out, state, hp)
            run = recurrent.recurrent_rollout(
                state.params, state.env_state, state.obs, state.hidden, key, self._env_ids(),
                step_fn=step_fn, **common,
            )
            collected = Collected(env_state=run.env_state, obs=run.obs, hidden=run.hidden, traj=run.traj,
                                  step_hidden=run.step_hidden)
        traj = collected.traj
        if stats is not None:
            # The learner sees what the policy saw; the new statistics apply from the next rollout.
            traj = traj.replace(obs=normalize.normalize_obs(stats, traj.obs),
                                final_obs=normalize.normalize_obs(stats, traj.final_obs))
            collected = collected.replace(obs_stats=normalize.update_stats(stats, collected.traj.obs, AXIS))
        reward = traj.reward
        if state.return_stats is not None:
            done = jnp.logical_or(traj.terminated, traj.truncated)
            return_stats, discounted_return, reward = normalize.normalize_rewards(
                state.return_stats, state.discounted_return, reward, done, hp.gamma, AXIS
            )
            collected = collected.replace(return_stats=return_stats, discounted_return=discounted_return)
        return collected.replace(traj=traj.replace(reward=reward * hp.reward_scale))

    def next_state(self, state: TrainState, collected: Collected, params, opt_state, key) -> TrainState:
        """The state after one update: new params, the rollout's env state and statistics."""
        return state.replace(
            params=params,
            opt_state=opt_state,
            env_state=collected.env_state,
            obs=collected.obs,
            key=key,
            update_idx=state.update_idx + 1,
            hidden=collected.hidden,
            obs_stats=collected.obs_stats,
            return_stats=collected.return_stats,
            discounted_return=collected.discounted_return,
        )

    def sequence_outputs(self, params, obs, done, start_hidden):
        """Policy outputs over stored (time, env) steps. The MLP maps each step on its own;
        the GRU replays each env's sequence from `start_hidden` with the rollout's resets."""
        if not self.recurrent:
            return self.apply(params, obs)
        return recurrent.replay(self.network, params, start_hidden, obs, done)

    def bootstrap_values(self, params, collected: Collected) -> jax.Array:
        """V of each step's final observation (before auto-reset), shape (time, env); the
        value is only read where the step did not terminate (`returns.gae`)."""
        if self.recurrent:
            return recurrent.bootstrap_values(self.policy_step, params, collected.step_hidden, collected.traj.final_obs)
        traj = collected.traj
        if self.static.num_agents > 1:
            # Vmapped agents would run both branches of the cond below; one pass is cheaper.
            return self.apply(params, traj.final_obs).value
        # Where step t did not end an episode its final observation is obs[t+1], whose value
        # the rollout already computed; only the last step and the truncated steps need the
        # network, and at a few envs a pass over every step is a noticeable share of an update.
        last = self.apply(params, traj.final_obs[-1]).value
        cut = traj.truncated[:-1].reshape(-1)
        if cut.shape[0] == 0:
            return last[None]
        shifted = jnp.concatenate([traj.value[1:], last[None]])
        room = min(cut.shape[0], self.envs_per_device)
        rows = traj.final_obs[:-1].reshape((cut.shape[0],) + traj.final_obs.shape[2:])
        earlier = shifted[:-1].reshape(-1)

        def few_cut(_):
            index = jnp.nonzero(cut, size=room, fill_value=cut.shape[0])[0]
            values = self.apply(params, jnp.take(rows, index, axis=0, mode="clip")).value
            return earlier.at[index].set(values, mode="drop")

        def many_cut(_):
            return jnp.where(cut, self.apply(params, rows).value, earlier)

        earlier = jax.lax.cond(jnp.sum(cut) <= room, few_cut, many_cut, None)
        return jnp.concatenate([earlier.reshape(shifted[:-1].shape), last[None]])

    def _env_ids(self) -> jax.Array:
        first = jax.lax.axis_index(AXIS) * self.envs_per_device
        return first + jnp.arange(self.envs_per_device)

    # --- init -------------------------------------------------------------------------------
    def init(self, key: jax.Array, hp: DynamicHParams) -> TrainState:
        """Same params on every device (same key); envs seeded by their global index."""
        key, params_key, env_key = jax.random.split(key, 3)
        dummy_obs = jnp.zeros((1, self.spec.obs_size), jnp.float32)
        if self.recurrent:
            params = self.network.init(params_key, self.initial_hidden(1), dummy_obs)
        else:
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
            hidden=self.initial_hidden(self.envs_per_device),
            obs_stats=normalize.initial_stats((self.spec.obs_size,)) if self.static.normalize_obs else None,
            return_stats=normalize.initial_stats(()) if self.static.normalize_rewards else None,
            discounted_return=jnp.zeros((self.envs_per_device,), jnp.float32)
            if self.static.normalize_rewards
            else None,
        )

    # --- one gradient step ------------------------------------------------------------------
    def apply_gradients(self, params, opt_state, grads, aux) -> GradientStep:
        """Average `grads` and `aux` over devices (one pmean of the raveled gradient and the
        aux together), then one optimizer step."""
        flat_grads, unravel = jax.flatten_util.ravel_pytree(grads)
        flat_grads, aux = jax.lax.pmean((flat_grads, aux), AXIS)
        grad_norm = jnp.sqrt(jnp.sum(jnp.square(flat_grads)))  # = optax.global_norm(grads)
        updates, opt_state = self.optimizer.update(unravel(flat_grads), opt_state, params)
        return GradientStep(optax.apply_updates(params, updates), opt_state, aux, grad_norm)

    def time_step_minibatches(self, batch, key: jax.Array):
        """`batch` (leaves (time, env, ...)) as `num_minibatches` sets of time steps across all
        envs, leaves (minibatch, time', env, ...). The permutation key is the same on every
        device, so minibatch m on N devices is exactly minibatch m on one device."""
        num_steps, num_mb = self.static.num_steps, self.static.num_minibatches
        perm = jax.random.permutation(key, num_steps)
        return jax.tree.map(
            lambda x: jnp.take(x, perm, axis=0).reshape((num_mb, num_steps // num_mb) + x.shape[1:]), batch
        )

    def train_epochs(self, state: TrainState, hp: DynamicHParams, epoch, key: jax.Array) -> Epochs:
        """`update_epochs` passes of `epoch(carry, key) -> (carry, info)` over the carry
        (params, opt_state), from `state`'s, at the annealed learning rate of this update."""
        lr = annealed_lr(hp, state.update_idx)
        opt_state = set_injected(state.opt_state, learning_rate=lr, max_grad_norm=hp.max_grad_norm)
        (params, opt_state), info = jax.lax.scan(
            epoch, (state.params, opt_state), jax.random.split(key, self.static.update_epochs)
        )
        return Epochs(params, opt_state, info, lr)

    def update(self, state: TrainState, hp: DynamicHParams) -> tuple[TrainState, UpdateMetrics]:
        raise NotImplementedError

    def reward_max(self, traj) -> jax.Array:
        """The largest |reward| in rollout `traj` (as the learner sees it), over every device."""
        return jax.lax.pmax(jnp.max(jnp.abs(traj.reward)).astype(jnp.float32), AXIS)

    def report(self, traj, **values: jax.Array) -> UpdateMetrics:
        """One update's metrics: those of the episodes that ended in its rollout `traj`, and
        `values`, every other trainer metric the algorithm reports (`MetricSpec.algos`); the
        others (another algorithm's own) are NaN."""
        episodes = episode_stats(traj)
        values = dict(values, episode_return=episodes.mean_return, episode_length=episodes.mean_length,
                      episodes=episodes.count)
        reported = {name for name in TRAINER_METRICS if METRIC_SPECS[name].reported_by(self.static.algo)}
        if set(values) != reported:
            raise TypeError(f"{self.static.algo} reports {sorted(reported)}, got {sorted(values)}")
        nan = jnp.full((), jnp.nan, jnp.float32)
        return UpdateMetrics(**{name: values.get(name, nan) for name in TRAINER_METRICS})

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
        empty = UpdateMetrics(
            **{field.name: jnp.full((size,), jnp.nan, jnp.float32) for field in dataclasses.fields(UpdateMetrics)}
        )
        num_updates = jnp.clip(num_updates, 0, size)
        body = functools.partial(self._chunk_body, hp=hp)
        state, buffer = jax.lax.fori_loop(0, num_updates, body, (state, empty))
        return state, ChunkMetrics(per_update=buffer, num_updates=num_updates)
