"""A population (`num_members > 1`): members x seeds agents in one program, each member with
its own hyperparameters, freezing by mask, non-finite agents kept back, cloning."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest

from trainers.hparams import DynamicHParams, StaticConfig

from helpers import TINY, build, count_compiles, host_metrics

STATIC = StaticConfig(**TINY)
LRS = (1e-4, 3e-3, 1e-2)
POPULATION = dataclasses.replace(STATIC, num_members=len(LRS), num_seeds=2)
BASE = DynamicHParams.create(anneal_updates=100)


def per_agent(hp: DynamicHParams, num_seeds: int, **values) -> DynamicHParams:
    """Every leaf as one float32 per agent (member-major), `values` giving each member's."""
    members = len(next(iter(values.values())))
    out = {}
    for name, value in hp._asdict().items():
        column = values.get(name, [value] * members)
        out[name] = np.repeat(np.asarray(column, np.float32), num_seeds)
    return DynamicHParams(**out)


def leaf(tree, agent):
    return [np.asarray(x)[0, agent] for x in jax.tree.leaves(tree)]


@pytest.fixture(scope="module")
def population_run():
    parallel, state, hp = build(POPULATION, seed=7, hp=per_agent(BASE, 2, lr=LRS))
    state, metrics = parallel.run_chunk(state, hp, 5)
    return parallel, state, hp, metrics


def test_each_member_trains_like_a_single_run_with_its_values_and_seed(population_run):
    """Member m's seed s against a single run with lr = LRS[m] and seed 7 + s: two programs
    whose sums may round differently on another CPU; the tolerance (1e-6 absolute on losses
    of order 1e-4 and parameters of order 1) is thousands of rounding errors wide. The
    members' own losses differ by far more, which the test checks too."""
    _, state, _, metrics = population_run
    assert metrics.per_update.policy_loss.shape == (6, TINY["max_chunk_updates"])
    for member, lr in enumerate(LRS):
        for seed in range(2):
            agent = member * 2 + seed
            parallel, single_state, hp = build(STATIC, seed=7 + seed, hp=BASE._replace(lr=np.float32(lr)))
            single_state, single = parallel.run_chunk(single_state, hp, 5)
            np.testing.assert_allclose(metrics.per_update.policy_loss[agent, :5],
                                       host_metrics(single)["policy_loss"], atol=1e-6)
            np.testing.assert_allclose(metrics.per_update.lr[agent, :5], host_metrics(single)["lr"], rtol=1e-6)
            single_params = [np.asarray(x)[0] for x in jax.tree.leaves(single_state.params)]
            for a, b in zip(leaf(state.params, agent), single_params):
                np.testing.assert_allclose(a, b, atol=1e-6)
    # Different learning rates move the same initial parameters apart.
    first = np.concatenate([x.ravel() for x in leaf(state.params, 0)])
    last = np.concatenate([x.ravel() for x in leaf(state.params, 4)])
    assert np.abs(first - last).max() > 1e-4


def test_a_frozen_agent_keeps_its_state_exactly_and_editing_values_does_not_recompile(population_run):
    parallel, state, hp, _ = population_run
    before = jax.device_get(state)
    active = np.ones(6, bool)
    active[2:4] = False  # member 1
    with count_compiles() as compiles:
        state, metrics = parallel.run_chunk(state, hp._replace(gamma=np.linspace(0.9, 0.99, 6, dtype=np.float32)),
                                            2, active)
    assert compiles.count == 0
    after = jax.device_get(state)
    for name in ("params", "opt_state", "env_state", "key", "update_idx"):
        for a, b in zip(jax.tree.leaves(getattr(before, name)), jax.tree.leaves(getattr(after, name))):
            np.testing.assert_array_equal(np.asarray(a)[:, 2:4], np.asarray(b)[:, 2:4])
    assert np.asarray(after.update_idx)[0].tolist() == [7, 7, 5, 5, 7, 7]
    assert metrics.healthy.tolist() == [True] * 6


def test_an_agent_that_goes_non_finite_keeps_its_last_state_and_is_reported():
    parallel, state, _ = build(POPULATION, seed=0, hp=per_agent(BASE, 2, lr=LRS))
    hp = per_agent(BASE, 2, lr=(3e-4, 3e-4, 3e-4))
    bad = np.asarray(hp.lr).copy()
    bad[3] = np.inf  # member 1, seed 1
    before = jax.device_get(state.params)
    state, metrics = parallel.run_chunk(state, hp._replace(lr=bad), 2)
    assert metrics.healthy.tolist() == [True, True, True, False, True, True]
    after = jax.device_get(state.params)
    for a, b in zip(jax.tree.leaves(before), jax.tree.leaves(after)):
        np.testing.assert_array_equal(np.asarray(a)[:, 3], np.asarray(b)[:, 3])
        assert np.all(np.isfinite(np.asarray(b)))


def test_clone_copies_what_was_learned_exactly_and_keeps_the_targets_envs(population_run):
    parallel, state, hp, _ = population_run
    state, _ = parallel.run_chunk(state, hp, 1)
    before = jax.device_get(state)
    source = np.arange(6)
    source[0:2] = [4, 5]  # member 0 <- member 2, seed by seed
    with count_compiles() as compiles:
        cloned = parallel.clone(state, source)
        jax.block_until_ready(cloned)
    assert compiles.count <= 1  # the clone program, once; never the chunk
    after = jax.device_get(cloned)
    for name in ("params", "opt_state"):
        for a, b in zip(jax.tree.leaves(getattr(before, name)), jax.tree.leaves(getattr(after, name))):
            np.testing.assert_array_equal(np.asarray(b)[:, 0:2], np.asarray(a)[:, 4:6])
            np.testing.assert_array_equal(np.asarray(b)[:, 2:], np.asarray(a)[:, 2:])
    for a, b in zip(jax.tree.leaves(before.env_state), jax.tree.leaves(after.env_state)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    with count_compiles() as compiles:
        parallel.run_chunk(cloned, hp, 1)
    assert compiles.count == 0
