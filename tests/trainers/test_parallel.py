"""Data parallelism over two forced host devices, in a subprocess: XLA_FLAGS must be set
before JAX starts."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SCRIPT = textwrap.dedent(
    """
    import json, sys
    import jax, numpy as np
    sys.path.insert(0, sys.argv[1])
    from helpers import build, host_metrics
    from trainers.hparams import StaticConfig

    algo, network, inputs = sys.argv[2:5]
    static = StaticConfig(env_id="CartPole-v1", algo=algo, num_envs=4, num_steps=16, num_minibatches=2,
                          update_epochs=2, hidden_sizes=(16,), max_chunk_updates=8, network=network,
                          normalize_obs=inputs == "normalized", normalize_rewards=inputs == "normalized")
    loss = "td_loss" if algo == "pqn" else "policy_loss"
    devices = jax.local_devices()
    two, state2, hp = build(static, seed=1, devices=devices[:2])
    one, state1, _ = build(static, seed=1, devices=devices[:1])
    state2, m2 = two.run_chunk(state2, hp, 3)
    state1, m1 = one.run_chunk(state1, hp, 3)
    p2 = [np.asarray(x) for x in jax.tree.leaves(state2.params)]
    p1 = [np.asarray(x)[0] for x in jax.tree.leaves(state1.params)]
    out = {
        "num_devices": len(devices),
        "replicas_identical": all(np.array_equal(x[0], x[1]) for x in p2),
        "max_abs_diff_vs_one_device": max(float(np.max(np.abs(x[0] - y))) for x, y in zip(p2, p1)),
        "param_change": max(float(np.max(np.abs(x[0]))) for x in p2),
        "loss_two": host_metrics(m2)[loss].tolist(),
        "loss_one": host_metrics(m1)[loss].tolist(),
        # normalisation statistics merged over both devices' envs: equal to one device's
        "stats_max_abs_diff": (
            0.0 if state1.obs_stats is None
            else max(float(np.max(np.abs(np.asarray(a)[0] - np.asarray(b)[0]))) for a, b in
                     zip(jax.tree.leaves((state2.obs_stats, state2.return_stats)),
                         jax.tree.leaves((state1.obs_stats, state1.return_stats))))
        ),
        "stats_replicas_identical": all(np.array_equal(np.asarray(x)[0], np.asarray(x)[1])
                                        for x in jax.tree.leaves((state2.obs_stats, state2.return_stats))),
        "hidden_max_abs_diff": (
            0.0 if state1.hidden is None
            else float(np.max(np.abs(np.asarray(state2.hidden).reshape(4, -1) - np.asarray(state1.hidden)[0])))
        ),
    }

    # Three seeds vmapped inside the two-device map: same agents as on one device, and the
    # checkpoint layout (seed axis, global env axis) does not depend on the device count.
    from trainers import checkpoint
    import dataclasses
    seeded = dataclasses.replace(static, num_seeds=3)
    two, state2, hp = build(seeded, seed=1, devices=devices[:2])
    one, state1, _ = build(seeded, seed=1, devices=devices[:1])
    state2, m2 = two.run_chunk(state2, hp, 3)
    state1, m1 = one.run_chunk(state1, hp, 3)
    port2, port1 = checkpoint.to_portable(state2), checkpoint.to_portable(state1)
    # relative above 1: normalisation counts (~200) differ by an ulp between the two summations
    def relative(a, b):
        a, b = np.asarray(a, float), np.asarray(b, float)
        return float(np.max(np.abs(a - b) / np.maximum(1.0, np.abs(b))))

    diffs = [relative(a, b) for a, b in zip(jax.tree.leaves(port2), jax.tree.leaves(port1))]
    out["seeds_metrics_shape"] = list(getattr(m2.per_update, loss).shape)
    params2 = jax.tree.leaves(jax.device_get(state2.params))
    out["seeds_replicas_identical"] = all(np.array_equal(x[0], x[1]) for x in params2)
    out["seeds_max_abs_diff_vs_one_device"] = max(diffs)
    out["seeds_obs_shape"] = list(port2.obs.shape)
    first_leaf = jax.tree.leaves(port2.params)[0]
    out["seeds_differ"] = not np.allclose(first_leaf[0], first_leaf[1])
    print("RESULT " + json.dumps(out))
    """
)


@pytest.mark.parametrize("algo,network,inputs", [("ppo", "mlp", "normalized"), ("ppo", "gru", "raw"),
                                                 ("pqn", "mlp", "raw")])
def test_two_devices_keep_identical_params_equal_to_one_device(algo, network, inputs):
    # Two devices and one run different reductions (pmean, merged statistics), so their
    # float32 results agree up to rounding: the bounds are well over an order of magnitude
    # above it and far below what a wrong split of envs or a missed pmean gives (differences
    # of the size of the losses themselves). Replicas of one program are exactly equal.
    # gru: each device carries the hidden states of its own envs, and minibatches of whole
    # env sequences are the same sets of envs on two devices as on one. mlp runs with
    # observation and reward normalisation: their statistics are merged over devices. pqn:
    # the same rollout, its epsilon-greedy actions and minibatch permutation equal on both.
    env = {**os.environ, "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=2".strip()}
    tests_dir = str(Path(__file__).resolve().parents[1])  # tests/: helpers.py
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, tests_dir, algo, network, inputs], env=env, capture_output=True, text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(out for out in proc.stdout.splitlines() if out.startswith("RESULT "))
    result = json.loads(line[len("RESULT "):])
    assert result["num_devices"] == 2
    assert result["replicas_identical"]
    assert result["max_abs_diff_vs_one_device"] < 1e-5
    assert len(result["loss_two"]) == 3
    for a, b in zip(result["loss_two"], result["loss_one"]):
        assert abs(a - b) < 1e-5
    assert result["seeds_metrics_shape"] == [3, 8]
    assert result["seeds_replicas_identical"]
    assert result["seeds_max_abs_diff_vs_one_device"] < 1e-5
    assert result["seeds_obs_shape"] == [3, 4, 4]  # (seeds, all envs, obs)
    assert result["seeds_differ"]
    assert result["hidden_max_abs_diff"] < 1e-5
    assert result["stats_replicas_identical"]
    assert result["stats_max_abs_diff"] < 1e-4
