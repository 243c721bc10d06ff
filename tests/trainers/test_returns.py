import numpy as np
import pytest

from trainers.returns import discounted_returns, gae


def gae_oracle(rewards, values, next_values, terminated, truncated, gamma, lam):
    """Plain-Python GAE, one environment at a time."""
    T, E = rewards.shape
    adv = np.zeros((T, E))
    for e in range(E):
        running = 0.0
        for t in reversed(range(T)):
            done = terminated[t, e] or truncated[t, e]
            nv = 0.0 if terminated[t, e] else next_values[t, e]
            delta = rewards[t, e] + gamma * nv - values[t, e]
            running = delta + (0.0 if done else gamma * lam * running)
            adv[t, e] = running
    return adv, adv + values


def returns_oracle(rewards, dones, gamma):
    T, E = rewards.shape
    out = np.zeros((T, E))
    for e in range(E):
        g = 0.0
        for t in reversed(range(T)):
            g = rewards[t, e] + (0.0 if dones[t, e] else gamma * g)
            out[t, e] = g
    return out


@pytest.fixture
def rollout_arrays():
    rng = np.random.default_rng(0)
    T, E = 12, 3
    rewards = rng.normal(size=(T, E)).astype(np.float32)
    values = rng.normal(size=(T, E)).astype(np.float32)
    next_values = rng.normal(size=(T, E)).astype(np.float32)
    terminated = np.zeros((T, E), bool)
    truncated = np.zeros((T, E), bool)
    terminated[4, 0] = True  # termination mid-rollout
    truncated[7, 1] = True  # truncation mid-rollout: bootstraps from next_values
    terminated[9, 2] = truncated[9, 2] = True  # both: termination wins, no bootstrap
    truncated[T - 1, 0] = True
    return rewards, values, next_values, terminated, truncated


def test_gae_matches_plain_python_with_termination_and_truncation(rollout_arrays):
    rewards, values, next_values, terminated, truncated = rollout_arrays
    adv, target = gae(rewards, values, next_values, terminated, truncated, 0.97, 0.9)
    want_adv, want_target = gae_oracle(rewards, values, next_values, terminated, truncated, 0.97, 0.9)
    np.testing.assert_allclose(np.asarray(adv), want_adv, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(target), want_target, rtol=1e-5, atol=1e-5)


def test_gae_truncation_bootstraps_and_termination_does_not(rollout_arrays):
    rewards, values, next_values, terminated, truncated = rollout_arrays
    adv, _ = gae(rewards, values, next_values, terminated, truncated, 0.97, 0.9)
    # truncated step: advantage is the one-step TD error with the bootstrap value
    assert adv[7, 1] == pytest.approx(rewards[7, 1] + 0.97 * next_values[7, 1] - values[7, 1], rel=1e-5)
    # terminated step: no bootstrap at all
    assert adv[4, 0] == pytest.approx(rewards[4, 0] - values[4, 0], rel=1e-5)
    assert adv[9, 2] == pytest.approx(rewards[9, 2] - values[9, 2], rel=1e-5)


def test_gae_with_lambda_one_and_no_ends_is_discounted_return_minus_value():
    rewards = np.ones((5, 1), np.float32)
    values = np.zeros((5, 1), np.float32)
    next_values = np.zeros((5, 1), np.float32)
    never = np.zeros((5, 1), bool)
    adv, _ = gae(rewards, values, next_values, never, never, 0.5, 1.0)
    np.testing.assert_allclose(np.asarray(adv[:, 0]), [1.9375, 1.875, 1.75, 1.5, 1.0], rtol=1e-6)


def test_discounted_returns_match_plain_python(rollout_arrays):
    rewards, _, _, terminated, truncated = rollout_arrays
    dones = terminated | truncated
    got = discounted_returns(rewards, dones, 0.9)
    np.testing.assert_allclose(np.asarray(got), returns_oracle(rewards, dones, 0.9), rtol=1e-5, atol=1e-6)
