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
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import numpy as np

from trainers import checkpoint
from trainers.algos import make_trainer
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
        init, run_chunk = trainer.init, trainer.run_chunk
        if self.num_seeds > 1:
            run_chunk = jax.vmap(run_chunk, in_axes=(0, None, None))
        self._init = jax.pmap(
            lambda _, key, hp: init(key, hp), axis_name=AXIS, in_axes=(0, None, None), devices=self.devices
        )
        self._stack_seeds = jax.pmap(
            lambda agents: jax.tree.map(lambda *xs: jax.numpy.stack(xs), *agents), axis_name=AXIS, devices=self.devices
        )
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
        """The initial key of each agent: PRNGKey(seed), or one per seed stacked."""
        if self.num_seeds == 1:
            return jax.random.PRNGKey(seed)
        return jax.numpy.stack([jax.random.PRNGKey(seed + i) for i in range(self.num_seeds)])

    def init(self, key: jax.Array, hp: DynamicHParams) -> TrainState:
        """`key` comes from `seed_keys`. Several seeds are initialised one at a time by
        the single-agent program, then stacked on the devices: a vmapped init (the
        orthogonal initialisers run batched QR decompositions) has been seen to stall the
        2-core CPU client, and init runs once, so the loop costs nothing."""
        if self.num_seeds == 1:
            return self._init(self._device_index, key, hp)
        agents = [jax.block_until_ready(self._init(self._device_index, k, hp)) for k in key]
        return self._stack_seeds(agents)

    def run_chunk(self, state: TrainState, hp: DynamicHParams, num_updates: int) -> tuple[TrainState, ChunkMetrics]:
        """Returns the new (device-resident) state and the metrics as host arrays: leaves of
        shape (max_chunk_updates,), or (num_seeds, max_chunk_updates). They were reduced over
        the device axis, so device 0's are everyone's. Fetching them is the chunk's one host
        sync; slicing on the host avoids a dispatch per metric."""
        state, metrics = self._run_chunk(state, hp, np.int32(num_updates))
        return state, jax.tree.map(lambda x: np.asarray(x)[0], jax.device_get(metrics))

    def compile(self, state: TrainState, hp: DynamicHParams) -> None:
        """Compile the chunk program ahead of the first call, so the caller can time it."""
        self._run_chunk.lower(state, hp, np.int32(1)).compile()

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
