"""trainers.checkpoint: state <-> bytes, and rejection of anything that is not a good checkpoint."""

import dataclasses
import json
from typing import Any

import jax
import msgpack
import numpy as np
import pytest

from trainers import checkpoint
from trainers.checkpoint import CheckpointError
from trainers.hparams import StaticConfig

from helpers import TINY, assert_checkpoint_continues_bit_exactly, build


@pytest.fixture(scope="module")
def trained():
    parallel, state, hp = build(StaticConfig(**TINY))
    state, _ = parallel.run_chunk(state, hp, 3)
    # host copies only: run_chunk donates (deletes) the device state it is given
    return parallel, checkpoint.to_portable(state), hp


def test_round_trip_restores_every_leaf(trained):
    _, portable, _ = trained
    restored, metadata = checkpoint.decode(checkpoint.encode(portable, {"update": 3}), portable)
    assert metadata == {"update": 3}
    assert jax.tree.structure(restored) == jax.tree.structure(portable)
    for a, b in zip(jax.tree.leaves(portable), jax.tree.leaves(restored)):
        np.testing.assert_array_equal(a, b)
        assert np.asarray(a).dtype == np.asarray(b).dtype


def test_restored_state_continues_bit_exactly_without_recompiling(trained):
    """Bit-exact on the same machine: both continuations run the same compiled program in
    this process. Another CPU rounds differently, so no test compares figures across machines."""
    parallel, portable, hp = trained
    data = checkpoint.encode(portable, {})
    state = parallel.put(checkpoint.from_portable(portable, 1), like=parallel.init(jax.random.PRNGKey(0), hp))
    assert_checkpoint_continues_bit_exactly(parallel, state, hp, data, portable)


def _outer(data):
    return msgpack.unpackb(data, raw=False)


def test_truncated_corrupted_and_foreign_files_are_refused(trained):
    _, portable, _ = trained
    data = checkpoint.encode(portable, {"update": 3})
    with pytest.raises(CheckpointError, match="not a readable checkpoint: truncated, damaged"):
        checkpoint.decode(data[: len(data) // 2], portable)
    outer = _outer(data)
    flipped = bytearray(outer["state"])
    flipped[len(flipped) // 2] ^= 0xFF
    outer["state"] = bytes(flipped)
    with pytest.raises(CheckpointError, match="checksum"):
        checkpoint.decode(msgpack.packb(outer, use_bin_type=True), portable)
    with pytest.raises(CheckpointError, match="not an rltui checkpoint"):
        checkpoint.decode(msgpack.packb({"hello": 1}), portable)
    with pytest.raises(CheckpointError):
        checkpoint.decode(b"\x00\x01garbage", portable)


def test_newer_format_version_is_refused(trained):
    _, portable, _ = trained
    outer = _outer(checkpoint.encode(portable, {}))
    outer["version"] = checkpoint.VERSION + 1
    with pytest.raises(CheckpointError, match="newer"):
        checkpoint.read_metadata(msgpack.packb(outer, use_bin_type=True))


def test_checkpoint_of_another_network_shape_is_refused(trained):
    _, portable, _ = trained
    data = checkpoint.encode(portable, {})
    other, other_state, _ = build(StaticConfig(**{**TINY, "hidden_sizes": (8,)}))
    with pytest.raises(CheckpointError, match="does not fit"):
        checkpoint.decode(data, checkpoint.to_portable(other_state))


def test_metadata_is_readable_without_the_arrays(trained):
    _, portable, _ = trained
    data = checkpoint.encode(portable, {"update": 3, "hparams": {"lr": 0.1}})
    assert checkpoint.read_metadata(data)["hparams"] == {"lr": 0.1}
    assert json.loads(_outer(data)["metadata"])["update"] == 3


def test_non_finite_params_are_detected(trained):
    _, portable, _ = trained
    assert checkpoint.is_finite(portable)
    poisoned = portable.replace(params=jax.tree.map(lambda x: np.full_like(x, np.nan), portable.params))
    assert not checkpoint.is_finite(poisoned)


def test_checkpoint_written_before_recurrent_networks_still_loads(trained):
    """Feed-forward states saved before TrainState had a `hidden` field restore unchanged."""
    import hashlib

    from flax import serialization

    _, portable, _ = trained
    outer = _outer(checkpoint.encode(portable, {}))
    state = serialization.msgpack_restore(outer["state"])
    assert state.pop("hidden", "missing") is None
    outer["state"] = serialization.msgpack_serialize(state)
    outer["sha256"] = hashlib.sha256(outer["state"]).hexdigest()
    del outer["sha256_all"]  # not written then
    restored, _ = checkpoint.decode(msgpack.packb(outer, use_bin_type=True), portable)
    for a, b in zip(jax.tree.leaves(portable), jax.tree.leaves(restored)):
        np.testing.assert_array_equal(a, b)


def _pack(outer) -> bytes:
    return msgpack.packb(outer, use_bin_type=True)


def _resealed(outer) -> bytes:
    """`outer` with both checksums recomputed: what a consistent (crafted) file holds."""
    import hashlib

    outer["sha256"] = hashlib.sha256(outer["state"]).hexdigest()
    outer["sha256_all"] = checkpoint.content_digest(outer["version"], outer["metadata"], outer["sha256"])
    return _pack(outer)


@pytest.mark.parametrize(
    "edit",
    [
        lambda m: m.update(update=999),
        lambda m: m["hparams"].update(lr=0.5),
        lambda m: m["config"].update(env="Acrobot-v1"),
    ],
    ids=["update", "lr", "config"],
)
def test_checksum_covers_the_metadata(trained, edit):
    _, portable, _ = trained
    outer = _outer(checkpoint.encode(portable, {"update": 3, "hparams": {"lr": 0.1}, "config": {"env": "CartPole-v1"}}))
    metadata = json.loads(outer["metadata"])
    edit(metadata)
    outer["metadata"] = json.dumps(metadata, sort_keys=True)
    message = "checkpoint is corrupted or edited (checksum mismatch in its metadata)"
    with pytest.raises(CheckpointError) as excinfo:
        checkpoint.verify(_pack(outer))
    assert str(excinfo.value) == message
    with pytest.raises(CheckpointError) as excinfo:
        checkpoint.decode(_pack(outer), portable)
    assert str(excinfo.value) == message


def test_checkpoint_without_the_metadata_checksum_still_loads(trained):
    """Files written before the checksum covered the metadata load, and say so."""
    _, portable, _ = trained
    data = checkpoint.encode(portable, {"update": 3})
    assert checkpoint.check(data).covers_metadata
    outer = _outer(data)
    del outer["sha256_all"]
    older = _pack(outer)
    assert checkpoint.check(older) == checkpoint.Verified({"update": 3}, covers_metadata=False)
    restored, metadata = checkpoint.decode(older, portable)
    assert metadata == {"update": 3}
    for a, b in zip(jax.tree.leaves(portable), jax.tree.leaves(restored)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "metadata_text,message",
    [
        ("[1,2]", "checkpoint metadata is damaged: expected a table of fields, got [1, 2]"),
        ('{"config": "x"}', "checkpoint metadata is damaged: config should be a table of configuration keys, got 'x'"),
        ('{"update": "abc"}', "checkpoint metadata is damaged: update should be an integer >= 0, got 'abc'"),
        ('{"update": -1}', "checkpoint metadata is damaged: update should be an integer >= 0, got -1"),
        ('{"hparams": {"lr": "fast"}}',
         "checkpoint metadata is damaged: hparams should be a table of hyperparameter numbers, got {'lr': 'fast'}"),
        ('{"edits": [1]}', "checkpoint metadata is damaged: edits should be a list of tables, each with its update "
                           "and changes, got [1]"),
        ('{"edits": [{"update": 1e400, "changes": {}}]}', "checkpoint metadata is damaged: edits should be a list of "
                                                         "tables, each with its update and changes, got "
                                                         "[{'changes': {}, 'update': inf}]"),
        ('{"elapsed": NaN}', "checkpoint metadata is damaged: elapsed should be a number of seconds >= 0, got nan"),
        ("[" * 100_000 + "]" * 100_000, "checkpoint metadata is corrupted (not readable JSON)"),
    ],
    ids=["list", "config-string", "update-string", "update-negative", "hparams", "edits", "edit-update-inf",
         "elapsed-nan", "deep"],
)
def test_crafted_metadata_is_refused_in_one_line(trained, metadata_text, message):
    """Consistent checksums, metadata of the wrong shape: refused before anything reads it."""
    _, portable, _ = trained
    outer = _outer(checkpoint.encode(portable, {}))
    outer["metadata"] = metadata_text
    data = _resealed(outer)
    for read in (checkpoint.verify, checkpoint.read_metadata, lambda d: checkpoint.decode(d, portable)):
        with pytest.raises(CheckpointError) as excinfo:
            read(data)
        assert str(excinfo.value) == message


@pytest.mark.parametrize(
    "version,message",
    [
        ("1", "checkpoint is damaged: its format version is '1', not a whole number"),
        (True, "checkpoint is damaged: its format version is true, not a whole number"),
        (1.0, "checkpoint is damaged: its format version is 1.0, not a whole number"),
        (0, "checkpoint is damaged: format version 0 does not exist (versions start at 1)"),
        (4, "checkpoint format version 4 is newer than this rltui understands (3); upgrade rltui"),
    ],
    ids=["string", "bool", "float", "zero", "newer"],
)
def test_format_version_is_checked_by_type_then_value(trained, version, message):
    _, portable, _ = trained
    outer = _outer(checkpoint.encode(portable, {}))
    outer["version"] = version
    with pytest.raises(CheckpointError) as excinfo:
        checkpoint.read_metadata(_pack(outer))
    assert str(excinfo.value) == message


def test_checkpoint_with_nan_params_is_detected_and_not_restored(trained):
    from flax import serialization

    _, portable, _ = trained
    data = checkpoint.encode(portable, {})
    assert checkpoint.params_are_finite(data)
    outer = _outer(data)
    state = serialization.msgpack_restore(outer["state"])
    kernel = state["params"]["params"]
    first = next(iter(kernel))
    layer = kernel[first]
    layer["kernel"] = np.full_like(layer["kernel"], np.nan)
    outer["state"] = serialization.msgpack_serialize(state)
    poisoned = _resealed(outer)
    assert checkpoint.verify(poisoned) == {}  # intact as a file
    assert not checkpoint.params_are_finite(poisoned)
    with pytest.raises(CheckpointError) as excinfo:
        checkpoint.decode(poisoned, portable)
    assert str(excinfo.value) == checkpoint.NON_FINITE_MESSAGE


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class OwnEnvState:
    """An env state class JAX knows and flax's serialization does not (as Jumanji's are)."""

    inner: Any
    time: Any


def _with_own_env_state(portable):
    time = np.arange(np.asarray(portable.obs).shape[0], dtype=np.int32)
    return portable.replace(env_state=OwnEnvState(inner=portable.env_state, time=time))


def test_an_env_state_of_classes_flax_does_not_know_round_trips(trained):
    _, portable, _ = trained
    portable = _with_own_env_state(portable)
    restored, _ = checkpoint.decode(checkpoint.encode(portable, {}), portable)
    assert isinstance(restored.env_state, OwnEnvState)
    assert jax.tree.structure(restored) == jax.tree.structure(portable)
    for a, b in zip(jax.tree.leaves(portable), jax.tree.leaves(restored)):
        np.testing.assert_array_equal(a, b)
        assert np.asarray(a).dtype == np.asarray(b).dtype


def test_each_file_is_written_with_the_oldest_format_version_that_reads_it(trained):
    """A state flax can write: 1, which every rltui reads; a field stored as its leaves: 2; a
    replay buffer's filled rows alone: 3 (tests/trainers/test_dqn.py)."""
    _, portable, _ = trained
    assert _outer(checkpoint.encode(portable, {}))["version"] == 1
    assert _outer(checkpoint.encode(_with_own_env_state(portable), {}))["version"] == 2


@pytest.mark.parametrize(
    "edit,message",
    [
        (lambda leaves: leaves.pop(str(len(leaves) - 1)), "env_state holds 10 arrays, expected 11 arrays"),
        (lambda leaves: leaves.update({"0": {"a": np.zeros(2)}}), "env_state holds {'a': "),
        (lambda leaves: leaves.update({"10": np.zeros(3, np.float64)}),
         ".env_state.time is float64[3], expected int32[2]"),
    ],
    ids=["missing", "not-an-array", "dtype"],
)
def test_a_damaged_table_of_env_state_leaves_is_refused_in_one_line(trained, edit, message):
    from flax import serialization

    _, portable, _ = trained
    portable = _with_own_env_state(portable)
    outer = _outer(checkpoint.encode(portable, {}))
    state = serialization.msgpack_restore(outer["state"])
    assert len(state["env_state"]["rltui:leaves"]) == len(jax.tree.leaves(portable.env_state)) == 11
    edit(state["env_state"]["rltui:leaves"])
    outer["state"] = serialization.msgpack_serialize(state)
    with pytest.raises(CheckpointError, match="checkpoint (does not fit this trainer|is damaged): ") as excinfo:
        checkpoint.decode(_resealed(outer), portable)
    assert message in str(excinfo.value)
    assert "\n" not in str(excinfo.value)


def test_every_checkpoint_rltui_writes_it_reads_back_and_a_larger_one_is_refused_when_written(trained, tmp_path,
                                                                                               monkeypatch):
    from rltui.infra.read_limits import read_checkpoint

    _, portable, _ = trained
    data = checkpoint.encode(portable, {"update": 3})
    path = tmp_path / "checkpoint.msgpack"
    path.write_bytes(data)
    monkeypatch.setattr(checkpoint, "MAX_BYTES", len(data))  # the largest file written is read back
    assert read_checkpoint(path) == data
    monkeypatch.setattr(checkpoint, "MAX_BYTES", len(data) - 1)
    with pytest.raises(CheckpointError, match=r"^the training state is [\d.]+ GiB, more than the [\d.e-]+ GiB a "
                                              r"checkpoint holds; lower the sweep's size, num_seeds, num_envs or "
                                              r"hidden_sizes$"):
        checkpoint.encode(portable, {"update": 3})
    monkeypatch.setattr(checkpoint, "MAX_BYTES", 64)  # refused from the arrays' size, before serializing
    monkeypatch.setattr(checkpoint.serialization, "msgpack_serialize", None)
    with pytest.raises(CheckpointError, match="a checkpoint holds"):
        checkpoint.encode(portable, {"update": 3})
