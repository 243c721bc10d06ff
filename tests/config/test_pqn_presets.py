"""PQN's presets (`trainers/algorithms/pqn/presets.toml`) load, and an env gets them with
`algo = "pqn"` and not with PPO."""

from __future__ import annotations

import pytest

from rltui.config import presets
from rltui.config.build import build_config
from trainers.algorithms import ALGORITHMS


def pqn_config(env: str, **overrides):
    return build_config({}, {"env": env, "algo": "pqn", **overrides})


def test_pqn_declares_the_classic_and_minatar_families():
    families = presets.families("pqn")
    assert set(families) >= {"classic", "minatar"}
    assert families["classic"] == {}  # PQN's defaults are its CartPole configuration


def test_a_minatar_game_gets_pqns_minatar_configuration_with_an_mlp():
    config = pqn_config("SpaceInvaders-MinAtar")
    assert (config.num_envs, config.num_steps, config.num_minibatches, config.update_epochs) == (128, 32, 32, 2)
    assert config.lr == pytest.approx(5e-4) and config.anneal_lr is True
    assert config.q_lambda == pytest.approx(0.65) and config.reward_scale == 1.0
    assert (config.eps_end, config.eps_decay) == pytest.approx((0.05, 0.1))
    assert config.network == "mlp" and config.hidden_sizes == (128, 128)
    # the PPO preset of the same game is not PQN's
    assert build_config({}, {"env": "SpaceInvaders-MinAtar"}).hidden_sizes == (64, 64)
    # purejaxql's convolution stays one key away
    assert pqn_config("SpaceInvaders-MinAtar", network="cnn").network == "cnn"


def test_cartpole_trains_on_pqns_defaults_and_acrobot_on_its_preset():
    defaults = ALGORITHMS["pqn"].defaults
    cartpole = pqn_config("CartPole-v1")
    assert (cartpole.num_envs, cartpole.lr) == (defaults["num_envs"], pytest.approx(defaults["lr"]))
    acrobot = pqn_config("Acrobot-v1")
    for key, value in presets.preset("pqn", "Acrobot-v1").items():
        assert getattr(acrobot, key) == pytest.approx(value), key
    assert acrobot.num_envs == defaults["num_envs"]  # what the preset leaves alone


@pytest.mark.parametrize("env", ["CartPole-v1", "Acrobot-v1", "Asterix-MinAtar", "Breakout-MinAtar",
                                 "Freeway-MinAtar", "SpaceInvaders-MinAtar"])
def test_the_classic_and_minatar_records_reach_their_reference(env):
    result = presets.result("pqn", env)
    assert result is not None and result.seeds >= 3
    assert result.reference is not None and result.min >= result.reference
