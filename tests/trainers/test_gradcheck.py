"""`jax.grad` of every loss against central finite differences, in float64.

A tiny ActorCritic (one hidden layer of 4 units, 3-dim observations, a batch of 5) with a
categorical and with a Gaussian policy. x64 is switched on only inside `jax.enable_x64`,
which is scoped to these tests; the rest of the session stays in float32. The clipped
losses are evaluated at points where no sample sits near a kink of the clip or of the
min/max (the finite-difference step moves log-ratios and values by ~1e-6; the nearest kink
is >= 0.05 away), and with samples on both sides of each clip.
"""

from __future__ import annotations

import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np
import pytest

from trainers import networks
from trainers.algorithms.ppo import losses
from trainers.algorithms.ppo.trainer import PPO, Batch
from trainers.algorithms.reinforce.trainer import REINFORCE, PGBatch
from trainers.envs import EnvSpec
from trainers.hparams import DynamicHParams, StaticConfig

EPS = 1e-6
CLIP = 0.2
# log pi_new - log pi_old: inside the clip, outside it with the clipped term chosen
# (zero gradient), outside it with the unclipped term chosen (adv < 0 at ratio > 1.2).
LOG_RATIO = np.array([0.05, -0.1, 0.4, -0.4, 0.4])
ADVANTAGE = np.array([1.0, -0.5, 2.0, -1.5, -0.8])
# V_new - V_old: inside the clip, or outside it with the raw error the larger (sample 2:
# gradient through V) or the clipped one (sample 3: no gradient); no near-ties.
VALUE_DELTA = np.array([0.05, -0.1, 0.5, -0.5, 0.3])
VALUE_TARGET_OFFSET = np.array([1.0, -2.0, -1.0, -3.0, 0.7])


def fd_check(loss_fn, params, rtol=1e-5):
    """Compare jax.grad of `loss_fn(params)` with central differences over every param."""
    flat, unravel = jax.flatten_util.ravel_pytree(params)
    assert flat.dtype == jnp.float64
    f = jax.jit(lambda x: loss_fn(unravel(x)))
    grad = np.asarray(jax.jit(jax.grad(f))(flat))
    steps = EPS * jnp.eye(flat.size, dtype=jnp.float64)
    fd = np.asarray((jax.vmap(f)(flat + steps) - jax.vmap(f)(flat - steps)) / (2 * EPS))
    assert np.any(np.abs(grad) > 1e-3), "a check of an all-zero gradient proves nothing"
    np.testing.assert_allclose(grad, fd, rtol=rtol, atol=1e-8 * max(1.0, np.max(np.abs(grad))))
    return grad


@pytest.fixture(
    params=[(True, "param"), (False, "param"), (False, "state")], ids=["categorical", "gaussian", "gaussian-state-std"]
)
def setup(request):
    discrete, log_std = request.param
    with jax.enable_x64(True):
        spec = EnvSpec("fake", None, None, (3,), discrete, 2)
        static = StaticConfig(hidden_sizes=(4,), log_std=log_std)
        ppo, reinforce = PPO(static=static, spec=spec), REINFORCE(static=static, spec=spec)
        # A generic point, not the init: its policy head (scale 0.01) gives near-uniform
        # logits, where the entropy's gradient vanishes.
        rng = np.random.default_rng(0)
        params = ppo.network.init(jax.random.PRNGKey(0), jnp.zeros((1, 3)))
        params = jax.tree.map(lambda x: jnp.asarray(rng.normal(size=x.shape) * 0.7, jnp.float64), params)
        obs = jnp.asarray(rng.normal(size=(5, 3)))
        if discrete:
            action = jnp.array([0, 1, 1, 0, 1])
        else:
            action = jnp.asarray(rng.normal(size=(5, 2)))
        return dict(discrete=discrete, ppo=ppo, reinforce=reinforce, params=params, obs=obs, action=action)


def forward(trainer, params, obs, action, discrete):
    policy_out, log_std, value = trainer.network.apply(params, obs)  # float64 throughout
    return (
        networks.log_prob(policy_out, log_std, action, discrete),
        networks.entropy(policy_out, log_std, discrete),
        value,
    )


def ppo_batch(s):
    """A minibatch whose old log-probs and values sit at LOG_RATIO / VALUE_DELTA from the
    current ones."""
    log_prob, _, value = forward(s["ppo"], s["params"], s["obs"], s["action"], s["discrete"])
    return Batch(
        obs=s["obs"], action=s["action"], log_prob=log_prob - LOG_RATIO, value=value - VALUE_DELTA,
        advantage=jnp.asarray(ADVANTAGE), target=value + VALUE_TARGET_OFFSET,
    )


def test_clipped_surrogate(setup):
    with jax.enable_x64(True):
        mb = ppo_batch(setup)

        def loss(p):
            log_prob, _, _ = forward(setup["ppo"], p, setup["obs"], setup["action"], setup["discrete"])
            return losses.clipped_surrogate_loss(log_prob, mb.log_prob, mb.advantage, CLIP)[0]

        fd_check(loss, setup["params"])
        ratio = np.exp(LOG_RATIO)
        assert np.all(np.abs(np.abs(ratio - 1) - CLIP) > 0.05)  # away from the clip's kinks


def test_clipped_value_loss(setup):
    with jax.enable_x64(True):
        mb = ppo_batch(setup)

        def loss(p):
            _, _, value = forward(setup["ppo"], p, setup["obs"], setup["action"], setup["discrete"])
            return losses.clipped_value_loss(value, mb.value, mb.target, CLIP)

        fd_check(loss, setup["params"])
        # away from the kinks: |V - V_old| vs clip, and, where clipped, the two squared
        # errors not tied (inside the clip both terms are the same function)
        value = mb.value + VALUE_DELTA
        clipped = mb.value + np.clip(VALUE_DELTA, -CLIP, CLIP)
        assert np.all(np.abs(np.abs(VALUE_DELTA) - CLIP) > 0.05)
        outside = np.abs(VALUE_DELTA) > CLIP
        gap = np.abs((value - mb.target) ** 2 - (clipped - mb.target) ** 2)
        assert np.all(gap[outside] > 0.05)
        raw_wins = (value - mb.target) ** 2 > (clipped - mb.target) ** 2
        assert raw_wins[2] and not raw_wins[3]


def test_entropy_term(setup):
    with jax.enable_x64(True):

        def loss(p):
            _, entropy, _ = forward(setup["ppo"], p, setup["obs"], setup["action"], setup["discrete"])
            return -0.01 * jnp.mean(entropy)

        fd_check(loss, setup["params"])


def test_total_ppo_loss(setup):
    with jax.enable_x64(True):
        mb = ppo_batch(setup)
        hp = DynamicHParams(clip_eps=np.float32(CLIP), vf_coef=np.float32(0.5), ent_coef=np.float32(0.01))
        fd_check(lambda p: setup["ppo"]._loss(p, mb, mb.advantage, hp)[0], setup["params"])


@pytest.mark.parametrize("baseline", [0.0, 1.0])
def test_reinforce_objective(setup, baseline):
    with jax.enable_x64(True):
        rng = np.random.default_rng(1)
        batch = PGBatch(
            obs=setup["obs"], action=setup["action"], returns=jnp.asarray(rng.normal(size=5) * 3),
            advantage=jnp.asarray(rng.normal(size=5)), valid=jnp.array([1.0, 1.0, 0.0, 1.0, 1.0]),
        )
        hp = DynamicHParams(vf_coef=np.float32(0.5), ent_coef=np.float32(0.01), baseline=np.float32(baseline))
        grad = fd_check(lambda p: setup["reinforce"]._loss(p, batch, jnp.float64(4.0), hp)[0], setup["params"])
        # the value head (the last Dense layers' params in the flat vector) trains only with
        # the baseline on
        _, unravel = jax.flatten_util.ravel_pytree(setup["params"])
        value_grad = unravel(jnp.asarray(grad))["params"]
        value_norm = sum(
            float(jnp.sum(jnp.abs(x))) for k in ("Dense_2", "Dense_3") for x in jax.tree.leaves(value_grad[k])
        )
        assert (value_norm > 0) == bool(baseline)


def test_x64_stayed_inside_the_tests():
    assert jnp.ones(1).dtype == jnp.float32
