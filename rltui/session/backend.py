"""The session's view of a trainer: build once, then run chunks of updates.

`JaxBackend` adapts `trainers` (pure JAX) to this interface; tests use a pure-Python fake.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol, Sequence

from trainers.hparams import DynamicHParams


class TrainingBackend(Protocol):
    steps_per_update: int
    max_chunk_updates: int

    def build(self, hparams: DynamicHParams) -> None:
        """Create the trainer, initialise its state and compile. May take seconds."""

    def run_chunk(self, num_updates: int, hparams: DynamicHParams) -> list[dict[str, float]]:
        """Run `num_updates` updates; return one dict of host floats per update."""

    def describe(self) -> dict[str, Any]:
        """Static facts for display and the run files (devices, env, algorithm)."""

    def encode_checkpoint(self, metadata: dict[str, Any]) -> bytes:
        """The full training state plus `metadata` as bytes; NonFiniteState if it holds NaN/inf."""

    def restore_checkpoint(self, data: bytes) -> dict[str, Any]:
        """Replace the training state with a checkpoint's; return its metadata."""


class NonFiniteState(ValueError):
    """The training state holds NaN or inf: it must not be saved over a good checkpoint."""


class JaxBackend:
    """Runs the config's trainer (`trainers.algos`) data-parallel over `devices`; the only place the session
    touches JAX. One host transfer (`device_get`) per chunk."""

    def __init__(self, static, seed: int, devices: Sequence[Any] | None = None):
        import jax

        self.static = static
        self.seed = seed
        self.devices = list(devices) if devices is not None else jax.local_devices()[:1]
        self.steps_per_update = static.steps_per_update
        self.max_chunk_updates = static.max_chunk_updates
        self._parallel = None
        self._state = None

    def build(self, hparams: DynamicHParams) -> None:
        import jax

        from trainers.parallel import DataParallel
        from trainers.algos import make_trainer

        trainer = make_trainer(self.static, num_devices=len(self.devices))
        self._parallel = DataParallel(trainer, self.devices)
        self._state = self._parallel.init(jax.random.PRNGKey(self.seed), hparams)
        self._parallel.compile(self._state, hparams)

    def run_chunk(self, num_updates: int, hparams: DynamicHParams) -> list[dict[str, float]]:
        import jax

        self._state, metrics = self._parallel.run_chunk(self._state, hparams, num_updates)
        host = jax.device_get(metrics)
        count = int(host.num_updates)
        columns = {name: value[:count].tolist() for name, value in vars(host.per_update).items()}
        return [{name: column[i] for name, column in columns.items()} for i in range(count)]

    def encode_checkpoint(self, metadata: dict[str, Any]) -> bytes:
        from trainers import checkpoint

        portable = checkpoint.to_portable(self._state)
        if not checkpoint.is_finite(portable):
            raise NonFiniteState("the training state holds non-finite values")
        return checkpoint.encode(portable, metadata)

    def restore_checkpoint(self, data: bytes) -> dict[str, Any]:
        from trainers import checkpoint

        template = checkpoint.to_portable(self._state)
        restored, metadata = checkpoint.decode(data, template)
        self._state = self._parallel.put(checkpoint.from_portable(restored, len(self.devices)), like=self._state)
        return metadata

    @property
    def train_state(self):
        """The device-resident state (for checkpoints and evaluation)."""
        return self._state

    def describe(self) -> dict[str, Any]:
        return {
            "env": self.static.env_id,
            "algo": self.static.algo,
            "devices": [f"{d.platform}:{d.id}" for d in self.devices],
            "device_kind": self.devices[0].device_kind if self.devices else "none",
            "static": dataclasses.asdict(self.static),
        }
