"""Many seeds at once (`num_seeds`): one program trains N independent agents."""

from __future__ import annotations

import dataclasses
import json

import jax
import numpy as np
import pytest

from rltui.session.backend import JaxBackend, seed_row
from rltui.session.metrics import UpdateRecord, record_from_json
from trainers import checkpoint
from trainers.hparams import StaticConfig

from helpers import TINY, build, count_compiles, host_metrics
from test_cli import read_jsonl, rltui

STATIC = StaticConfig(**TINY)
SEEDED = dataclasses.replace(STATIC, num_seeds=3)


def _run(static, seed, updates=5):
    parallel, state, hp = build(static, seed=seed)
    state, metrics = parallel.run_chunk(state, hp, updates)
    return state, metrics


def test_each_seed_is_the_agent_a_single_seed_run_would_train():
    """Seeds vmapped in one program against one seed alone: two programs whose sums may
    round differently on another CPU. The tolerance (1e-6 absolute, on losses of order 1e-4
    and parameters of order 1) is thousands of rounding errors wide, and a hundred times
    narrower than the difference between two seeds' losses, which the test checks too."""
    state, metrics = _run(SEEDED, seed=3)
    assert metrics.per_update.policy_loss.shape == (3, TINY["max_chunk_updates"])
    for i in range(3):
        single_state, single = _run(STATIC, seed=3 + i)
        np.testing.assert_allclose(
            metrics.per_update.policy_loss[i, :5], host_metrics(single)["policy_loss"], atol=1e-6
        )
        for a, b in zip(jax.tree.leaves(state.params), jax.tree.leaves(single_state.params)):
            np.testing.assert_allclose(np.asarray(a)[0, i], np.asarray(b)[0], atol=1e-6)
    losses = metrics.per_update.policy_loss[:, :5]
    assert np.abs(losses[0] - losses[1]).max() > 100 * 1e-6  # a seed mix-up would show


def test_an_edit_reaches_every_seed_without_recompiling():
    parallel, state, hp = build(SEEDED, seed=0)
    state, _ = parallel.run_chunk(state, hp, 2)
    with count_compiles() as compiles:
        state, metrics = parallel.run_chunk(state, hp._replace(lr=np.float32(1e-3)), 2)
    assert compiles.count == 0
    np.testing.assert_allclose(metrics.per_update.lr[:, :2], 1e-3 * (1 - np.array([[2, 3]] * 3) / 100), rtol=1e-5)


def test_checkpoint_holds_every_seed_and_restores_them():
    """The continuation is compared bit-exactly on the same machine (same compiled program)."""
    parallel, state, hp = build(SEEDED, seed=0)
    state, _ = parallel.run_chunk(state, hp, 2)
    portable = checkpoint.to_portable(state)
    assert portable.update_idx.shape == (3,)
    assert portable.obs.shape[:2] == (3, SEEDED.num_envs)
    data = checkpoint.encode(portable, {"note": "seeds"})
    restored, _ = checkpoint.decode(data, portable)
    placed = parallel.put(checkpoint.from_portable(restored, 1), like=state)
    _, after_restore = parallel.run_chunk(placed, hp, 2)
    _, uninterrupted = parallel.run_chunk(state, hp, 2)
    np.testing.assert_array_equal(after_restore.per_update.policy_loss, uninterrupted.per_update.policy_loss)


def test_seed_row_averages_seeds_and_keeps_each():
    row = seed_row({
        "episode_return": np.array([10.0, np.nan, 30.0]),
        "episodes": np.array([1.0, 0.0, 2.0]),
        "policy_loss": np.array([0.1, 0.2, 0.3]),
        "grad_norm": np.array([1.0, np.nan, 1.0]),
    })
    assert row["episode_return"] == pytest.approx(20.0)  # over the seeds that finished one
    assert row["episodes"] == 3.0
    assert row["policy_loss"] == pytest.approx(0.2)
    assert np.isnan(row["grad_norm"])  # one diverged seed trips the guard
    assert row["per_seed"]["episode_return"][0] == 10.0 and np.isnan(row["per_seed"]["episode_return"][1])
    record = UpdateRecord(update=1, env_steps=8, wall_time=0.1, sps=80.0, values=row, per_seed=row["per_seed"])
    written = json.loads(json.dumps(record.to_json()))  # as metrics.jsonl holds it
    assert written["seeds"]["episode_return"] == [10.0, None, 30.0]
    assert written["episodes"] == 3 and isinstance(written["episodes"], int)  # a count, not "3.0"
    assert written["seeds"]["episodes"] == [1, 0, 2] and all(isinstance(n, int) for n in written["seeds"]["episodes"])


def test_backend_reports_mean_and_per_seed_rows():
    backend = JaxBackend(SEEDED, seed=0)
    _, _, hp = build(SEEDED, seed=0)
    backend.build(hp)
    rows = backend.run_chunk(3, hp)
    assert len(rows) == 3
    for row in rows:
        losses = row["per_seed"]["policy_loss"]
        assert len(losses) == 3
        assert row["policy_loss"] == pytest.approx(np.mean(losses))
    assert backend.describe()["num_seeds"] == 3


def test_headless_run_logs_every_seed_and_eval_reports_each(tmp_path):
    run_dir = tmp_path / "run"
    tiny = ["--set", "num_envs=4", "--set", "num_steps=64", "--set", "num_minibatches=2", "--set", "update_epochs=1"]
    proc = rltui(
        ["launch", "--no-ui", "--run-dir", str(run_dir), *tiny, "--set", "num_seeds=2", "--set", "seed=5",
         "--set", "total_timesteps=2560", "--set", "checkpoint_every_updates=5"],
        tmp_path, timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    records = read_jsonl(run_dir / "metrics.jsonl")
    assert len(records) == 10
    for record in records:
        assert len(record["seeds"]["policy_loss"]) == 2
        assert record["policy_loss"] == pytest.approx(np.mean(record["seeds"]["policy_loss"]), rel=1e-5, abs=1e-7)
    evaluated = rltui(["eval", str(run_dir), "--episodes", "2"], tmp_path, timeout=180)
    assert evaluated.returncode == 0, evaluated.stderr[-2000:]
    assert "seed 5:" in evaluated.stdout and "seed 6:" in evaluated.stdout


def test_per_seed_values_survive_the_control_protocol():
    from rltui.control import protocol

    record = UpdateRecord(
        update=3, env_steps=24, wall_time=0.3, sps=80.0, values={"episode_return": 20.0},
        per_seed={"episode_return": (10.0, float("nan"), 30.0)},
    )
    back = record_from_json(protocol.decode(protocol.encode({"type": "record", **record.to_json()})))
    assert back.per_seed["episode_return"][0] == 10.0 and back.per_seed["episode_return"][2] == 30.0
    assert np.isnan(back.per_seed["episode_return"][1])
