"""The session's view of a trainer: build once, then run chunks of updates.

`JaxBackend` adapts `trainers` (pure JAX) to this interface; tests use a pure-Python fake.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from rltui.session.recent import Recent, is_builtin_env
from trainers.hparams import DynamicHParams
from trainers.metrics_spec import METRIC_SPECS


class TrainingBackend(Protocol):
    steps_per_update: int
    max_chunk_updates: int

    def build(self, hparams: DynamicHParams) -> None:
        """Create the trainer, initialise its state and compile. May take seconds."""

    def run_chunk(self, num_updates: int, hparams: DynamicHParams, active: Any = None) -> list[dict[str, Any]]:
        """Run `num_updates` updates; return one dict of host floats per update (with
        several agents: their mean, and each agent's values under "per_seed"). A population
        passes one value per agent in `hparams` and the mask of agents to update in `active`;
        its rows also say, under "healthy", which agents' states stayed finite."""

    def describe(self) -> dict[str, Any]:
        """Static facts for display and the run files (devices, env, algorithm)."""

    def encode_checkpoint(self, metadata: dict[str, Any]) -> bytes:
        """The full training state plus `metadata` as bytes; NonFiniteState if it holds NaN/inf."""

    def restore_checkpoint(self, data: bytes) -> dict[str, Any]:
        """Replace the training state with a checkpoint's; return its metadata."""


def seed_row(per_seed: dict[str, np.ndarray]) -> dict[str, Any]:
    """One update of several agents: each metric combined over the seeds as its declaration
    says (`MetricSpec.combine`: episode statistics over the seeds that finished an episode;
    the total episode count; otherwise the mean, where a NaN anywhere stays NaN, so the
    divergence guard sees it), plus every seed's own value under "per_seed"."""
    row: dict[str, Any] = {}
    for name, values in per_seed.items():
        values = values.astype(np.float64)
        combine = METRIC_SPECS[name].combine
        if combine == "sum":
            row[name] = float(values.sum())
        elif combine == "finite_mean":
            finite = values[np.isfinite(values)]
            row[name] = float(finite.mean()) if finite.size else math.nan
        else:
            row[name] = float(values.mean())
    row["per_seed"] = {name: tuple(float(v) for v in values) for name, values in per_seed.items()}
    return row


# Trainers already built in this process, by static config and devices: another session on
# the same config (`rltui.train` called again in a notebook, a resume from Python) takes the
# compiled program as it is. Each holds its compiled programs' memory, so only two are kept.
_TRAINERS = Recent(keep=2)


def _built_trainer(static, devices: list) -> Any:
    """The data-parallel trainer for `static` over `devices`: built, or the one built before
    (built-in envs only: `recent.is_builtin_env`)."""
    from trainers import parallel

    if not is_builtin_env(static.env_id):
        return parallel.build(static, devices)
    return _TRAINERS.get_or_make((static, tuple(devices)), lambda: parallel.build(static, devices))


class NonFiniteState(ValueError):
    """The training state holds NaN or inf: it must not be saved over a good checkpoint."""


class JaxBackend:
    """Runs the config's trainer (`trainers.algorithms`) data-parallel over `devices`; the only place the session
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
        # The last checkpoint restored held no replay buffer (`replay_in_checkpoint = false`).
        self.replay_left_out = False

    def build(self, hparams: DynamicHParams) -> None:
        self._parallel = _built_trainer(self.static, self.devices)
        self._state = self._parallel.init(self._parallel.seed_keys(self.seed), hparams)
        # A trainer built before has its program: compiling again finds it in JAX's caches.
        self._parallel.compile(self._state, hparams)

    def run_chunk(self, num_updates: int, hparams: DynamicHParams, active: Any = None) -> list[dict[str, Any]]:
        self._state, metrics = self._parallel.run_chunk(self._state, hparams, num_updates, active)
        per_update = {name: np.asarray(value) for name, value in vars(metrics.per_update).items()}
        count = int(np.max(metrics.num_updates))
        if self.static.num_agents == 1:
            columns = {name: value[:count].tolist() for name, value in per_update.items()}
            return [{name: column[i] for name, column in columns.items()} for i in range(count)]
        rows = [seed_row({name: value[:, i] for name, value in per_update.items()}) for i in range(count)]
        if metrics.healthy is not None and rows:
            rows[-1]["healthy"] = tuple(bool(h) for h in np.asarray(metrics.healthy))
        return rows

    def clone(self, source) -> None:
        """A population: agent a takes over what agent source[a] learned (`DataParallel.clone`)."""
        self._state = self._parallel.clone(self._state, source)

    def encode_checkpoint(self, metadata: dict[str, Any]) -> bytes:
        import jax

        from trainers import checkpoint, replay_rows
        from trainers.replay_keys import rows_per_env

        state, capacity = self._state, None
        if state.replay is not None:
            capacity = rows_per_env(self.static)
            if not self.static.replay_in_checkpoint:
                # Stored as a buffer that holds nothing, with its counters: a resume refills it
                # and counts its gradient steps on from where they were.
                state = state.replace(replay=replay_rows.emptied(state.replay))
                metadata = {**metadata, checkpoint.REPLAY_LEFT_OUT: True}
            # Only the filled rows are copied (`to_portable` copies what it is given): cut from
            # the host's view of the buffer, which on a CPU is the device's memory itself. A
            # cut on the device would compile a new slice for every fill.
            state = state.replace(replay=replay_rows.filled_part(jax.device_get(state.replay), capacity)[0])
        portable = self._parallel.to_portable(state)
        if not checkpoint.is_finite(portable):
            raise NonFiniteState("the training state holds non-finite values")
        return checkpoint.encode(portable, metadata, replay_capacity=capacity)

    def restore_checkpoint(self, data: bytes) -> dict[str, Any]:
        from trainers import checkpoint

        template = self._parallel.to_portable(self._state)
        restored, metadata = checkpoint.decode(data, template)
        # A checkpoint saved without its replay buffer holds an empty one and the counters (or,
        # written by an older rltui, nothing: `checkpoint.decode` keeps the template's replay).
        # Either way the buffer is this state's own: a fresh run's on a resume, which training
        # refills; on a rollback the live one, as it stands.
        self.replay_left_out = template.replay is not None and (
            restored.replay is template.replay or metadata.get(checkpoint.REPLAY_LEFT_OUT) is True)
        if self.replay_left_out:
            restored = restored.replace(replay=restored.replay.replace(buffer=template.replay.buffer))
        self._state = self._parallel.put(self._parallel.from_portable(restored), like=self._state)
        return metadata

    def params_digest(self) -> str:
        """SHA-256 of the parameters (one replica): equal digests, equal agents; a
        multi-process run prints it on every process."""
        import hashlib

        import jax

        digest = hashlib.sha256()
        for leaf in jax.tree.leaves(jax.device_get(self._state.params)):
            digest.update(np.ascontiguousarray(np.asarray(leaf)[0]).tobytes())
        return digest.hexdigest()

    def acting_params(self):
        """The acting parameters and observation statistics (one replica) as host NumPy
        copies, for the watch view. The session thread calls it between chunks: the chunk
        donates the state's buffers, and on CPU `device_get` may alias them."""
        import jax

        acting = (self._state.params, self._state.obs_stats)
        return jax.tree.map(lambda x: np.array(np.asarray(x)[0], copy=True), jax.device_get(acting))

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
            "num_seeds": self.static.num_seeds,
            "num_members": self.static.num_members,
            "static": dataclasses.asdict(self.static),
            # known once the trainer is built (its env spec)
            **({"actions": self._parallel.trainer.spec.action_kind} if self._parallel is not None else {}),
        }
