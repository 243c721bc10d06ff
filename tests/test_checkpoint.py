"""trainers.checkpoint: state <-> bytes, and rejection of anything that is not a good checkpoint."""

import json

import jax
import msgpack
import numpy as np
import pytest

from helpers import TINY, build, count_compiles, host_metrics
from trainers import checkpoint
from trainers.checkpoint import CheckpointError
from trainers.hparams import StaticConfig


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
    state, straight = parallel.run_chunk(state, hp, 4)
    with count_compiles() as compiles:
        restored, _ = checkpoint.decode(data, portable)
        placed = parallel.put(checkpoint.from_portable(restored, 1), like=state)
        _, resumed = parallel.run_chunk(placed, hp, 4)
        jax.block_until_ready(resumed)
    assert compiles.count == 0
    for key, values in host_metrics(straight).items():
        np.testing.assert_array_equal(values, host_metrics(resumed)[key], err_msg=key)


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
    restored, _ = checkpoint.decode(msgpack.packb(outer, use_bin_type=True), portable)
    for a, b in zip(jax.tree.leaves(portable), jax.tree.leaves(restored)):
        np.testing.assert_array_equal(a, b)
