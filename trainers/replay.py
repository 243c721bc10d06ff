"""What every off-policy trainer shares: a flashbax replay buffer in the training state,
target networks, and gradient steps drawn from the buffer at a replay ratio. The algorithm
(DQN; SAC alike) subclasses `OffPolicyTrainer` and gives its loss; collecting, storing,
sampling, the count of gradient steps and the target update are here.

- The buffer lives in `TrainState.replay`, inside the compiled chunk: adding and sampling
  never leave the device. Each device keeps the transitions of its own envs (a flashbax
  trajectory buffer whose rows are those envs, each holding `rows_per_env` steps) and
  samples `batch_size / devices` of them for each gradient step; the gradients are averaged
  over devices (`apply_gradients`), so every device takes the same step. Under the
  seed/member axis every agent has a buffer of its own.
- A stored transition is what the learner saw (`OnPolicyTrainer.collect`): the observation
  and the one the step reached before any auto-reset, the action, the shaped reward, and
  whether the episode terminated (a time limit is not a termination: it bootstraps).
- Gradient steps per update: `replay_ratio` x the update's env steps, the fraction carried
  to the next update (`ReplayState.credit`), none until the buffer holds `learning_starts`
  transitions (or is full). All three are traced, so live edits apply without recompiling; the steps run
  in a loop of traced length.
- Target networks move `tau` of the way to the online ones after every `target_period`-th
  gradient step (both traced: a hard copy every N steps, or Polyak averaging every step).
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import flashbax
import jax
import jax.flatten_util
import jax.numpy as jnp
from flax import struct

from trainers.base import AXIS, OnPolicyTrainer, annealed_lr, set_injected
from trainers.hparams import DynamicHParams
from trainers.replay_keys import rows_per_env
from trainers.types import TrainState, Transition, UpdateMetrics


@struct.dataclass
class Replayed:
    """One stored transition; leaves (env, time, ...) in the buffer, (batch, ...) sampled."""

    obs: jax.Array
    action: jax.Array
    reward: jax.Array
    next_obs: jax.Array  # the observation the step reached, before any auto-reset
    terminated: jax.Array


@struct.dataclass
class ReplayState:
    """A device's replay buffer and its counters (the counters are the same on every device)."""

    buffer: Any  # flashbax TrajectoryBufferState: experience leaves (env, row, ...)
    credit: jax.Array  # float32: gradient steps due and not yet taken (a fraction of one)
    gradient_steps: jax.Array  # int32: gradient steps taken so far


class Learned(NamedTuple):
    """An update's gradient steps (`OffPolicyTrainer.learn`)."""

    params: Any
    opt_state: Any
    target_params: Any
    replay: ReplayState
    info: Any  # the loss's aux, averaged over the steps (`diagnose`'s where none was taken)
    grad_norm: jax.Array  # mean over the steps (`diagnose`'s where none was taken)
    steps: jax.Array  # int32: gradient steps taken in this update
    lr: jax.Array


def transitions(traj: Transition) -> Replayed:
    """A rollout's steps (leaves (time, env, ...)) as the buffer stores them, (env, time, ...)."""
    stored = Replayed(traj.obs, traj.action, traj.reward, traj.final_obs, traj.terminated)
    return jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), stored)


def target_update(online, target, gradient_steps, hp: DynamicHParams):
    """`target` moved `tau` of the way to `online` where `gradient_steps` (those taken,
    this one included) is a multiple of `target_period`; unchanged otherwise."""
    due = jnp.mod(gradient_steps.astype(jnp.float32), jnp.round(hp.target_period)) == 0
    step = jnp.where(due, hp.tau, 0.0)
    return jax.tree.map(lambda o, t: t + step * (o - t), online, target)


@dataclasses.dataclass(frozen=True)
class OffPolicyTrainer(OnPolicyTrainer):
    """A trainer that learns from a replay buffer; subclasses define `loss(params,
    target_params, batch, hp, key) -> (loss, aux)` (`key`: the gradient step's own, for a
    loss that samples actions) and `own_metrics`, what only they report of an update."""

    @property
    def replay_buffer(self):
        return flashbax.make_trajectory_buffer(
            add_batch_size=self.envs_per_device,
            sample_batch_size=self.static.batch_size // self.num_devices,
            sample_sequence_length=1,
            period=1,
            min_length_time_axis=1,
            max_length_time_axis=rows_per_env(self.static),
        )

    def init(self, key: jax.Array, hp: DynamicHParams) -> TrainState:
        state = super().init(key, hp)
        obs = jnp.zeros((self.spec.obs_size,), jnp.float32)
        action = jnp.zeros((), jnp.int32) if self.spec.discrete else jnp.zeros((self.spec.num_actions,), jnp.float32)
        example = Replayed(obs, action, jnp.zeros((), jnp.float32), obs, jnp.zeros((), bool))
        buffer = self.replay_buffer.init(example)
        # flashbax's counter is weakly typed; a state restored from host arrays is not, and
        # the difference would recompile the chunk.
        buffer = buffer.replace(current_index=jnp.zeros((), jnp.int32))
        replay = ReplayState(buffer, jnp.zeros((), jnp.float32), jnp.zeros((), jnp.int32))
        return state.replace(target_params=jax.tree.map(jnp.copy, state.params), replay=replay)

    def store(self, replay: ReplayState, fresh: Replayed) -> ReplayState:
        """`replay` with `fresh` (a rollout's `transitions`) added."""
        buffer = self.replay_buffer.add(replay.buffer, fresh)
        return replay.replace(buffer=buffer.replace(current_index=buffer.current_index.astype(jnp.int32)))

    def stored(self, replay: ReplayState) -> jax.Array:
        """Transitions in the buffer, over all envs (float32)."""
        rows = rows_per_env(self.static)
        per_env = jnp.where(replay.buffer.is_full, rows, replay.buffer.current_index)
        return (per_env * self.static.num_envs).astype(jnp.float32)

    def fill(self, replay: ReplayState) -> jax.Array:
        return self.stored(replay) / (rows_per_env(self.static) * self.static.num_envs)

    def steps_due(self, replay: ReplayState, hp: DynamicHParams) -> tuple[jax.Array, jax.Array]:
        """(gradient steps to take now, credit left): none before the buffer holds
        `learning_starts` transitions, or is full (a `learning_starts` beyond the buffer's
        capacity would otherwise never be reached)."""
        capacity = float(rows_per_env(self.static) * self.static.num_envs)
        started = self.stored(replay) >= jnp.minimum(hp.learning_starts, capacity)
        credit = replay.credit + jnp.where(started, hp.replay_ratio * self.static.steps_per_update, 0.0)
        steps = jnp.floor(credit)
        return steps.astype(jnp.int32), credit - steps

    def sample(self, replay: ReplayState, key: jax.Array) -> Replayed:
        """This device's share of one gradient step's batch: its own key, its own envs."""
        key = jax.random.fold_in(key, jax.lax.axis_index(AXIS))
        experience = self.replay_buffer.sample(replay.buffer, key).experience
        return jax.tree.map(lambda x: x[:, 0], experience)

    def loss_key(self, key: jax.Array) -> jax.Array:
        """The loss's key for a gradient step whose batch `sample` draws with `key`: folded with
        the device count, which no device's own fold (its index) reaches, so the two never
        coincide; the same on every device."""
        return jax.random.fold_in(key, self.num_devices)

    def loss(self, params, target_params, batch: Replayed, hp: DynamicHParams, key: jax.Array):
        raise NotImplementedError

    def learn(self, state: TrainState, hp: DynamicHParams, key: jax.Array, fresh: Replayed) -> Learned:
        """The gradient steps due (`steps_due`) on batches sampled from `state.replay`, each
        followed by the target update, at the annealed learning rate of this update; `fresh`,
        the update's own transitions, give the diagnostics of an update that takes none."""
        lr = annealed_lr(hp, state.update_idx)
        opt_state = set_injected(state.opt_state, learning_rate=lr, max_grad_norm=hp.max_grad_norm)
        steps, credit = self.steps_due(state.replay, hp)
        # The loss's aux structure, from a batch of one row per env (traced only, never run).
        probe = jax.tree.map(lambda x: x[:, 0], state.replay.buffer.experience)
        info_shape = jax.eval_shape(lambda: self.loss(state.params, state.target_params, probe, hp, key)[1])
        zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, jnp.float32), info_shape)

        def step(i, carry):
            params, opt_state, target, taken, info_sum, norm_sum = carry
            step_key = jax.random.fold_in(key, i)
            batch = self.sample(state.replay, step_key)
            (_, info), grads = jax.value_and_grad(self.loss, has_aux=True)(
                params, target, batch, hp, self.loss_key(step_key))
            stepped = self.apply_gradients(params, opt_state, grads, info)
            taken = taken + 1
            target = target_update(stepped.params, target, taken, hp)
            info_sum = jax.tree.map(lambda s, x: s + x.astype(jnp.float32), info_sum, stepped.aux)
            return stepped.params, stepped.opt_state, target, taken, info_sum, norm_sum + stepped.grad_norm

        def learning(carry):
            params, opt_state, target, taken, info_sum, norm_sum = jax.lax.fori_loop(0, steps, step, carry)
            # At least one: a vmapped cond runs both branches for every agent.
            mean = lambda total: total / jnp.maximum(steps, 1).astype(jnp.float32)
            return params, opt_state, target, taken, jax.tree.map(mean, info_sum), mean(norm_sum)

        # Before learning starts (or at a ratio that leaves an update without a step) the
        # diagnostics are of the update's own transitions at the current parameters, nothing
        # applied: finite, so that the divergence guard reads only a diverged run's values as
        # non-finite, and a few rows, so that an update without a step stays cheap. The
        # choice is one `lax.cond` around the loop: read after the loop, the parameters it
        # starts from would have to be copied before it, at every update.
        def idle(carry):
            params, opt_state, target, taken, _, _ = carry
            info, grad_norm = self.diagnose(params, target, fresh, key, hp)
            return params, opt_state, target, taken, info, grad_norm

        carry = (state.params, opt_state, state.target_params, state.replay.gradient_steps, zeros, jnp.float32(0))
        params, opt_state, target, taken, info, grad_norm = jax.lax.cond(steps > 0, learning, idle, carry)
        replay = state.replay.replace(credit=credit, gradient_steps=taken)
        return Learned(params, opt_state, target, replay, info, grad_norm, steps, lr)

    def diagnose(self, params, target_params, fresh: Replayed, key: jax.Array, hp: DynamicHParams):
        """The loss's aux and the gradient norm on `fresh` (transitions with leaves (env, time,
        ...), as `transitions` gives them; at most a sampled batch's rows of them), averaged
        over devices."""
        rows = self.static.batch_size // self.num_devices
        # Time-major before the cut, so that a cut keeps every env's first steps.
        batch = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1).reshape((-1, *x.shape[2:]))[:rows], fresh)
        (_, info), grads = jax.value_and_grad(self.loss, has_aux=True)(
            params, target_params, batch, hp, self.loss_key(key))
        flat_grads, _ = jax.flatten_util.ravel_pytree(grads)
        flat_grads, info = jax.lax.pmean((flat_grads, info), AXIS)
        return jax.tree.map(lambda x: x.astype(jnp.float32), info), jnp.sqrt(jnp.sum(jnp.square(flat_grads)))

    def update(self, state: TrainState, hp: DynamicHParams) -> tuple[TrainState, UpdateMetrics]:
        """Collect a rollout, store it, take the gradient steps due, report."""
        key, rollout_key, learn_key = jax.random.split(state.key, 3)
        collected = self.collect(state, rollout_key, hp)
        fresh = transitions(collected.traj)
        replay = self.store(state.replay, fresh)
        learned = self.learn(state.replace(replay=replay), hp, learn_key, fresh)
        metrics = self.report(
            collected.traj,
            td_loss=learned.info.td_loss,
            q_mean=learned.info.q_mean,
            reward_max=self.reward_max(collected.traj),
            grad_norm=learned.grad_norm,
            lr=learned.lr,
            buffer_fill=self.fill(learned.replay),
            gradient_steps=learned.replay.gradient_steps.astype(jnp.float32),
            **self.own_metrics(state, learned, hp),
        )
        next_state = self.next_state(state, collected, learned.params, learned.opt_state, key)
        return next_state.replace(target_params=learned.target_params, replay=learned.replay), metrics

    def own_metrics(self, state: TrainState, learned: Learned, hp: DynamicHParams) -> dict[str, jax.Array]:
        """The metrics of an update only this algorithm reports, from the state the update
        started from and what it learned; `update` reports the shared ones."""
        raise NotImplementedError
