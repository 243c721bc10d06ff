import jax
import jax.numpy as jnp
import numpy as np
import pytest

from trainers.hparams import DynamicHParams, StaticConfig
from trainers.rollout import rollout

from helpers import TINY, build, count_compiles, edit_every_hparam, host_metrics


def test_hparam_edits_do_not_recompile_but_static_changes_do():
    static = StaticConfig(**TINY)
    parallel, state, hp = build(static, fresh=True)
    state, _ = parallel.run_chunk(state, hp, 2)  # compile once
    with count_compiles() as compiles:
        for edited in edit_every_hparam(hp):
            state, metrics = parallel.run_chunk(state, edited, 1)
        state, metrics = parallel.run_chunk(state, edited, 3)  # a different chunk length, too
        jax.block_until_ready(metrics)
    assert compiles.count == 0
    assert edited.lr.dtype == np.float32 and isinstance(edited.lr, np.float32)

    with count_compiles() as compiles:
        other, other_state, _ = build(StaticConfig(**{**TINY, "num_steps": 16}), fresh=True)
        jax.block_until_ready(other.run_chunk(other_state, hp, 1)[1])
    assert compiles.count >= 1


def test_with_updates_rejects_static_and_invalid_values():
    hp = DynamicHParams()
    with pytest.raises(KeyError):
        hp.with_updates({"num_envs": 8})
    with pytest.raises(ValueError):
        hp.with_updates({"gamma": 1.5})
    assert hp.with_updates({"gamma": 1}).gamma == np.float32(1.0)


def test_same_seed_same_metrics_different_seed_differs():
    static = StaticConfig(**TINY)
    runs = []
    for seed in (3, 3, 4):
        parallel, state, hp = build(static, seed=seed)
        state, m1 = parallel.run_chunk(state, hp, 4)
        state, m2 = parallel.run_chunk(state, hp, 4)
        runs.append({k: np.concatenate([host_metrics(m1)[k], host_metrics(m2)[k]]) for k in host_metrics(m1)})
    for key in runs[0]:
        np.testing.assert_array_equal(runs[0][key], runs[1][key], err_msg=key)
    assert not np.array_equal(runs[0]["policy_loss"], runs[2]["policy_loss"])


def test_metrics_report_each_update_and_the_learning_rate_used():
    static = StaticConfig(**TINY)
    hp = DynamicHParams.create(lr=1e-3, anneal_lr=1.0, anneal_updates=10)
    parallel, state, hp = build(static, hp=hp)
    state, metrics = parallel.run_chunk(state, hp, 5)
    m = host_metrics(metrics)
    assert len(m["lr"]) == 5
    np.testing.assert_allclose(m["lr"], 1e-3 * (1 - np.arange(5) / 10), rtol=1e-6)
    for key in ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_frac", "grad_norm"):
        assert np.all(np.isfinite(m[key])), key
    # an edit to lr changes the rate used from the next update on
    state, metrics = parallel.run_chunk(state, hp.with_updates({"lr": 5e-4}), 1)
    assert host_metrics(metrics)["lr"][0] == pytest.approx(5e-4 * (1 - 5 / 10), rel=1e-6)


def test_episode_return_is_nan_when_no_episode_finishes_and_mean_otherwise():
    # CartPole episodes last at least ~8 steps: a 2-step rollout right after reset finishes none.
    static = StaticConfig(**{**TINY, "num_steps": 2, "num_minibatches": 1})
    parallel, state, hp = build(static)
    state, metrics = parallel.run_chunk(state, hp, 1)
    assert np.isnan(host_metrics(metrics)["episode_return"][0])
    state, metrics = parallel.run_chunk(state, hp, 60)
    m = host_metrics(metrics)
    finished = m["episodes"] > 0
    assert finished.any()
    # CartPole pays 1 per step, so the mean return of finished episodes equals their mean length
    np.testing.assert_allclose(m["episode_return"][finished], m["episode_length"][finished], rtol=1e-6)


def test_rollout_final_obs_is_pre_reset_observation():
    """GAE bootstraps truncated episodes from `final_obs`: it must be the observation the step
    reached, which differs from the next observation exactly where an episode ended."""
    static = StaticConfig(**TINY)
    parallel, state, hp = build(static)
    trainer = parallel.trainer
    single = jax.tree.map(lambda x: x[0], state)

    def run(s):
        ids = trainer._env_ids()
        return rollout(s.params, s.env_state, s.obs, s.key, ids, num_global_envs=2, spec=trainer.spec,
                       apply_fn=trainer.apply, num_steps=100)

    _, last_obs, _, traj = jax.pmap(run, axis_name="devices")(jax.tree.map(lambda x: x[None], single))
    traj = jax.tree.map(lambda x: np.asarray(x[0]), traj)
    next_obs = np.concatenate([traj.obs[1:], np.asarray(last_obs)[0][None]], axis=0)
    done = traj.terminated | traj.truncated
    assert done.any()
    same = np.all(np.isclose(traj.final_obs, next_obs), axis=-1)
    np.testing.assert_array_equal(same, ~done)


@pytest.mark.parametrize(
    "env_id",
    ["CartPole-v1", "Acrobot-v1", "MountainCar-v0", "Pendulum-v1", "MountainCarContinuous-v0",
     "Breakout-MinAtar", "SpaceInvaders-MinAtar"],
)
def test_trains_on_each_listed_env(env_id):
    static = StaticConfig(**{**TINY, "env_id": env_id})
    parallel, state, hp = build(static)
    params_before = jax.tree.map(np.asarray, parallel.unreplicate(state.params))
    state, metrics = parallel.run_chunk(state, hp, 2)
    m = host_metrics(metrics)
    assert np.all(np.isfinite(m["policy_loss"])) and np.all(np.isfinite(m["value_loss"]))
    params_after = jax.tree.map(np.asarray, parallel.unreplicate(state.params))
    changed = jax.tree.map(lambda a, b: not np.array_equal(a, b), params_before, params_after)
    assert any(jax.tree.leaves(changed))


def test_continuous_actions_are_clipped_to_bounds():
    from trainers.envs import make_env
    from trainers.rollout import env_action

    spec = make_env("Pendulum-v1")
    clipped = np.asarray(env_action(spec, jnp.array([[-5.0], [0.5], [5.0]])))
    np.testing.assert_allclose(clipped[:, 0], [-2.0, 0.5, 2.0])


@pytest.mark.parametrize(
    "num_envs, num_steps",
    [(4, 300), (2, 700)],  # Pendulum truncates at 200 steps: up to 4 cuts in 4 envs, then 6 in 2
    ids=["few-truncations", "many-truncations"],
)
def test_bootstrap_values_match_the_network_on_each_final_observation(num_envs, num_steps):
    """GAE reads V(final observation) wherever a step did not terminate. The trainer takes it
    from the rollout's own values where the episode went on, and from the network where a
    time limit cut it, so it must equal one pass of the network over every final observation."""
    static = StaticConfig(**{**TINY, "env_id": "Pendulum-v1", "num_envs": num_envs, "num_steps": num_steps,
                             "num_minibatches": 1})
    parallel, state, hp = build(static)
    trainer = parallel.trainer

    def values(s):
        collected = trainer.collect(s, s.key, hp)
        full = trainer.apply(s.params, collected.traj.final_obs).value
        return trainer.bootstrap_values(s.params, collected), full, collected.traj.truncated

    ours, full, truncated = jax.tree.map(lambda x: np.asarray(x[0]), jax.pmap(values, axis_name="devices")(state))
    assert truncated.sum() >= num_envs  # every env was cut by its time limit at least once
    np.testing.assert_allclose(ours, full, rtol=1e-5, atol=1e-6)
