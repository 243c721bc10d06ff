"""The only module that knows about devices: data parallelism with `jax.pmap`.

Environments are split evenly over the devices, params and optimizer state are
replicated, and the trainer averages gradients with `lax.pmean` over `AXIS`. A single
device runs the same pmapped program with an axis of size one. In a multi-process run
(`jax.distributed`) the devices are every process's; each process holds and feeds only its
own devices' slices, and checkpoints gather the others' environment slices.

With `static.num_seeds > 1` the trainer is `vmap`ped over a seed axis inside the device
map: every leaf of the state and metrics gains a seed axis after the device axis, each
agent's gradients are averaged over devices on its own, and the hyperparameters are shared
(an edit reaches every seed). Agent i starts from `PRNGKey(seed + i)`, so it is the agent a
single-seed run with seed `seed + i` would train, up to float rounding (which a long run
amplifies until the two part ways).

A population (`static.num_members > 1`) widens that axis to members x seeds agents,
member-major, and gives every hyperparameter a value per agent (`in_axes=0`): member m's
seed s is the agent a single run with member m's values and seed `seed + s` would train.
Its chunk also takes an `active` mask: a frozen agent's state is kept as it was, and so is
the state of an agent whose update went non-finite (reported in `ChunkMetrics.healthy`),
so one diverging member never spoils the population's checkpoint.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import numpy as np

from trainers import checkpoint
from trainers.algorithms import make_trainer
from trainers.base import AXIS, OnPolicyTrainer
from trainers.hparams import DynamicHParams, StaticConfig
from trainers.types import ChunkMetrics, TrainState


class DevicesError(ValueError):
    pass


def build(static: StaticConfig, devices: Sequence[jax.Device]) -> DataParallel:
    """The trainer for `static`, laid out over `devices`."""
    return DataParallel(make_trainer(static, len(devices)), devices)


class DataParallel:
    def __init__(self, trainer: OnPolicyTrainer, devices: Sequence[jax.Device] | None = None):
        self.devices = list(devices) if devices is not None else jax.local_devices()
        if trainer.num_devices != len(self.devices):
            raise DevicesError(f"trainer built for {trainer.num_devices} devices, given {len(self.devices)}")
        self.trainer = trainer
        self.num_seeds = trainer.static.num_seeds
        self.num_members = trainer.static.num_members
        self.num_agents = trainer.static.num_agents
        init, run_chunk = trainer.init, trainer.run_chunk
        self._init = jax.pmap(
            lambda _, key, hp: init(key, hp), axis_name=AXIS, in_axes=(0, None, None), devices=self.devices
        )
        self._stack_seeds = jax.pmap(
            lambda agents: jax.tree.map(lambda *xs: jax.numpy.stack(xs), *agents), axis_name=AXIS, devices=self.devices
        )
        if self.num_members > 1:
            self._run_chunk = jax.pmap(
                _population_chunk(run_chunk), axis_name=AXIS, in_axes=(0, None, None, None), donate_argnums=(0,),
                devices=self.devices,
            )
            self._clone = jax.pmap(_clone_agents, axis_name=AXIS, in_axes=(0, None), donate_argnums=(0,),
                                   devices=self.devices)
        else:
            if self.num_seeds > 1:
                run_chunk = jax.vmap(run_chunk, in_axes=(0, None, None))
            self._run_chunk = jax.pmap(
                run_chunk, axis_name=AXIS, in_axes=(0, None, None), donate_argnums=(0,), devices=self.devices
            )
        # pmap's inputs and outputs are this process's slices only.
        self.local_count = sum(d.process_index == jax.process_index() for d in self.devices)
        self._device_index = np.arange(self.local_count)

    @property
    def num_devices(self) -> int:
        return len(self.devices)

    def seed_keys(self, seed: int) -> jax.Array:
        """The initial key of each agent: PRNGKey(seed), or one per agent stacked (agent
        `m * num_seeds + s` starts from `PRNGKey(seed + s)`: every member sees the same seeds)."""
        if self.num_agents == 1:
            return jax.random.PRNGKey(seed)
        seeds = [seed + s for _ in range(self.num_members) for s in range(self.num_seeds)]
        return jax.numpy.stack([jax.random.PRNGKey(s) for s in seeds])

    def init(self, key: jax.Array, hp: DynamicHParams) -> TrainState:
        """`key` comes from `seed_keys`; a population's `hp` holds a value per agent.
        Several agents are initialised one at a time by the single-agent program, then
        stacked on the devices: a vmapped init (the orthogonal initialisers run batched QR
        decompositions) has been seen to stall the 2-core CPU client, and init runs once."""
        if self.num_agents == 1:
            return self._init(self._device_index, key, hp)
        # A population's values per agent; scalars (a template for a checkpoint) serve every agent.
        agent_hp = lambda i: jax.tree.map(lambda x: x[i] if np.ndim(x) else x, hp)
        agents = [jax.block_until_ready(self._init(self._device_index, k, agent_hp(i))) for i, k in enumerate(key)]
        return self._stack_seeds(agents)

    def run_chunk(
        self, state: TrainState, hp: DynamicHParams, num_updates: int, active: np.ndarray | None = None
    ) -> tuple[TrainState, ChunkMetrics]:
        """Returns the new (device-resident) state and the metrics as host arrays: leaves of
        shape (max_chunk_updates,), or (num_agents, max_chunk_updates). They were reduced over
        the device axis, so device 0's are everyone's. Fetching them is the chunk's one host
        sync; slicing on the host avoids a dispatch per metric. A population also takes
        `active` (one bool per agent; None: all)."""
        state, metrics = self._run_chunk(*self._chunk_args(state, hp, active, num_updates))
        return state, jax.tree.map(lambda x: np.asarray(x)[0], jax.device_get(metrics))

    def _chunk_args(self, state, hp, active, num_updates: int) -> tuple:
        if self.num_members > 1:
            return state, hp, self._active(active), np.int32(num_updates)
        return state, hp, np.int32(num_updates)

    def clone(self, state: TrainState, source: Sequence[int]) -> TrainState:
        """A population's state in which agent `a` holds what agent `source[a]` learned
        (parameters, optimizer and normalisation statistics); its envs, key and counter
        stay its own. One small program, compiled on first use; the chunk is not recompiled."""
        source = np.asarray(source, np.int32)
        if source.shape != (self.num_agents,):
            raise ValueError(f"clone: expected {self.num_agents} source indices, got shape {source.shape}")
        return self._clone(state, source)

    def _active(self, active) -> np.ndarray:
        return np.ones(self.num_agents, bool) if active is None else np.asarray(active, bool)

    def compile(self, state: TrainState, hp: DynamicHParams) -> None:
        """Compile the chunk program ahead of the first call, so the caller can time it."""
        self._run_chunk.lower(*self._chunk_args(state, hp, None, 1)).compile()

    def put(self, stacked, like):
        """Place host arrays with a leading device axis onto the devices, one slice each,
        with the shardings of `like` (a state from this trainer): the same shardings reuse the
        compiled chunk, others would recompile it."""
        return jax.tree.map(lambda x, ref: jax.device_put(x, ref.sharding), stacked, like)

    def to_portable(self, state: TrainState) -> TrainState:
        """The device-count independent host state that checkpoints hold. With several
        processes every one of them must call this (it is a collective)."""
        if self.local_count < self.num_devices:
            from jax.experimental import multihost_utils

            # Slices in process order, which is the device order of `jax.devices()` and so of the map.
            state = multihost_utils.process_allgather(state, tiled=True)
        return checkpoint.to_portable(state)

    def from_portable(self, portable: TrainState) -> TrainState:
        """Host arrays laid out for these devices, ready for `put`."""
        return checkpoint.from_portable(portable, self.num_devices)

    @staticmethod
    def unreplicate(tree):
        return jax.tree.map(lambda x: x[0], tree)


# Fields a clone copies: what the agent learned. Env state, key, counter and replay buffer
# stay the target's.
_LEARNED = ("params", "opt_state", "obs_stats", "return_stats", "target_params")


def _all_finite(tree) -> jax.Array:
    leaves = [jax.numpy.all(jax.numpy.isfinite(x)) for x in jax.tree.leaves(tree)
              if jax.numpy.issubdtype(x.dtype, jax.numpy.floating)]
    return jax.numpy.all(jax.numpy.stack(leaves)) if leaves else jax.numpy.bool_(True)


def _population_chunk(run_chunk):
    """`run_chunk` over the agent axis with a value of every hyperparameter per agent; an
    agent inactive, or whose new parameters or optimizer state are non-finite, keeps its old state."""
    per_agent = jax.vmap(run_chunk, in_axes=(0, 0, None))

    def chunk(state, hp, active, num_updates):
        new, metrics = per_agent(state, hp, num_updates)
        healthy = jax.vmap(lambda s: _all_finite((s.params, s.opt_state)))(new)
        keep = jax.numpy.logical_and(active, healthy)
        pick = lambda n, o: jax.numpy.where(keep.reshape(keep.shape + (1,) * (n.ndim - 1)), n, o)
        return jax.tree.map(pick, new, state), metrics.replace(healthy=healthy)

    return chunk


def _clone_agents(state: TrainState, source) -> TrainState:
    take = lambda x: jax.numpy.take(x, source, axis=0)
    return state.replace(**{name: jax.tree.map(take, getattr(state, name)) for name in _LEARNED})
