"""Training state <-> bytes: flax msgpack serialization (never pickle) plus metadata.

The state is stored device-count independent: params, optimizer state, RNG key and counter
once (they are identical on every device), environment states, observations and (recurrent
networks) hidden states merged along a global env axis. A file is one msgpack map:

    {"format": "rltui-checkpoint", "version": 1, 2 or 3, "metadata": <JSON text>,
     "sha256": <hex digest of state>, "sha256_all": <hex digest of everything>,
     "state": <flax msgpack bytes>}

so `rltui info` can read the metadata without touching the arrays. A replay buffer that is
not yet full is stored as its filled rows (`replay_rows`). "sha256" covers the
state; "sha256_all" (see `content_digest`) covers the format, version, metadata and state
together, so an edited `update` or `hparams` is caught as well as damaged arrays. Files
without "sha256_all" (written by an older rltui) still load; only their state is covered.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import jax
import msgpack
import numpy as np
from flax import serialization

from trainers import file_table, json_text, replay_rows
from trainers.keys import ACTION_KINDS
from trainers.quoting import quote, shorten
from trainers.types import TrainState

FORMAT = "rltui-checkpoint"
# The newest format this rltui reads and writes. A file stores a state field as its leaves
# (`_state_dict`) only from version 2 on, and a replay buffer's filled rows alone
# (`replay_rows`) only from version 3 on; each file is written with the oldest version
# that reads it, so an older rltui refuses only what it would misread.
VERSION = 3
_LEAVES_VERSION = 2
_PLAIN_VERSION = 1
# A state field holding pytree classes that flax's serialization does not know (a Jumanji
# State, a chex.dataclass, an env author's own class) is stored as this key's table of its
# leaves in flattening order, and restored into the template's structure: arrays as data,
# whatever the classes, never a pickle. The colon keeps it from ever being a field's name.
_LEAVES = "rltui:leaves"
_SERIALIZABLE = (np.ndarray, np.generic, int, float, complex, bool, str, bytes, type(None))


# The largest checkpoint file rltui writes, and so the largest it reads (rltui.infra.read_limits):
# msgpack's binary field holds under 4 GiB, and a state that would not fit is refused when
# it is written, not found unreadable after a crash.
MAX_BYTES = 4 << 30


class CheckpointError(ValueError):
    """A checkpoint that cannot be used; the message says why in one line."""


def too_large_message(size: int) -> str:
    return (f"the training state is {size / 2**30:.1f} GiB, more than the {MAX_BYTES / 2**30:.4g} GiB a checkpoint "
            "holds; lower the sweep's size, num_seeds, num_envs or hidden_sizes")


# Stored once, identical on every device: these fields, and scalar leaves (replay counters).
_REPLICATED = ("params", "opt_state", "key", "update_idx", "obs_stats", "return_stats", "target_params")


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

    first = lambda x: np.asarray(x)[0]
    return _map_fields(host, replicated=first, per_env=merge_envs, lead=2 if seeded else 1)


def from_portable(portable: TrainState, num_devices: int) -> TrainState:
    """Host portable state -> host arrays with a leading device axis, ready to place."""
    seeded = _is_seeded(portable.update_idx)

    def split_envs(x):  # a copy: placed arrays may alias host memory that training donates
        x = np.array(x, copy=True)
        if seeded:  # (seeds, envs, ...) -> (devices, seeds, envs / devices, ...)
            x = x.reshape((x.shape[0], num_devices, x.shape[1] // num_devices) + x.shape[2:])
            return np.ascontiguousarray(np.moveaxis(x, 1, 0))
        return x.reshape((num_devices, x.shape[0] // num_devices) + x.shape[1:])

    replicate = lambda x: np.stack([np.asarray(x)] * num_devices)
    return _map_fields(portable, replicated=replicate, per_env=split_envs, lead=1 if seeded else 0)


def _map_fields(state: TrainState, *, replicated, per_env, lead: int) -> TrainState:
    fields = {}  # `lead`: the leading axes (device, seed) before a leaf's own
    for name in state.__dataclass_fields__:
        fn = lambda x, once=name in _REPLICATED: replicated(x) if once or np.ndim(x) == lead else per_env(x)
        fields[name] = jax.tree.map(fn, getattr(state, name))
    return TrainState(**fields)


def encode(portable: TrainState, metadata: dict[str, Any], replay_capacity: int | None = None) -> bytes:
    """The checkpoint file of `portable`; CheckpointError, before anything is serialized where
    the arrays alone show it, when the file would be larger than MAX_BYTES. `replay_capacity`:
    the replay buffer's rows per env, where its arrays hold its filled rows already."""
    trimmed = False
    if portable.replay is not None:
        replay, trimmed = replay_rows.filled_part(portable.replay, replay_capacity)
        portable = portable.replace(replay=replay)
    arrays = sum(np.asarray(leaf).nbytes for leaf in jax.tree.leaves(portable))
    if arrays > MAX_BYTES:
        raise CheckpointError(too_large_message(arrays))
    state, as_leaves = _state_dict(portable)
    state_bytes = serialization.msgpack_serialize(state)
    if len(state_bytes) > MAX_BYTES:
        raise CheckpointError(too_large_message(len(state_bytes)))
    version = VERSION if trimmed else _LEAVES_VERSION if as_leaves else _PLAIN_VERSION
    metadata_text = json.dumps(metadata, sort_keys=True)
    state_digest = hashlib.sha256(state_bytes).hexdigest()
    data = msgpack.packb(
        {
            "format": FORMAT,
            "version": version,
            "metadata": metadata_text,
            "sha256": state_digest,
            "sha256_all": content_digest(version, metadata_text, state_digest),
            "state": state_bytes,
        },
        use_bin_type=True,
    )
    if len(data) > MAX_BYTES:
        raise CheckpointError(too_large_message(len(data)))
    return data


def _state_dict(portable: TrainState) -> tuple[dict[str, Any], bool]:
    """flax's state dict of `portable`, with each field that holds classes flax cannot
    serialize replaced by its leaves; and whether any was."""
    state = serialization.to_state_dict(portable)
    as_leaves = False
    for name in portable.__dataclass_fields__:
        if not _serializable(state[name]):
            leaves = jax.tree.leaves(getattr(portable, name))
            state[name] = {_LEAVES: {str(i): leaf for i, leaf in enumerate(leaves)}}
            as_leaves = True
    return state, as_leaves


def _serializable(node: Any) -> bool:
    """True when flax's msgpack serialization can write `node`, a state dict: flax leaves an
    object of a class it does not know as it is, and cannot write that."""
    return all(isinstance(leaf, (*_SERIALIZABLE, jax.Array)) for leaf in _leaves(node))


def _leaves(node: Any, *, sequences: bool = False) -> Iterator[Any]:
    """Every value inside `node`'s nested dicts (and lists and tuples, with `sequences`)
    that is not one itself. Iterative: a state read back has the nesting its file gives."""
    branches = (dict, list, tuple) if sequences else dict
    stack = [node]
    while stack:
        node = stack.pop()
        if isinstance(node, branches):
            stack.extend(node.values() if isinstance(node, dict) else node)
        else:
            yield node


def _from_leaves(name: str, stored: Any, like: Any) -> Any:
    """A field stored as its leaves, restored into the structure of `like` (the template's)."""
    treedef = jax.tree.structure(like)
    count = treedef.num_leaves
    if not isinstance(stored, dict) or set(stored) != {str(i) for i in range(count)}:
        got = f"{len(stored)} arrays" if isinstance(stored, dict) else quote(stored)
        raise CheckpointError(f"checkpoint does not fit this trainer: {name} holds {got}, expected {count} arrays")
    leaves = []
    for i in range(count):
        leaf = stored[str(i)]
        if not isinstance(leaf, (np.ndarray, np.generic, int, float, bool, complex)):
            raise CheckpointError(f"checkpoint is damaged: {name} holds {quote(leaf)} where an array belongs")
        leaves.append(np.asarray(leaf))
    return jax.tree.unflatten(treedef, leaves)


def content_digest(version: int, metadata_text: str, state_digest: str) -> str:
    """SHA-256 over the format, version, metadata text and state digest, each prefixed by
    its length so that no two different files hash the same parts."""
    digest = hashlib.sha256()
    for part in (FORMAT, str(version), metadata_text, state_digest):
        raw = part.encode("utf-8", "surrogatepass")
        digest.update(len(raw).to_bytes(8, "little"))
        digest.update(raw)
    return digest.hexdigest()


def _unpack(data: bytes) -> dict[str, Any]:
    outer = file_table.open_table(data, file_format=FORMAT, newest_version=VERSION, noun="checkpoint",
                                  error=CheckpointError, not_ours="not an rltui checkpoint",
                                  fields={"metadata": str, "sha256": str, "state": bytes})
    if "sha256_all" in outer and not isinstance(outer["sha256_all"], str):
        raise CheckpointError("checkpoint is damaged: its checksum sha256_all is not text")
    return outer


class Verified(NamedTuple):
    """A checkpoint whose checksums match: its metadata, and whether the checksum covers the
    metadata too (False for a file written by an older rltui, whose checksum covers the state)."""

    metadata: dict[str, Any]
    covers_metadata: bool


def check(data: bytes) -> Verified:
    """Check format, version, checksums and the metadata's fields without restoring arrays.
    Raises CheckpointError."""
    outer = _unpack(data)
    state_digest = hashlib.sha256(outer["state"]).hexdigest()
    if state_digest != outer["sha256"]:
        raise CheckpointError("checkpoint is corrupted (checksum mismatch)")
    covers_metadata = "sha256_all" in outer
    if covers_metadata and content_digest(outer["version"], outer["metadata"], state_digest) != outer["sha256_all"]:
        raise CheckpointError("checkpoint is corrupted or edited (checksum mismatch in its metadata)")
    return Verified(_parse_metadata(outer["metadata"]), covers_metadata)


def verify(data: bytes) -> dict[str, Any]:
    """`check`'s metadata: format, version and checksums verified. Raises CheckpointError."""
    return check(data).metadata


def read_metadata(data: bytes) -> dict[str, Any]:
    """The metadata, its fields checked, without verifying checksums."""
    return _parse_metadata(_unpack(data)["metadata"])


# The replay buffer's transitions were left out (`replay_in_checkpoint = false`): the state
# holds an empty buffer and its counters (`replay_rows.emptied`).
REPLAY_LEFT_OUT = "replay_left_out"

# The metadata fields rltui reads, each with the test its value passes and what that means.
# A field may be absent (callers fall back to a default); one that is present has its type,
# so every reader can use it without checking again.
METADATA_FIELDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "trainer": (lambda v: isinstance(v, str), "text"),
    "config": (lambda v: isinstance(v, dict), "a table of configuration keys"),
    "static": (lambda v: isinstance(v, dict), "a table"),
    "hparams": (lambda v: isinstance(v, dict) and all(map(json_text.is_number, v.values())),
                "a table of hyperparameter numbers"),
    "update": (json_text.is_count, "an integer >= 0"),
    "env_steps": (json_text.is_count, "an integer >= 0"),
    "elapsed": (lambda v: json_text.is_number(v) and v >= 0, "a number of seconds >= 0"),
    "edits": (lambda v: isinstance(v, list) and all(
        isinstance(e, dict) and json_text.is_count(e.get("update")) and isinstance(e.get("changes"), dict) for e in v),
        "a list of tables, each with its update and changes"),
    "reason": (lambda v: isinstance(v, str), "text"),
    "created": (lambda v: isinstance(v, str), "text"),
    "versions": (lambda v: isinstance(v, dict), "a table"),
    "device_kind": (lambda v: isinstance(v, str), "text"),
    "device_count": (json_text.is_count, "an integer >= 0"),
    "actions": (lambda v: v in ACTION_KINDS, " or ".join(ACTION_KINDS)),
    "preset": (lambda v: isinstance(v, dict) and isinstance(v.get("settings"), dict), "a table with settings"),
    REPLAY_LEFT_OUT: (lambda v: isinstance(v, bool), "true or false"),
}


def _parse_metadata(text: str) -> dict[str, Any]:
    try:
        metadata = json_text.loads(text)
    except ValueError:
        raise CheckpointError("checkpoint metadata is corrupted (not readable JSON)") from None
    if not isinstance(metadata, dict):
        raise CheckpointError(f"checkpoint metadata is damaged: expected a table of fields, got {quote(metadata)}")
    for name, (ok, allowed) in METADATA_FIELDS.items():
        if name in metadata and not ok(metadata[name]):
            raise CheckpointError(
                f"checkpoint metadata is damaged: {name} should be {allowed}, got {quote(metadata[name])}"
            )
    return metadata


def decode(data: bytes, template: TrainState) -> tuple[TrainState, dict[str, Any]]:
    """Restore into the structure of `template` (a portable state of the same trainer);
    shapes and dtypes must match exactly (a replay buffer not yet full is stored as its filled
    rows, which take the template's capacity back: `replay_rows`), and the parameters must be
    finite."""
    outer = _unpack(data)
    metadata = verify(data)
    try:
        state_dict = serialization.msgpack_restore(outer["state"])
        # Written before recurrent networks or normalisation existed: those fields are off. No
        # replay state at all (an older rltui's `replay_in_checkpoint = false`): the template's.
        if isinstance(state_dict, dict):
            for field in ("hidden", "obs_stats", "return_stats", "discounted_return", "target_params", "replay"):
                state_dict.setdefault(field, None)
        kept_replay = {"replay": template.replay} if state_dict["replay"] is None and template.replay else {}
        template = template.replace(**dict.fromkeys(kept_replay))
        as_leaves = {}
        if isinstance(state_dict, dict):
            for name in template.__dataclass_fields__:
                stored = state_dict.get(name)
                if isinstance(stored, dict) and _LEAVES in stored:
                    as_leaves[name] = _from_leaves(name, stored[_LEAVES], getattr(template, name))
                    state_dict[name] = None
        restored = serialization.from_state_dict(template.replace(**dict.fromkeys(as_leaves)), state_dict)
        restored = restored.replace(**as_leaves)
        if restored.replay is not None and template.replay is not None:
            restored = restored.replace(replay=replay_rows.full_capacity(restored.replay, template.replay))
    except CheckpointError:
        raise
    except Exception as err:  # noqa: BLE001 - flax raises several types for a state of another shape
        # the error can name keys read from the file
        raise CheckpointError(f"checkpoint does not fit this trainer: {shorten(str(err), 300)}") from None
    if jax.tree.structure(restored) != jax.tree.structure(template):
        raise CheckpointError("checkpoint does not fit this trainer: different state structure")
    _check_shapes(template, restored)
    if not is_finite(restored):
        raise CheckpointError(NON_FINITE_MESSAGE)
    return restored.replace(**kept_replay), metadata


NON_FINITE_MESSAGE = (
    "checkpoint parameters contain NaN/inf: the run had diverged when it was saved; use an earlier checkpoint"
)


def params_are_finite(data: bytes) -> bool:
    """True when every float in the checkpoint's params and optimizer state is finite; reads
    the arrays without a template (any trainer). Raises CheckpointError if unreadable, or
    if it holds no parameters (nothing there to evaluate, resume or call finite)."""
    state = stored_state(data)
    if not _holds_arrays(state.get("params")):
        raise CheckpointError("checkpoint is damaged: it holds no policy parameters")
    return all(_finite_leaves(state.get(name)) for name in ("params", "opt_state"))


def stored_state(data: bytes) -> dict[str, Any]:
    """The state's fields as stored (flax state dicts of NumPy arrays), read without a
    template, any trainer. Raises CheckpointError."""
    outer = _unpack(data)
    try:
        state = serialization.msgpack_restore(outer["state"])
    except Exception:  # noqa: BLE001 - msgpack raises several types for damaged input
        raise CheckpointError("not a readable checkpoint: its state is damaged") from None
    if not isinstance(state, dict):
        raise CheckpointError("not a readable checkpoint: its state is not a table of arrays")
    return state


def _holds_arrays(node: Any) -> bool:
    return any(isinstance(leaf, np.ndarray) and leaf.size for leaf in _leaves(node))


def _finite_leaves(node: Any) -> bool:
    return all(_finite(leaf) for leaf in _leaves(node, sequences=True))


def _finite(leaf: Any) -> bool:
    if not isinstance(leaf, (float, np.ndarray)):
        return True
    array = np.asarray(leaf)
    return not np.issubdtype(array.dtype, np.inexact) or bool(np.all(np.isfinite(array)))


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
                f"checkpoint does not fit this trainer: {name} is {b.dtype}{list(b.shape)}, "
                f"expected {a.dtype}{list(a.shape)}"
            )


def is_finite(portable: TrainState) -> bool:
    """True when every float in params and optimizer state is finite (never save NaNs)."""
    leaves = jax.tree.leaves((portable.params, portable.opt_state))
    return all(np.all(np.isfinite(x)) for x in map(np.asarray, leaves) if np.issubdtype(x.dtype, np.floating))
