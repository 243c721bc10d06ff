"""`rltui envs`: which algorithms have settings for each env, read from the presets."""

from __future__ import annotations

import argparse
import tomllib

import pytest

from rltui.commands import envs
from rltui.config import presets


@pytest.fixture
def toml_presets(monkeypatch):
    """Replace every algorithm's presets (tables by algorithm) with the given TOML text."""

    def install(text: str) -> None:
        monkeypatch.setattr(presets, "_load", lambda: tomllib.loads(text))

    return install


def test_an_algorithm_has_settings_for_an_env_through_its_family_or_its_own_preset(toml_presets):
    toml_presets(
        "[ppo.family.classic]\n"  # empty: the algorithm's defaults are the family's settings
        "[ppo.family.minatar]\nlr = 5e-3\n"
        '[pqn."Acrobot-v1"]\nlr = 1e-3\n'
        '[pqn."Catch-bsuite".result]\nmean = 1.0\nmin = 1.0\nseeds = 3\nsteps = 1\nwall_seconds = 1\n'
        "[reinforce]\n"
    )
    assert envs.algorithms_with_settings("CartPole-v1") == ["ppo"]
    assert envs.algorithms_with_settings("Acrobot-v1") == ["ppo", "pqn"]
    assert envs.algorithms_with_settings("Breakout-MinAtar") == ["ppo"]
    assert envs.algorithms_with_settings("Catch-bsuite") == ["pqn"]  # a preset that only records a result
    assert envs.algorithms_with_settings("Pendulum-v1") == []


def test_the_listing_shows_the_algorithms_with_settings_for_each_env(capsys):
    assert envs.cmd_envs(argparse.Namespace()) == 0
    lines = capsys.readouterr().out.splitlines()
    header = lines[0]
    column = header.index(envs.TUNED_FOR)
    rows = {line.split()[0]: line for line in lines[1:] if line.strip() and not line.startswith(" ")}

    # The column is as wide as its widest entry, which one space then follows.
    width = max(len(envs.TUNED_FOR), *(len(", ".join(envs.algorithms_with_settings(env))) for env in rows))

    def tuned(env: str) -> str:
        return rows[env][column:column + width].rstrip()

    for env in ("CartPole-v1", "Acrobot-v1", "Breakout-MinAtar"):
        assert tuned(env) == ", ".join(envs.algorithms_with_settings(env)) and "pqn" in tuned(env), env
    assert tuned("Pendulum-v1") == "ppo, sac"  # PQN and DQN take discrete actions only
