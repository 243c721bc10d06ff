"""Observation and reward normalisation: running statistics against NumPy, and what a run
with them keeps in its state and checkpoints."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from trainers import checkpoint, normalize
from trainers.hparams import StaticConfig

from helpers import TINY, build, count_compiles, host_metrics

AXIS = "devices"


def _merge(stats, batch):
    """update_stats on a batch split over a vmapped axis named like the device axis."""
    return jax.vmap(functools.partial(normalize.update_stats, axis_name=AXIS), in_axes=(None, 0), axis_name=AXIS)(
        stats, batch
    )


def test_running_stats_equal_numpy_over_several_batches_and_devices():
    rng = np.random.default_rng(0)
    batches = [rng.normal(3.0, 2.0, size=(2, 16, 5, 3)).astype(np.float32) for _ in range(4)]  # (dev, T, E, obs)
    stats = normalize.initial_stats((3,))
    for batch in batches:
        stats = jax.tree.map(lambda x: x[0], _merge(stats, jnp.asarray(batch)))
    everything = np.concatenate([b.reshape(-1, 3) for b in batches]).astype(np.float64)
    np.testing.assert_allclose(stats.mean, everything.mean(axis=0), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(stats.var, everything.var(axis=0), rtol=1e-3)
    assert float(stats.count) == pytest.approx(len(everything), abs=1e-3)


def test_normalized_observations_are_standardised_and_clipped():
    stats = normalize.RunningStats(jnp.float32(10), jnp.array([1.0, -2.0]), jnp.array([4.0, 0.25]))
    out = normalize.normalize_obs(stats, jnp.array([[3.0, -2.5], [1.0, 100.0]]))
    np.testing.assert_allclose(out, [[1.0, -1.0], [0.0, normalize.OBS_CLIP]], atol=1e-5)
    raw = jnp.array([5.0, 6.0])
    assert normalize.normalize_obs(None, raw) is raw


def test_rewards_are_divided_by_the_std_of_the_discounted_return_restarting_after_episodes():
    reward = np.array([[1.0, 2.0], [1.0, 0.0], [1.0, 3.0], [1.0, 1.0]], np.float32)  # (time, env)
    done = np.array([[0, 0], [0, 1], [1, 0], [0, 0]], bool)
    gamma = 0.9
    start = np.array([0.5, 0.0], np.float32)
    # oracle: G_t = gamma * G_{t-1} + r_t, reset to 0 after a step that ended an episode
    returns, g = [], start.astype(np.float64)
    for t in range(4):
        g = gamma * g + reward[t]
        returns.append(g.copy())
        g = np.where(done[t], 0.0, g)
    returns = np.array(returns)
    stats0 = normalize.initial_stats(())
    run = jax.vmap(
        lambda r: normalize.normalize_rewards(stats0, jnp.asarray(start), r, jnp.asarray(done), gamma, AXIS),
        axis_name=AXIS,
    )
    stats, carried, scaled = jax.tree.map(lambda x: np.asarray(x[0]), run(jnp.asarray(reward)[None]))
    np.testing.assert_allclose(carried, g, rtol=1e-6)
    count = 1e-4 + returns.size
    mean = returns.mean() * returns.size / count
    var = (1.0 * 1e-4 + returns.var() * returns.size + returns.mean() ** 2 * 1e-4 * returns.size / count) / count
    assert float(stats.mean) == pytest.approx(mean, rel=1e-4)
    assert float(stats.var) == pytest.approx(var, rel=1e-4)
    np.testing.assert_allclose(scaled, reward / np.sqrt(var + 1e-8), rtol=1e-4)


NORMALIZED = StaticConfig(env_id="Pendulum-v1", normalize_obs=True, normalize_rewards=True, **TINY)


def test_a_normalised_run_keeps_its_statistics_in_the_state_and_reports_raw_returns():
    parallel, state, hp = build(NORMALIZED, seed=0)
    assert float(state.obs_stats.count[0]) == pytest.approx(1e-4)
    returns = []
    for count in (8, 8, 8, 2):  # 26 updates of 8 steps: each env finishes a 200-step episode
        state, metrics = parallel.run_chunk(state, hp, count)
        returns.extend(host_metrics(metrics)["episode_return"])
    stats = jax.tree.map(lambda x: np.asarray(x)[0], state.obs_stats)
    samples = 26 * NORMALIZED.steps_per_update
    assert float(stats.count) == pytest.approx(1e-4 + samples, rel=1e-6)
    # Pendulum's observation is (cos, sin, angular velocity): |cos|, |sin| <= 1
    assert np.all(np.abs(stats.mean[:2]) <= 1.0) and np.all(stats.var[:2] <= 1.0)
    assert np.all(stats.var > 0)
    assert float(np.asarray(state.return_stats.count)[0]) == pytest.approx(1e-4 + samples, rel=1e-6)
    returns = np.array(returns)
    finished = returns[~np.isnan(returns)]
    # Pendulum pays -16.3 at worst per step over 200 steps: raw returns, not scaled ones
    assert finished.size and np.all(finished < -50) and np.all(finished >= -16.3 * 200)


def test_normalisation_statistics_survive_a_checkpoint_round_trip():
    parallel, state, hp = build(NORMALIZED, seed=1)
    state, _ = parallel.run_chunk(state, hp, 3)
    portable = checkpoint.to_portable(state)
    restored, _ = checkpoint.decode(checkpoint.encode(portable, {}), portable)
    for a, b in zip(jax.tree.leaves(portable), jax.tree.leaves(restored)):
        np.testing.assert_array_equal(a, b)
    assert restored.obs_stats.mean.shape == (3,)  # stored once, not per device
    assert restored.discounted_return.shape == (NORMALIZED.num_envs,)  # per env
    # continuing from the restored state equals continuing from the original (bit-exact on
    # the same machine: the same compiled program runs both)
    placed = parallel.put(parallel.from_portable(restored), state)
    a, _ = parallel.run_chunk(state, hp, 2)
    b, _ = parallel.run_chunk(placed, hp, 2)
    for x, y in zip(jax.tree.leaves(a.params), jax.tree.leaves(b.params)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_editing_reward_scale_changes_learning_without_recompiling():
    static = dataclasses.replace(NORMALIZED, normalize_rewards=False)
    parallel, state, hp = build(static, seed=2)
    fresh = lambda: parallel.init(parallel.seed_keys(2), hp)  # run_chunk donates its state
    parallel.run_chunk(state, hp, 1)  # compile
    with count_compiles() as counter:
        _, ma = parallel.run_chunk(fresh(), hp, 2)
        _, mb = parallel.run_chunk(fresh(), hp.with_updates({"reward_scale": 0.01}), 2)
    assert counter.count == 0
    # the value targets shrink with the rewards
    assert host_metrics(mb)["value_loss"][0] < 0.01 * host_metrics(ma)["value_loss"][0]


def test_old_checkpoints_without_normalisation_fields_still_load():
    static = StaticConfig(env_id="CartPole-v1", **TINY)
    parallel, state, _ = build(static, seed=0)
    portable = checkpoint.to_portable(state)
    import hashlib
    import json

    import msgpack
    from flax import serialization

    state_dict = serialization.to_state_dict(portable)
    for field in ("obs_stats", "return_stats", "discounted_return"):
        state_dict.pop(field)
    body = serialization.msgpack_serialize(state_dict)
    data = msgpack.packb({"format": checkpoint.FORMAT, "version": 1, "metadata": json.dumps({}),
                          "sha256": hashlib.sha256(body).hexdigest(), "state": body}, use_bin_type=True)
    restored, _ = checkpoint.decode(data, portable)
    assert restored.obs_stats is None
    np.testing.assert_array_equal(jax.tree.leaves(restored.params)[0], jax.tree.leaves(portable.params)[0])


def test_headless_pendulum_preset_run_saves_statistics_that_eval_uses(tmp_path):
    from test_cli import rltui

    run_dir = tmp_path / "run"
    tiny = ["--set", "num_envs=4", "--set", "num_steps=16", "--set", "total_timesteps=640",
            "--set", "checkpoint_every_updates=5"]
    proc = rltui(["launch", "--no-ui", "--set", "env=Pendulum-v1", "--run-dir", str(run_dir), *tiny], tmp_path,
                 timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    config = (run_dir / "config.toml").read_text()
    assert "normalize_obs = true" in config and 'log_std = "state"' in config  # the preset applied
    evaluated = rltui(["eval", str(run_dir), "--episodes", "2"], tmp_path, timeout=180)
    assert evaluated.returncode == 0, evaluated.stderr[-2000:]
    assert "mean" in evaluated.stdout
