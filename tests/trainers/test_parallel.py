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
    import dataclasses, json, sys
    import jax, numpy as np
    sys.path.insert(0, sys.argv[1])
    from helpers import build
    from trainers.hparams import StaticConfig

    algo, network, inputs = sys.argv[2:5]
    static = StaticConfig(env_id="CartPole-v1", algo=algo, num_envs=4, num_steps=16, num_minibatches=2,
                          update_epochs=2, hidden_sizes=(16,), max_chunk_updates=8, network=network,
                          normalize_obs=inputs == "normalized", normalize_rewards=inputs == "normalized")
    loss = "td_loss" if algo == "pqn" else "policy_loss"
    devices = jax.local_devices()

    # Three seeds vmapped inside the two-device map: the same agents as on one device, and the
    # checkpoint layout (seed axis, global env axis) does not depend on the device count.
    from trainers import checkpoint
    static = dataclasses.replace(static, num_seeds=3)
    two, state2, hp = build(static, seed=1, devices=devices[:2])
    one, state1, _ = build(static, seed=1, devices=devices[:1])
    state2, m2 = two.run_chunk(state2, hp, 3)
    state1, m1 = one.run_chunk(state1, hp, 3)
    port2, port1 = checkpoint.to_portable(state2), checkpoint.to_portable(state1)

    # relative above 1: normalisation counts (~200) differ by an ulp between the two summations
    def relative(a, b):
        a, b = np.asarray(a, float), np.asarray(b, float)
        return float(np.max(np.abs(a - b) / np.maximum(1.0, np.abs(b)), initial=0.0))

    def replicas_identical(tree):
        return all(np.array_equal(np.asarray(x)[0], np.asarray(x)[1]) for x in jax.tree.leaves(tree))

    loss2, loss1 = (np.asarray(getattr(m.per_update, loss))[:, :3] for m in (m2, m1))
    first_leaf = jax.tree.leaves(port2.params)[0]
    out = {
        "num_devices": len(devices),
        "metrics_shape": list(getattr(m2.per_update, loss).shape),
        # params, optimiser, env states, observations, hidden states, normalisation statistics
        "max_diff_vs_one_device": {field: max((relative(a, b) for a, b in zip(
            jax.tree.leaves(getattr(port2, field)), jax.tree.leaves(getattr(port1, field)))), default=0.0)
            for field in port2.__dataclass_fields__},
        "loss_max_diff": float(np.max(np.abs(loss2 - loss1))),
        "losses_finite": bool(np.all(np.isfinite(loss2))),
        "params_replicas_identical": replicas_identical(state2.params),
        "stats_replicas_identical": replicas_identical((state2.obs_stats, state2.return_stats)),
        "obs_shape": list(port2.obs.shape),
        "seeds_differ": not np.allclose(first_leaf[0], first_leaf[1]),
    }
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
    assert result["metrics_shape"] == [3, 8]  # (seeds, the chunk's updates)
    assert result["params_replicas_identical"] and result["stats_replicas_identical"]
    assert result["losses_finite"] and result["loss_max_diff"] < 1e-5
    # Normalisation statistics sum over twice as many terms per device pair: a looser bound.
    bounds = {"obs_stats": 1e-4, "return_stats": 1e-4}
    differ = {field: diff for field, diff in result["max_diff_vs_one_device"].items()
              if not diff < bounds.get(field, 1e-5)}
    assert not differ, differ
    assert result["obs_shape"] == [3, 4, 4]  # (seeds, all envs, obs)
    assert result["seeds_differ"]
