"""`rltui check-env SPEC`: a table of checks, exit 0 when training will work, 2 otherwise."""

from __future__ import annotations

import pytest
from test_custom_env import BAD_MODULE

CHECKS = (
    "import and interface", "reset: jit and vmap", "step: jit and vmap", "observations match observation_space",
    "action space supported", "rewards are finite scalars", "done flags are booleans",
    "deterministic for a fixed key", "an episode ends within the limit", "one policy update runs",
)

MORE_BAD = '''
import jax.numpy as jnp
from test_custom_env import Bandit


class IntFlags(Bandit):
    def step(self, key, state, action, params):
        obs, state, reward, terminated, truncated, info = super().step(key, state, action, params)
        return obs, state, reward, terminated.astype(jnp.int32), truncated, info


class Endless(Bandit):
    def step(self, key, state, action, params):
        obs, state, reward, terminated, truncated, info = super().step(key, state, action, params)
        return obs, state, reward, terminated, jnp.bool_(False), info
'''


def rows(out: str) -> dict[str, str]:
    """check name -> its result, from the table."""
    found = {}
    for line in out.splitlines()[1:]:
        for name in CHECKS:
            if line.startswith(name + "  "):
                found[name] = line[len(name):].split()[0]
    return found


@pytest.fixture
def env_modules(tmp_path, monkeypatch):
    (tmp_path / "bad_envs.py").write_text(BAD_MODULE)
    (tmp_path / "more_bad_envs.py").write_text(MORE_BAD)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def check_env(args, capsys) -> tuple[int, str, str]:
    from rltui.cli import main

    code = main(["check-env", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_good_env_passes_every_check_and_exits_0(capsys):
    code, out, _ = check_env(["test_custom_env:make_bandit", "--env-kwargs", "{arms = 3}"], capsys)
    assert code == 0
    assert rows(out) == {name: "pass" for name in CHECKS}
    assert "training will work" in out


def test_a_builtin_env_passes(capsys):
    code, out, _ = check_env(["CartPole-v1"], capsys)
    assert code == 0
    assert set(rows(out).values()) == {"pass"}


def test_untraceable_step_fails_with_the_likely_cause_and_exits_2(env_modules, capsys):
    code, out, err = check_env(["bad_envs:PythonIf"], capsys)
    assert code == 2
    assert rows(out) == {"import and interface": "fail"}
    assert "Python control flow on traced values" in out
    assert err.splitlines()[-1].startswith("rltui: error: bad_envs:PythonIf: import and interface: ")


def test_done_flags_that_are_not_booleans_fail(env_modules, capsys):
    code, out, _ = check_env(["more_bad_envs:IntFlags"], capsys)
    assert code == 2
    assert rows(out)["done flags are booleans"] == "fail"
    assert "terminated is int32; expected bool" in out


def test_an_env_that_never_ends_is_a_warning_not_a_failure(env_modules, capsys):
    code, out, _ = check_env(["more_bad_envs:Endless"], capsys)
    assert code == 0
    assert rows(out)["an episode ends within the limit"] == "warn"
    assert "did not end within 10 steps" in out


def test_launch_stops_at_the_first_failed_cheap_check(env_modules, tmp_path, capsys):
    from rltui.cli import main

    code = main(["launch", "--no-ui", "--run-dir", str(tmp_path / "run"), "--set", "env=test_custom_env:make_bandit",
                 "--set", "network=cnn"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.splitlines()[-1] == (
        "rltui: error: network: cnn needs image observations of shape (height, width, channels); "
        "test_custom_env:make_bandit gives 2x1"
    )
    assert not (tmp_path / "run").exists()
