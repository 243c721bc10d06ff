"""Network options: the Gaussian policy's standard deviation (learned parameter or per
state), and the convolution in front of the MLP for image observations."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import linen as nn

from rltui.config.build import build_config
from rltui.config.keys import ConfigError
from trainers import networks
from trainers.hparams import StaticConfig

from helpers import TINY, build, count_compiles, host_metrics


@pytest.mark.parametrize("init", [0.0, -1.5])
def test_state_dependent_std_starts_at_log_std_init_and_varies_with_the_state(init):
    net = networks.ActorCritic(
        num_actions=2, discrete=False, hidden_sizes=(8,), log_std_mode="state", log_std_init=init
    )
    obs = jax.random.normal(jax.random.PRNGKey(0), (5, 3))
    params = net.init(jax.random.PRNGKey(1), obs)
    assert "log_std" not in params["params"]  # no state-independent parameter
    policy_out, log_std, value = net.apply(params, obs)
    assert policy_out.shape == (5, 2) and log_std.shape == (5, 2) and value.shape == (5,)
    # the head starts near zero (scale 0.01), so the std starts near exp(init)
    np.testing.assert_allclose(log_std, init, atol=0.05)
    params = jax.tree.map(lambda x: x * 30, params)  # a trained-looking point
    _, log_std, _ = net.apply(params, obs)
    assert float(jnp.std(log_std[:, 0])) > 1e-3
    assert np.all(np.exp(log_std) >= 1e-3)  # the floor
    entropy = networks.entropy(policy_out, log_std, False)
    assert entropy.shape == (5,)
    np.testing.assert_allclose(entropy, jnp.sum(log_std + 0.5 * (1 + np.log(2 * np.pi)), axis=-1), rtol=1e-5)


def test_learned_std_parameter_starts_at_log_std_init():
    net = networks.ActorCritic(num_actions=3, discrete=False, hidden_sizes=(8,), log_std_init=-0.5)
    params = net.init(jax.random.PRNGKey(0), jnp.zeros((1, 4)))
    np.testing.assert_array_equal(params["params"]["log_std"], [-0.5] * 3)
    _, log_std, _ = net.apply(params, jnp.zeros((7, 4)))
    assert log_std.shape == (3,)
    assert networks.entropy(jnp.zeros((7, 3)), log_std, False).shape == (7,)


@pytest.mark.parametrize("net", [
    networks.ActorCritic(num_actions=3, discrete=True, hidden_sizes=(8, 8)),
    networks.ActorCritic(num_actions=1, discrete=False, hidden_sizes=(8,)),  # one action: log_std (1,)
    networks.ActorCritic(num_actions=2, discrete=False, hidden_sizes=(8,), log_std_mode="state"),
    networks.ActorCritic(num_actions=3, discrete=True, hidden_sizes=(8,), image_shape=(3, 2, 2)),
], ids=["categorical", "gaussian-param-std", "gaussian-state-std", "cnn"])
def test_outputs_over_time_and_env_axes_are_each_rows_own(net):
    """The networks flatten leading axes into rows (a speed-up on CPU) and give them back:
    the output at [t, e] is the network's output for obs[t, e] alone, and a per-action
    log_std keeps its shape, also for a single observation.

    A batch and a single row run different matmul kernels, whose float32 sums round in a
    different order on different CPUs (vector width, FMA): each layer's sum of at most a
    dozen terms is off by a few ulps of its largest term. The tolerance (1e-4 of the
    outputs' scale) sits two orders of magnitude above that, and the test checks that it is
    still sharp: a row taken from the wrong place (a wrong axis order) lands, in the
    median, more than 100x the tolerance away."""
    obs = jax.random.normal(jax.random.PRNGKey(0), (4, 3, 12))  # (time, env, features)
    params = net.init(jax.random.PRNGKey(1), obs[0])
    params = jax.tree.map(lambda x: x * 5, params)  # outputs that differ between rows
    policy_out, log_std, value = net.apply(params, obs)
    assert policy_out.shape == (4, 3, 3 if net.discrete else net.num_actions) and value.shape == (4, 3)
    state_std = net.log_std_mode == "state" and not net.discrete

    def outputs(policy, log_std, value):  # everything a row produces, as one vector per row
        parts = [policy, np.asarray(value)[..., None]] + ([log_std] if state_std else [])
        return np.concatenate([np.asarray(p, np.float64) for p in parts], axis=-1)

    rows = outputs(policy_out, log_std, value)  # (time, env, outputs)
    rounding = 1e-4 * max(1.0, float(np.abs(rows).max()))
    for t, e in [(0, 0), (1, 2), (3, 1)]:
        one_out, one_log_std, one_value = net.apply(params, obs[t, e])
        distance = np.abs(rows - outputs(one_out, one_log_std, one_value)).max(axis=-1)  # (time, env)
        assert distance[t, e] <= rounding, f"row [{t}, {e}] differs from its own output by {distance[t, e]:g}"
        others = np.delete(distance.ravel(), t * distance.shape[1] + e)
        assert np.median(others) > 100 * rounding, f"other rows lie as close as {np.median(others):g}"
        if not state_std:
            assert one_log_std.shape == log_std.shape == (() if net.discrete else (net.num_actions,))


def test_image_patches_times_a_dense_layer_is_a_3x3_same_convolution():
    image = jax.random.normal(jax.random.PRNGKey(0), (2, 6, 5, 3))  # (batch, H, W, C)
    kernel = jax.random.normal(jax.random.PRNGKey(1), (3, 3, 3, 4))  # (kh, kw, in, out)
    expected = nn.Conv(4, (3, 3), padding="SAME", use_bias=False).apply({"params": {"kernel": kernel}}, image)
    got = networks._patches3x3(image) @ kernel.reshape(27, 4)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_cnn_network_trains_on_minatar_without_recompiling_across_chunks():
    static = StaticConfig(env_id="Breakout-MinAtar", network="cnn", **TINY)
    parallel, state, hp = build(static, seed=0)
    params = jax.tree.map(lambda x: x[0], state.params)["params"]
    conv_in = params["Dense_0"]["kernel"].shape[0]
    assert conv_in == 9 * parallel.trainer.spec.obs_shape[-1]  # 3x3 patches of every channel
    state, metrics = parallel.run_chunk(state, hp, 2)
    with count_compiles() as counter:
        state, metrics = parallel.run_chunk(state, hp.with_updates({"lr": 1e-3}), 3)
    assert counter.count == 0
    assert np.all(np.isfinite(host_metrics(metrics)["value_loss"]))


def test_cnn_on_flat_observations_and_a_bad_log_std_are_refused_with_one_line():
    with pytest.raises(ConfigError, match="network: cnn needs image observations"):
        build_config({}, {"env": "CartPole-v1", "network": "cnn"})
    with pytest.raises(ConfigError, match="log_std: expected one of param, state"):
        build_config({}, {"log_std": "tanh"})
    with pytest.raises(ConfigError, match=r"log_std_init: expected a number in \[-5, 2\]"):
        build_config({}, {"log_std_init": 3})


def test_held_noise_repeats_within_blocks_and_differs_between_them():
    from trainers.envs import make_env
    from trainers.rollout import rollout_randomness

    spec = make_env("Pendulum-v1")
    ids = jnp.arange(3)
    _, fresh, keys = rollout_randomness(jax.random.PRNGKey(0), ids, 3, spec, 8)
    _, held, held_keys = rollout_randomness(jax.random.PRNGKey(0), ids, 3, spec, 8, noise_hold=4)
    np.testing.assert_array_equal(held[:4], np.broadcast_to(fresh[0], held[:4].shape))
    np.testing.assert_array_equal(held[4:], np.broadcast_to(fresh[4], held[4:].shape))
    assert not np.allclose(held[0], held[4])
    # the env's own randomness is untouched
    jax.tree.map(np.testing.assert_array_equal, keys, held_keys)


def test_held_noise_keeps_actions_constant_where_the_policy_mean_is_constant():
    # The policy head starts near zero for every state: with noise held for the whole
    # rollout, each env repeats (almost) the same action; fresh noise does not.
    base = dict(env_id="Pendulum-v1", num_envs=2, num_steps=8, num_minibatches=2, update_epochs=1,
                hidden_sizes=(16,), max_chunk_updates=8)
    spreads = {}
    for hold in (1, 8):
        parallel, state, hp = build(StaticConfig(noise_hold=hold, **base), seed=0)
        trainer = parallel.trainer
        collected = jax.pmap(lambda s, k: trainer.collect(s, k, hp), axis_name="devices")(
            state, jnp.stack([jax.random.PRNGKey(3)])
        )
        actions = np.asarray(collected.traj.action)[0, :, :, 0]  # (time, env)
        spreads[hold] = float(np.max(actions.std(axis=0)))
    assert spreads[8] < 0.05 < spreads[1]
