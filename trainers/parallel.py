"""The only module that knows about devices: data parallelism with `jax.pmap`.

Environments are split evenly over the local devices, params and optimizer state are
replicated, and the trainer averages gradients with `lax.pmean` over `AXIS`. A single
device runs the same pmapped program with an axis of size one.
"""

from __future__ import annotations

from typing import Sequence

import jax
import numpy as np

from trainers.hparams import DynamicHParams
from trainers.base import AXIS, OnPolicyTrainer
from trainers.types import ChunkMetrics, TrainState


class DevicesError(ValueError):
    pass


class DataParallel:
    def __init__(self, trainer: OnPolicyTrainer, devices: Sequence[jax.Device] | None = None):
        self.devices = list(devices) if devices is not None else jax.local_devices()
        if trainer.num_devices != len(self.devices):
            raise DevicesError(f"trainer built for {trainer.num_devices} devices, given {len(self.devices)}")
        self.trainer = trainer
        n = len(self.devices)
        self._init = jax.pmap(
            lambda _, key, hp: trainer.init(key, hp), axis_name=AXIS, in_axes=(0, None, None), devices=self.devices
        )
        self._run_chunk = jax.pmap(
            trainer.run_chunk, axis_name=AXIS, in_axes=(0, None, None), donate_argnums=(0,), devices=self.devices
        )
        self._device_index = np.arange(n)

    @property
    def num_devices(self) -> int:
        return len(self.devices)

    def init(self, key: jax.Array, hp: DynamicHParams) -> TrainState:
        return self._init(self._device_index, key, hp)

    def run_chunk(self, state: TrainState, hp: DynamicHParams, num_updates: int) -> tuple[TrainState, ChunkMetrics]:
        """Returns the new (device-resident) state and, as host arrays, the metrics of device
        0, which are identical on every device because they were reduced over the device
        axis. Fetching them is the chunk's one host sync; slicing on the host avoids a
        dispatch per metric."""
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

    @staticmethod
    def unreplicate(tree):
        return jax.tree.map(lambda x: x[0], tree)
