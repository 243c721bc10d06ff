import math

import numpy as np
import pytest

from trainers.algorithms.ppo.losses import clipped_surrogate_loss, clipped_value_loss
from trainers.base import actor_critic_loss
from trainers.networks import entropy, log_prob


def test_clipped_surrogate_by_hand():
    # ratios e^0.1 = 1.105 (inside the clip), e^0.5 = 1.649 (clipped to 1.2), e^-0.5 = 0.607 (clipped to 0.8)
    old = np.zeros(3, np.float32)
    new = np.array([0.1, 0.5, -0.5], np.float32)
    adv = np.array([1.0, 2.0, -1.0], np.float32)
    loss, kl, clip_frac = clipped_surrogate_loss(new, old, adv, 0.2)
    r = np.exp(new)
    terms = [min(r[0] * 1.0, r[0] * 1.0), min(r[1] * 2.0, 1.2 * 2.0), min(r[2] * -1.0, 0.8 * -1.0)]
    assert float(loss) == pytest.approx(-sum(terms) / 3, rel=1e-6)
    assert terms == pytest.approx([1.1051709, 2.4, -0.8], rel=1e-6)
    assert float(kl) == pytest.approx(np.mean((r - 1) - new), rel=1e-5)
    assert float(clip_frac) == pytest.approx(2 / 3)


def test_clipped_value_loss_by_hand():
    value = np.array([1.0, 3.0], np.float32)
    old_value = np.array([0.5, 2.0], np.float32)
    target = np.array([2.0, 2.5], np.float32)
    # sample 0: raw err 1.0^2 = 1; clipped v = 0.7 -> 1.3^2 = 1.69 -> max 1.69
    # sample 1: raw err 0.5^2 = 0.25; clipped v = 2.2 -> 0.3^2 = 0.09 -> max 0.25
    got = clipped_value_loss(value, old_value, target, 0.2)
    assert float(got) == pytest.approx(0.5 * (1.69 + 0.25) / 2, rel=1e-5)


def test_total_loss_combines_terms():
    assert float(actor_critic_loss(1.0, 2.0, 0.5, 0.5, 0.01)) == pytest.approx(1.0 + 1.0 - 0.005)


def test_categorical_log_prob_and_entropy_by_hand():
    logits = np.log(np.array([[0.2, 0.3, 0.5]], np.float32))
    assert float(log_prob(logits, 0.0, np.array([2]), True)[0]) == pytest.approx(math.log(0.5), rel=1e-6)
    want = -(0.2 * math.log(0.2) + 0.3 * math.log(0.3) + 0.5 * math.log(0.5))
    assert float(entropy(logits, 0.0, True)[0]) == pytest.approx(want, rel=1e-6)


def test_gaussian_log_prob_and_entropy_by_hand():
    mean = np.array([[0.0, 1.0]], np.float32)
    log_std = np.array([0.0, math.log(2.0)], np.float32)
    action = np.array([[1.0, 2.0]], np.float32)
    want = (-0.5 * 1.0 - 0.5 * math.log(2 * math.pi)) + (-0.5 * 0.25 - math.log(2.0) - 0.5 * math.log(2 * math.pi))
    assert float(log_prob(mean, log_std, action, False)[0]) == pytest.approx(want, rel=1e-6)
    want_h = sum(0.5 * math.log(2 * math.pi * math.e * s**2) for s in (1.0, 2.0))
    assert float(entropy(mean, log_std, False)[0]) == pytest.approx(want_h, rel=1e-6)
