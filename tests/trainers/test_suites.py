"""The optional suites (`pip install "rltui[navix]"`...): each adapter passes check-env and
trains two updates; a suite that is not installed is skipped, saying which extra brings
it. Ids, listing and the not-installed message hold without any suite."""

from __future__ import annotations

import importlib.util

import pytest

from rltui.commands.check_env import run_checks
from trainers.suites import SUITES

SUITE_ENVS = {"navix": "navix:Navix-Empty-5x5-v0", "craftax": "craftax:Craftax-Classic-Symbolic-v1",
              "jumanji": "jumanji:Snake-v1", "brax": "brax:inverted_pendulum"}


def needs(suite: str):
    missing = importlib.util.find_spec(SUITES[suite].package) is None
    return pytest.mark.skipif(missing, reason=f'{suite} is not installed (pip install "rltui[{suite}]")')


@pytest.mark.parametrize("suite", [pytest.param(s, marks=needs(s)) for s in SUITE_ENVS])
def test_each_installed_suites_adapter_passes_check_env(suite):
    checks = run_checks(SUITE_ENVS[suite])
    failed = [c for c in checks if c.status == "fail"]
    assert not failed, failed
    assert any(c.name == "one policy update runs" and c.status == "pass" for c in checks)


@pytest.mark.parametrize("suite", [pytest.param(s, marks=needs(s)) for s in SUITE_ENVS])
def test_each_installed_suite_trains_two_updates(suite, tmp_path):
    from rltui.api import train

    result = train(env=SUITE_ENVS[suite], num_envs=4, num_steps=16, total_timesteps=128, run_dir=str(tmp_path / "run"))
    assert result.updates == 2


@pytest.mark.parametrize("suite, limit", [pytest.param(s, n, marks=needs(s)) for s, n in
                                          [("navix", 100), ("craftax", 10000), ("jumanji", 4000), ("brax", 1000)]])
def test_each_installed_suites_params_declare_its_episode_limit(suite, limit):
    # Evaluation (`eval_every_updates`, `rltui eval`) runs each episode for at most
    # params.max_steps_in_episode steps: an env whose params lack it cannot be evaluated.
    from trainers.envs import make_env

    assert make_env(SUITE_ENVS[suite]).params.max_steps_in_episode == limit


def test_suite_ids_are_accepted_by_the_env_key():
    from rltui.config.build import build_config

    for env_id in SUITE_ENVS.values():
        assert build_config({"env": env_id}, use_preset=False).env == env_id


def test_a_suite_that_is_not_installed_names_its_extra(monkeypatch):
    from trainers import suites
    from trainers.env_import import EnvImportError

    monkeypatch.setattr(suites, "installed", lambda suite: False)
    with pytest.raises(EnvImportError, match=r'^env: navix is not installed; pip install "rltui\[navix\]"$'):
        suites.load("navix:Navix-Empty-5x5-v0")


def test_rltui_envs_lists_each_suite_or_its_extra(capsys, monkeypatch):
    from rltui.cli import main
    from trainers import suites

    monkeypatch.setattr(suites, "installed", lambda suite: False)
    assert main(["envs"]) == 0
    out = capsys.readouterr().out
    for name in SUITES:
        assert f'{name}: not installed; pip install "rltui[{name}]"' in out


@needs("jumanji")
def test_a_jumanji_env_with_multi_discrete_actions_is_refused_naming_the_spec():
    from trainers import suites
    from trainers.env_import import EnvImportError

    with pytest.raises(EnvImportError, match=r"^env: jumanji:Tetris-v0's action spec MultiDiscreteArray is not "
                                             r"supported; rltui trains DiscreteArray and float BoundedArray"):
        suites.load("jumanji:Tetris-v0")


@needs("jumanji")
@pytest.mark.parametrize("ending, terminated, truncated", [("termination", True, False), ("truncation", False, True),
                                                            ("transition", False, False)])
def test_jumanji_keeps_terminations_apart_from_truncations(ending, terminated, truncated):
    import jax
    import jax.numpy as jnp
    from jumanji import specs, types

    from trainers.suites.jumanji import JumanjiEnv

    class Stub:  # a Jumanji env whose every step ends as `ending` says
        action_spec = specs.DiscreteArray(2)
        reward_spec = specs.Array((), jnp.float32)

        def reset(self, key):
            return jnp.int32(0), types.restart(jnp.zeros(3))

        def step(self, state, action):
            make = getattr(types, ending)
            return state + 1, make(reward=jnp.float32(1), observation=jnp.ones(3))

    env = JumanjiEnv(Stub(), "jumanji:Stub")
    _, state = env.reset(jax.random.PRNGKey(0))
    _, _, reward, term, trunc, _ = env.step(jax.random.PRNGKey(1), state, jnp.int32(0))
    assert (bool(term), bool(trunc), float(reward)) == (terminated, truncated, 1.0)


@needs("jumanji")
def test_a_multi_agent_jumanji_env_is_refused():
    from trainers import suites
    from trainers.env_import import EnvImportError

    with pytest.raises(EnvImportError, match=r"^env: jumanji:SearchAndRescue-v0 gives a reward of shape \(2,\) "
                                             r"\(one per agent\); rltui trains single-agent envs$"):
        suites.load("jumanji:SearchAndRescue-v0")


@needs("jumanji")
def test_a_jumanji_env_that_raises_when_made_is_one_line():
    from trainers import suites
    from trainers.env_import import EnvImportError

    with pytest.raises(EnvImportError, match=r"^env: jumanji:Snake-v1\(num_rows='x'\) raised ValueError: "):
        suites.load('jumanji:Snake-v1 {"num_rows": "x"}')


@needs("brax")
def test_brax_keeps_terminations_apart_from_truncations():
    import jax
    import jax.numpy as jnp

    from trainers import suites

    env, params, _ = suites.load('brax:inverted_pendulum {"episode_length": 3}')
    assert params.max_steps_in_episode == 3
    step = jax.jit(env.step)
    _, state = env.reset(jax.random.PRNGKey(0), params)
    for _ in range(3):  # no force: the pole stays up until time runs out
        _, state, _, terminated, truncated, _ = step(jax.random.PRNGKey(1), state, jnp.zeros(1), params)
    assert (bool(terminated), bool(truncated)) == (False, True)

    env, params, _ = suites.load("brax:inverted_pendulum")
    _, state = env.reset(jax.random.PRNGKey(0), params)
    push = jax.jit(env.step)
    for _ in range(200):  # full force one way: the pole falls, a termination
        _, state, _, terminated, truncated, _ = push(jax.random.PRNGKey(1), state, jnp.ones(1), params)
        if bool(terminated) or bool(truncated):
            break
    assert (bool(terminated), bool(truncated)) == (True, False)


@needs("brax")
def test_a_brax_env_that_raises_when_made_is_one_line():
    from trainers import suites
    from trainers.env_import import EnvImportError

    with pytest.raises(EnvImportError, match=r"^env: brax:inverted_pendulum\(backend='nope', episode_length=1000\) "
                                             r"raised \w+Error: "):
        suites.load('brax:inverted_pendulum {"backend": "nope"}')
