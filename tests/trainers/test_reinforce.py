"""REINFORCE: masked returns, the loss by hand, the score-function gradient, live edits
without recompiling, and that it learns CartPole."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from trainers import networks
from trainers.algorithms.reinforce import losses
from trainers.algorithms.reinforce.trainer import REINFORCE, PGBatch, make_trainer, reinforce_advantage
from trainers.base import AXIS
from trainers.envs import EnvSpec
from trainers.hparams import DynamicHParams, StaticConfig
from trainers.parallel import DataParallel
from trainers.returns import discounted_returns

from helpers import count_compiles, host_metrics, train_returns

TINY = dict(algo="reinforce", num_envs=2, num_steps=64, hidden_sizes=(16,), max_chunk_updates=8)


def on_one_device(fn, *args):
    """Run `fn` with the device axis bound (size 1), as inside DataParallel's pmap."""
    return jax.tree.map(lambda x: x[0], jax.vmap(fn, axis_name=AXIS)(*jax.tree.map(lambda x: x[None], args)))


def hparams(**values):
    return DynamicHParams.create(anneal_lr=0.0, **values)


# --- returns and the complete-episodes mask ------------------------------------------------
def test_returns_and_mask_by_hand_with_truncation_and_rollout_boundaries():
    gamma = 0.5
    # time x env. env 0: its episode began in an earlier rollout and terminates at t=1, then
    # a new episode runs past the end. env 1: truncated at t=3 (no bootstrap), terminated at
    # the last step. env 2: one episode longer than the rollout.
    rewards = np.array([[1, 10, 1], [2, 20, 1], [4, 30, 1], [8, 40, 1], [16, 50, 1], [32, 60, 1]], np.float32)
    terminated = np.zeros((6, 3), bool)
    truncated = np.zeros((6, 3), bool)
    terminated[1, 0] = True
    truncated[3, 1] = True
    terminated[5, 1] = True
    done = terminated | truncated

    valid = np.asarray(losses.complete_episode_mask(jnp.asarray(done)))
    np.testing.assert_array_equal(valid[:, 0], [1, 1, 0, 0, 0, 0])
    np.testing.assert_array_equal(valid[:, 1], [1, 1, 1, 1, 1, 1])
    np.testing.assert_array_equal(valid[:, 2], [0, 0, 0, 0, 0, 0])
    assert valid.dtype == np.float32

    g = np.asarray(discounted_returns(jnp.asarray(rewards), jnp.asarray(done), gamma))
    # env 0: G1 = 2, G0 = 1 + 0.5 * 2; the tail (t >= 2) is cut, whatever its value.
    np.testing.assert_allclose(g[:2, 0], [2.0, 2.0])
    # env 1: G3 = 40 (truncated: no bootstrap), G2 = 30 + 20, G1 = 20 + 25, G0 = 10 + 22.5;
    # G5 = 60, G4 = 50 + 30.
    np.testing.assert_allclose(g[:, 1], [32.5, 45.0, 50.0, 40.0, 80.0, 60.0])


def test_incomplete_tail_changes_neither_loss_nor_gradient():
    """Steps after an env's last episode end (rewards, observations, actions, values) are
    masked out of the loss, of its gradient and of the normalisation statistics."""
    trainer = REINFORCE(static=StaticConfig(hidden_sizes=(8,)), spec=EnvSpec("fake", None, None, (3,), True, 2))
    params = trainer.network.init(jax.random.PRNGKey(0), jnp.zeros((1, 3)))
    rng = np.random.default_rng(0)
    T, E = 6, 2
    done = np.zeros((T, E), bool)
    done[2, 0] = done[4, 1] = True

    @jax.jit
    def loss_and_grad(rewards, obs, action, values, hp):
        valid = losses.complete_episode_mask(jnp.asarray(done))
        returns = discounted_returns(rewards, jnp.asarray(done), hp.gamma)
        advantage = on_one_device(lambda g, v, m: reinforce_advantage(g, v, m, hp), returns, values, valid)
        batch = PGBatch(obs, action, returns, advantage, valid)
        return jax.value_and_grad(lambda p: trainer._loss(p, batch, jnp.sum(valid), hp)[0])(params)

    rewards = rng.normal(size=(T, E)).astype(np.float32)
    obs = rng.normal(size=(T, E, 3)).astype(np.float32)
    action = rng.integers(0, 2, size=(T, E))
    values = rng.normal(size=(T, E)).astype(np.float32)
    tail = np.zeros((T, E), bool)
    tail[3:, 0] = tail[5:, 1] = True
    for hp in (hparams(), hparams(baseline=0.0, normalize_returns=0.0)):
        want_loss, want_grad = loss_and_grad(rewards, obs, action, values, hp)
        loss, grad = loss_and_grad(
            np.where(tail, 100.0, rewards), np.where(tail[..., None], -7.0, obs), np.where(tail, 1 - action, action),
            np.where(tail, 55.0, values), hp,
        )
        assert float(loss) == pytest.approx(float(want_loss), rel=1e-6)
        jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7), grad, want_grad)


# --- the loss by hand ----------------------------------------------------------------------
def test_policy_and_value_losses_by_hand():
    log_prob = jnp.array([-0.5, -1.0, -2.0, -0.1])
    advantage = jnp.array([2.0, -1.0, 3.0, 5.0])
    value = jnp.array([1.0, 0.0, 2.0, 9.0])
    valid = jnp.array([1.0, 1.0, 1.0, 0.0])
    # -(-0.5 * 2 + -1 * -1 + -2 * 3) / 3 = 2; the fourth step is masked out
    assert float(losses.policy_gradient_loss(log_prob, advantage, valid, 3.0)) == pytest.approx(2.0)
    # 0.5 * ((1-2)^2 + (0+1)^2 + (2-3)^2) / 3 = 0.5
    assert float(losses.value_regression_loss(value, advantage, valid, 3.0)) == pytest.approx(0.5)
    assert float(losses.masked_mean(log_prob, valid, 3.0)) == pytest.approx(-3.5 / 3)
    assert float(losses.masked_mean(log_prob, jnp.zeros(4), 0.0)) == 0.0  # nothing valid: 0, not NaN


@pytest.mark.parametrize(
    "baseline,normalize,want",
    [
        (0.0, 0.0, [2.0, -1.0, 3.0]),  # A = G
        (1.0, 0.0, [1.0, -1.0, 1.0]),  # A = G - V
        # (G - 4/3) / std(2, -1, 3) over the valid steps only
        (0.0, 1.0, (np.array([2.0, -1.0, 3.0]) - 4 / 3) / np.sqrt(((2 / 3) ** 2 + (7 / 3) ** 2 + (5 / 3) ** 2) / 3)),
        # (G - V - 1/3) / std(1, -1, 1) = (A - 1/3) / sqrt(8/9)
        (1.0, 1.0, (np.array([1.0, -1.0, 1.0]) - 1 / 3) / np.sqrt(8 / 9)),
    ],
)
def test_advantage_with_and_without_baseline_and_normalisation(baseline, normalize, want):
    returns = jnp.array([2.0, -1.0, 3.0, 5.0])
    values = jnp.array([1.0, 0.0, 2.0, 100.0])
    valid = jnp.array([1.0, 1.0, 1.0, 0.0])  # the last step's episode did not end
    hp = hparams(baseline=baseline, normalize_returns=normalize)
    adv = on_one_device(lambda g, v, m: reinforce_advantage(g, v, m, hp), returns, values, valid)
    np.testing.assert_allclose(np.asarray(adv)[:3], want, rtol=1e-5)


def test_normalisation_statistics_span_all_devices_weighted_by_valid_steps():
    """Two devices with different numbers of valid steps: the statistics are those of the
    pooled valid steps, not a mean of per-device means."""
    returns = jnp.array([[1.0, 2.0, 3.0, 4.0], [10.0, 20.0, 30.0, 40.0]])
    valid = jnp.array([[1.0, 1.0, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    hp = hparams(baseline=0.0, normalize_returns=1.0)
    adv = jax.vmap(lambda g, m: reinforce_advantage(g, jnp.zeros_like(g), m, hp), axis_name=AXIS)(returns, valid)
    pooled = np.array([1.0, 2.0, 3.0, 10.0])
    want = (pooled - pooled.mean()) / (pooled.std() + 1e-8)
    np.testing.assert_allclose(np.asarray(adv)[0, :3], want[:3], rtol=1e-5)
    np.testing.assert_allclose(np.asarray(adv)[1, 0], want[3], rtol=1e-5)


@pytest.mark.parametrize("baseline,normalize", [(0.0, 0.0), (1.0, 0.0), (0.0, 1.0), (1.0, 1.0)])
def test_total_loss_combines_terms_by_hand(baseline, normalize):
    spec = EnvSpec("fake", None, None, (3,), True, 2)
    trainer = REINFORCE(static=StaticConfig(hidden_sizes=(4,)), spec=spec)
    params = trainer.network.init(jax.random.PRNGKey(1), jnp.zeros((1, 3)))
    rng = np.random.default_rng(1)
    obs = jnp.asarray(rng.normal(size=(5, 3)), jnp.float32)
    action = jnp.array([0, 1, 1, 0, 1])
    returns = jnp.array([3.0, 2.0, 1.0, 4.0, 9.0])
    advantage = jnp.array([0.5, -1.0, 2.0, 0.0, 7.0])
    valid = jnp.array([1.0, 1.0, 1.0, 1.0, 0.0])
    hp = hparams(baseline=baseline, normalize_returns=normalize, vf_coef=0.5, ent_coef=0.01)
    total, info = trainer._loss(params, PGBatch(obs, action, returns, advantage, valid), 4.0, hp)
    pl, vl, ent = info.policy_loss, info.value_loss, info.entropy

    logits, _, value = trainer.apply(params, obs)
    logp_all = np.asarray(jax.nn.log_softmax(logits))
    logp = logp_all[np.arange(5), np.asarray(action)]
    m = np.asarray(valid) > 0
    want_pl = -np.mean(logp[m] * np.asarray(advantage)[m])
    want_vl = 0.5 * np.mean((np.asarray(value)[m] - np.asarray(returns)[m]) ** 2)
    want_ent = np.mean(-np.sum(np.exp(logp_all) * logp_all, axis=-1)[m])
    assert float(pl) == pytest.approx(want_pl, rel=1e-5)
    assert float(vl) == pytest.approx(want_vl, rel=1e-5)
    assert float(ent) == pytest.approx(want_ent, rel=1e-5)
    # the value regression only counts with the baseline on
    assert float(total) == pytest.approx(want_pl + baseline * 0.5 * want_vl - 0.01 * want_ent, rel=1e-5)


@pytest.mark.parametrize("discrete", [True, False])
@pytest.mark.parametrize("baseline,normalize", [(0.0, 0.0), (1.0, 0.0), (0.0, 1.0), (1.0, 1.0)])
def test_gradient_is_the_score_function_estimate(discrete, baseline, normalize):
    """grad of the policy loss = -mean(valid * grad log pi(a|s) * A), each term's gradient
    taken separately. The advantage is built from the params being differentiated
    (A = G - V_params(s)), so this also checks it is never differentiated."""
    spec = EnvSpec("fake", None, None, (3,), discrete, 2)
    trainer = REINFORCE(static=StaticConfig(hidden_sizes=(8,)), spec=spec)
    params = trainer.network.init(jax.random.PRNGKey(2), jnp.zeros((1, 3)))
    rng = np.random.default_rng(2)
    T, E = 5, 2
    obs = jnp.asarray(rng.normal(size=(T, E, 3)), jnp.float32)
    action = (
        jnp.asarray(rng.integers(0, 2, size=(T, E)))
        if discrete
        else jnp.asarray(rng.normal(size=(T, E, 2)), jnp.float32)
    )
    returns = jnp.asarray(rng.normal(size=(T, E)) * 5, jnp.float32)
    valid = jnp.asarray(rng.random((T, E)) < 0.7, jnp.float32)
    count = jnp.sum(valid)
    hp = hparams(baseline=baseline, normalize_returns=normalize)

    def advantage_of(p):
        _, _, value = trainer.apply(p, obs)
        return on_one_device(lambda g, v, m: reinforce_advantage(g, v, m, hp), returns, value, valid)

    def policy_loss(p):
        policy_out, log_std, _ = trainer.apply(p, obs)
        log_prob = networks.log_prob(policy_out, log_std, action, discrete)
        return losses.policy_gradient_loss(log_prob, advantage_of(p), valid, count)

    def log_pi(p, o, a):
        policy_out, log_std, _ = trainer.apply(p, o)
        return networks.log_prob(policy_out, log_std, a, discrete)

    got = jax.jit(jax.grad(policy_loss))(params)
    adv = jax.jit(advantage_of)(params)
    # one gradient of log pi per step, then the weighted mean over the valid steps
    per_step = jax.vmap(jax.vmap(jax.grad(log_pi), in_axes=(None, 0, 0)), in_axes=(None, 0, 0))(params, obs, action)
    want = jax.tree.map(lambda g: -jnp.einsum("te,te...->...", valid * adv, g) / count, per_step)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6), got, want)
    # the value head gets no gradient from the policy loss
    value_leaves = [x for path, x in jax.tree_util.tree_leaves_with_path(got) if "Dense_2" in jax.tree_util.keystr(path)
                    or "Dense_3" in jax.tree_util.keystr(path)]
    assert all(np.all(np.asarray(x) == 0) for x in value_leaves)


# --- the trainer through DataParallel ------------------------------------------------------
_PARALLEL: dict = {}


def parallel_for(static: StaticConfig) -> DataParallel:
    """One DataParallel (and so one compiled chunk) per static config: compiling is the slow
    part of these tests."""
    if static not in _PARALLEL:
        _PARALLEL[static] = DataParallel(make_trainer(static, 1), jax.local_devices()[:1])
    return _PARALLEL[static]


def build(static, seed=0, hp=None):
    parallel = parallel_for(static)
    hp = hp if hp is not None else hparams(lr=1e-3)
    return parallel, parallel.init(jax.random.PRNGKey(seed), hp), hp


def test_updates_through_data_parallel_with_ppo_metrics():
    parallel, state, hp = build(StaticConfig(**TINY))
    before = jax.tree.map(np.asarray, parallel.unreplicate(state.params))
    state, metrics = parallel.run_chunk(state, hp, 3)
    m = host_metrics(metrics)
    assert len(m["lr"]) == 3
    for key in ("policy_loss", "value_loss", "entropy", "approx_kl", "grad_norm", "episode_return"):
        assert np.all(np.isfinite(m[key])), key
    assert np.all(np.isnan(m["clip_frac"]))  # not defined without a clipped objective
    assert np.all(m["approx_kl"] >= 0) and np.all(m["approx_kl"] < 0.1)
    assert np.all(m["entropy"] > 0.6)  # two actions, near uniform at the start
    after = jax.tree.map(np.asarray, parallel.unreplicate(state.params))
    assert any(jax.tree.leaves(jax.tree.map(lambda a, b: not np.array_equal(a, b), before, after)))


def test_no_step_when_no_episode_ends_in_the_rollout():
    # CartPole episodes last at least ~8 steps: a 2-step rollout right after reset ends none,
    # so no step has a return; Adam's momentum must not move the params either.
    parallel, state, hp = build(StaticConfig(**{**TINY, "num_steps": 2}))
    before = jax.tree.map(np.asarray, parallel.unreplicate((state.params, state.opt_state)))
    state, metrics = parallel.run_chunk(state, hp, 1)
    after = jax.tree.map(np.asarray, parallel.unreplicate((state.params, state.opt_state)))
    jax.tree.map(np.testing.assert_array_equal, before, after)
    m = host_metrics(metrics)
    assert m["episodes"][0] == 0 and np.isnan(m["episode_return"][0])
    assert int(parallel.unreplicate(state.update_idx)) == 1


def test_hparam_edits_and_switches_do_not_recompile():
    parallel, state, hp = build(StaticConfig(**TINY))
    state, _ = parallel.run_chunk(state, hp, 2)  # compile once
    edits = [{"lr": 5e-4}, {"gamma": 0.9}, {"ent_coef": 0.0}, {"vf_coef": 1.0}, {"max_grad_norm": 10.0},
             {"baseline": 0.0}, {"normalize_returns": 0.0}, {"baseline": 1.0}, {"normalize_returns": 1.0}]
    results = []
    with count_compiles() as compiles:
        for changes in edits:
            hp = hp.with_updates(changes)
            state, metrics = parallel.run_chunk(state, hp, 1)
            results.append(host_metrics(metrics))
        state, metrics = parallel.run_chunk(state, hp, 3)  # another chunk length
        jax.block_until_ready(metrics)
    assert compiles.count == 0
    assert results[0]["lr"][0] == pytest.approx(5e-4)
    with pytest.raises(ValueError):
        hp.with_updates({"baseline": 0.5})


def test_same_seed_same_metrics():
    static = StaticConfig(**TINY)
    runs = []
    for seed in (5, 5, 6):
        parallel, state, hp = build(static, seed=seed)
        state, metrics = parallel.run_chunk(state, hp, 4)
        runs.append(host_metrics(metrics))
    for key in runs[0]:
        np.testing.assert_array_equal(runs[0][key], runs[1][key], err_msg=key)
    assert not np.array_equal(runs[0]["policy_loss"], runs[2]["policy_loss"])


# --- learning ------------------------------------------------------------------------------
LEARN = StaticConfig(algo="reinforce", env_id="CartPole-v1", num_envs=8, num_steps=512, max_chunk_updates=150)
LEARN_HP = dict(lr=5e-3, max_grad_norm=100.0, anneal_lr=1.0)


def train(seed: int, updates: int) -> np.ndarray:
    return train_returns(LEARN, updates, seed, DynamicHParams.create(anneal_updates=updates, **LEARN_HP))


@pytest.mark.parametrize("seed", [0, 1])
def test_cartpole_reaches_475_within_615k_steps(seed):
    """Budget: 150 updates of 8 envs x 512 steps (614,400 env steps), lr 5e-3 annealed to 0,
    baseline and normalisation on, max_grad_norm 100, gamma 0.99, ent_coef 0.01, (64, 64)
    tanh. About 4 s of training per seed on a loaded 2-core CPU (plus ~5 s compile).
    Measured here, mean return of the last 10 updates, seeds 0-9: 500, 500, 483, 500, 500,
    500, 483, 500, 484, 486.

    max_grad_norm matters: PPO's 0.5 clips every step (the norm is ~100-170, mostly the
    value regression on raw returns), which couples the policy's step size to the value
    loss; with it REINFORCE reached 475 and then collapsed on several seeds."""
    returns = train(seed, 150)
    assert np.nanmean(returns[:5]) < 60  # starts near random
    assert np.nanmean(returns[-10:]) >= 475
