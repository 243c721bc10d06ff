"""DQN's and SAC's presets (`trainers/algorithms/{dqn,sac}/presets.toml`) load, an env gets
them with its algorithm, and the recorded results reach their references."""

from __future__ import annotations

import pytest

from rltui.config import presets
from rltui.config.build import build_config

OFF_POLICY = ("dqn", "sac")


@pytest.mark.parametrize(
    "algo, env", [("dqn", "CartPole-v1"), ("sac", "Pendulum-v1"), ("sac", "Reacher-misc"), ("sac", "Swimmer-misc")]
)
def test_an_env_gets_its_algorithms_preset(algo, env):
    config = build_config({}, {"env": env, "algo": algo})
    for key, value in presets.preset(algo, env).items():
        expected = tuple(value) if isinstance(value, list) else value
        assert getattr(config, key) == pytest.approx(expected), key


def test_the_brax_pendulum_preset_is_sacs_own():
    # Read from the presets alone: building a Brax env's configuration needs Brax installed.
    assert presets.preset("sac", "brax:inverted_pendulum")["hidden_sizes"] == [64, 64]
    assert presets.preset("ppo", "brax:inverted_pendulum") == {}


@pytest.mark.parametrize("algo", OFF_POLICY)
def test_every_record_with_a_reference_reaches_it_on_the_mean(algo):
    records = {env: presets.result(algo, env) for env in presets.presets(algo)}
    assert records, algo
    for env, result in records.items():
        if result is not None and result.reference is not None:
            assert result.seeds >= 3 and result.mean >= result.reference, (algo, env)


@pytest.mark.parametrize(
    "algo, env",
    [("dqn", "CartPole-v1"), ("dqn", "Acrobot-v1"), ("sac", "MountainCarContinuous-v0"),
     ("sac", "brax:inverted_pendulum")],
)
def test_the_solved_records_reach_their_reference_on_every_seed(algo, env):
    result = presets.result(algo, env)
    assert result is not None and result.reference is not None and result.min >= result.reference


def test_sacs_records_match_ppos_preset_return_in_fewer_env_steps():
    # The point of an off-policy learner on these envs: PPO's return for a fraction of its
    # samples. Every env both algorithms have measured is held to it.
    both = {env: (presets.result("sac", env), presets.result("ppo", env)) for env in presets.presets("sac")}
    both = {env: pair for env, pair in both.items() if None not in pair}
    assert {"Pendulum-v1", "Reacher-misc", "Swimmer-misc"} <= set(both)
    for env, (sac, ppo) in both.items():
        assert sac.mean >= ppo.mean and sac.steps < ppo.steps, env
