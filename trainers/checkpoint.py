"""Training state <-> bytes: flax msgpack serialization (never pickle) plus metadata.

The state is stored device-count independent: params, optimizer state, RNG key and counter
once (they are identical on every device), environment states, observations and (recurrent
networks) hidden states merged along a global env axis. A file is one msgpack map:

    {"format": "rltui-checkpoint", "version": 1, "metadata": <JSON text>,
     "sha256": <hex digest of state>, "state": <flax msgpack bytes>}

so `rltui info` can read the metadata without touching the arrays, and corruption inside
the arrays is caught by the digest.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import jax
import msgpack
import numpy as np
from flax import serialization

from trainers.types import TrainState

FORMAT = "rltui-checkpoint"
VERSION = 1


class CheckpointError(ValueError):
    """A checkpoint that cannot be used; the message says why in one line."""


# Fields identical on every device (stored once); every other field has an env axis.
_REPLICATED = ("params", "opt_state", "key", "update_idx", "obs_stats", "return_stats")


def _is_seeded(update_idx) -> bool:
    """A vmapped-seeds state has a seed axis on every leaf, the scalar counter included."""
    return np.ndim(update_idx) > 0


def to_portable(state: TrainState) -> TrainState:
    """Device-stacked state (leading device axis, then a seed axis when several agents train
    at once) -> host state with one global env axis (after the seed axis, if any)."""
    # Copies: on CPU, device_get may alias device buffers that a donating call later reuses.
    host = jax.tree.map(lambda x: np.array(x, copy=True), jax.device_get(state))
    seeded = _is_seeded(np.asarray(host.update_idx)[0])

    def merge_envs(x):
        x = np.asarray(x)
        if seeded:  # (devices, seeds, envs, ...) -> (seeds, devices * envs, ...)
            x = np.moveaxis(x, 0, 1)
            return x.reshape((x.shape[0], x.shape[1] * x.shape[2]) + x.shape[3:])
        return x.reshape((x.shape[0] * x.shape[1],) + x.shape[2:])

    first = lambda x: np.asarray(x)[0]  # noqa: E731
    return _map_fields(host, replicated=first, per_env=merge_envs)


def from_portable(portable: TrainState, num_devices: int) -> TrainState:
    """Host portable state -> host arrays with a leading device axis, ready to place."""
    seeded = _is_seeded(portable.update_idx)

    def split_envs(x):  # a copy: placed arrays may alias host memory that training donates
        x = np.array(x, copy=True)
        if seeded:  # (seeds, envs, ...) -> (devices, seeds, envs / devices, ...)
            x = x.reshape((x.shape[0], num_devices, x.shape[1] // num_devices) + x.shape[2:])
            return np.ascontiguousarray(np.moveaxis(x, 1, 0))
        return x.reshape((num_devices, x.shape[0] // num_devices) + x.shape[1:])

    replicate = lambda x: np.stack([np.asarray(x)] * num_devices)  # noqa: E731
    return _map_fields(portable, replicated=replicate, per_env=split_envs)


def _map_fields(state: TrainState, *, replicated, per_env) -> TrainState:
    fields = {}
    for name in state.__dataclass_fields__:
        fn = replicated if name in _REPLICATED else per_env
        fields[name] = jax.tree.map(fn, getattr(state, name))
    return TrainState(**fields)


def encode(portable: TrainState, metadata: dict[str, Any]) -> bytes:
    state_bytes = serialization.msgpack_serialize(serialization.to_state_dict(portable))
    return msgpack.packb(
        {
            "format": FORMAT,
            "version": VERSION,
            "metadata": json.dumps(metadata, sort_keys=True),
            "sha256": hashlib.sha256(state_bytes).hexdigest(),
            "state": state_bytes,
        },
        use_bin_type=True,
    )


def _unpack(data: bytes) -> dict[str, Any]:
    try:
        outer = msgpack.unpackb(data, raw=False, strict_map_key=True)
    except Exception as err:  # msgpack raises several types for truncated/garbage input
        raise CheckpointError("not a readable checkpoint: truncated, damaged, or not a checkpoint at all") from None
    if not isinstance(outer, dict) or outer.get("format") != FORMAT:
        raise CheckpointError("not an rltui checkpoint")
    version = outer.get("version")
    if not isinstance(version, int) or version > VERSION:
        raise CheckpointError(
            f"checkpoint format version {version} is newer than this rltui understands ({VERSION}); upgrade rltui"
        )
    for field, kind in (("metadata", str), ("sha256", str), ("state", bytes)):
        if not isinstance(outer.get(field), kind):
            raise CheckpointError(f"checkpoint is missing its {field}")
    return outer


def verify(data: bytes) -> dict[str, Any]:
    """Check format, version and the state's checksum without restoring arrays; return the
    metadata. Raises CheckpointError."""
    outer = _unpack(data)
    if hashlib.sha256(outer["state"]).hexdigest() != outer["sha256"]:
        raise CheckpointError("checkpoint is corrupted (checksum mismatch)")
    return read_metadata(data)


def read_metadata(data: bytes) -> dict[str, Any]:
    outer = _unpack(data)
    try:
        return json.loads(outer["metadata"])
    except ValueError:
        raise CheckpointError("checkpoint metadata is corrupted") from None


def decode(data: bytes, template: TrainState) -> tuple[TrainState, dict[str, Any]]:
    """Restore into the structure of `template` (a portable state of the same trainer);
    shapes and dtypes must match exactly."""
    outer = _unpack(data)
    metadata = verify(data)
    try:
        state_dict = serialization.msgpack_restore(outer["state"])
        # Written before recurrent networks or normalisation existed: those fields are off.
        if isinstance(state_dict, dict):
            for field in ("hidden", "obs_stats", "return_stats", "discounted_return"):
                state_dict.setdefault(field, None)
        restored = serialization.from_state_dict(template, state_dict)
    except Exception as err:
        raise CheckpointError(f"checkpoint does not fit this trainer: {err}") from None
    _check_shapes(template, restored)
    return restored, metadata


def _check_shapes(template: TrainState, restored: TrainState) -> None:
    want = jax.tree_util.tree_leaves_with_path(template)
    got = jax.tree.leaves(restored)
    if len(want) != len(got):
        raise CheckpointError("checkpoint does not fit this trainer: different state structure")
    for (path, a), b in zip(want, got):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.dtype != b.dtype:
            name = jax.tree_util.keystr(path)
            raise CheckpointError(
                f"checkpoint does not fit this trainer: {name} is {b.dtype}{list(b.shape)}, expected {a.dtype}{list(a.shape)}"
            )


def is_finite(portable: TrainState) -> bool:
    """True when every float in params and optimizer state is finite (never save NaNs)."""
    leaves = jax.tree.leaves((portable.params, portable.opt_state))
    return all(np.all(np.isfinite(x)) for x in map(np.asarray, leaves) if np.issubdtype(x.dtype, np.floating))
