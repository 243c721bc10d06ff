"""`rltui check-env SPEC`: a table of checks, exit 0 when training will work, 2 otherwise."""

from __future__ import annotations

import subprocess
import sys

import pytest
from test_custom_env import BAD_MODULE, cli_env

from rltui.commands.check_env import CHECK_NAMES as CHECKS

MORE_BAD = '''
import jax
import jax.numpy as jnp
from gymnax.environments import spaces
from test_custom_env import Bandit, BanditParams


class Unbounded(Bandit):
    """One continuous action without bounds, paying -|a|."""

    def step(self, key, state, action, params):
        obs, state, _, terminated, truncated, info = super().step(key, state, jnp.int32(0), params)
        return obs, state, -jnp.abs(jnp.sum(action)), terminated, truncated, info

    def action_space(self, params):
        return spaces.Box(-jnp.inf, jnp.inf, (1,))


def unbounded():
    return Unbounded(), BanditParams()


class IntFlags(Bandit):
    def step(self, key, state, action, params):
        obs, state, reward, terminated, truncated, info = super().step(key, state, action, params)
        return obs, state, reward, terminated.astype(jnp.int32), truncated, info


class Endless(Bandit):
    def step(self, key, state, action, params):
        obs, state, reward, terminated, truncated, info = super().step(key, state, action, params)
        return obs, state, reward, terminated, jnp.bool_(False), info


def refuse(time):
    raise ValueError(f"time {time} is out of range")


class CallbackRaises(Bandit):
    def step(self, key, state, action, params):
        jax.debug.callback(refuse, state.time)
        return super().step(key, state, action, params)


class NaNObservations(Bandit):
    def step(self, key, state, action, params):
        obs, state, reward, terminated, truncated, info = super().step(key, state, action, params)
        return obs * jnp.nan, state, reward, terminated, truncated, info


class HugeRewards(Bandit):
    """Finite rewards that overflow any loss in float32."""

    def step(self, key, state, action, params):
        obs, state, reward, terminated, truncated, info = super().step(key, state, action, params)
        return obs, state, reward * 0 + 3e38, terminated, truncated, info


class NaNRewards(Bandit):
    def step(self, key, state, action, params):
        obs, state, reward, terminated, truncated, info = super().step(key, state, action, params)
        return obs, state, reward * jnp.nan, terminated, truncated, info
'''
CALLBACK_LINE = next(n for n, line in enumerate(MORE_BAD.splitlines(), 1) if "raise ValueError" in line)
EXITS = {
    "exits_at_import": "import sys\nsys.exit(0)\n",
    "os_exits_at_import": "import os\nos._exit(0)\n",
    "exits_in_step": (
        "import os\nfrom test_custom_env import Bandit\n\n\nclass Exits(Bandit):\n"
        "    def step(self, key, state, action, params):\n        os._exit(0)\n"
    ),
}


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
    for name, text in EXITS.items():
        (tmp_path / f"{name}.py").write_text(text)
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


@pytest.mark.parametrize("algo", ["pqn", "dqn"])
def test_a_custom_env_passes_with_a_q_learner_whose_update_runs(capsys, algo):
    code, out, _ = check_env(["test_custom_env:make_bandit", "--env-kwargs", "{arms = 3}", "--algo", algo], capsys)
    assert code == 0, out
    assert set(rows(out).values()) == {"pass"}
    assert f"one {algo} update ran" in out
    # DQN learns from its replay buffer in that one update: 32 transitions at its ratio of 0.1.
    assert ("3 gradient steps from its replay buffer" in out) == (algo == "dqn")


@pytest.mark.parametrize("algo", ["ppo", "dqn"])
def test_an_update_whose_loss_overflows_fails_the_update_check_naming_it(env_modules, capsys, algo):
    code, out, _ = check_env(["more_bad_envs:HugeRewards", "--algo", algo], capsys)
    assert code == 2
    assert rows(out)["one policy update runs"] == "fail", out
    assert "one update's" in out and "not finite" in out


def test_continuous_actions_fail_the_action_check_for_pqn_in_one_line(capsys):
    code, out, err = check_env(["Pendulum-v1", "--algo", "pqn"], capsys)
    assert code == 2
    assert rows(out)["action space supported"] == "fail"
    assert err.strip().endswith("pqn takes discrete actions; Pendulum-v1 has continuous ones (ppo, reinforce "
                                "and sac take them)"), err
    # The update it cannot run is not tried (listed as skipped): the reason is said once, not
    # again as an exception.
    assert rows(out)["one policy update runs"] == rows(out)["checkpoint and resume"] == "skip"
    assert list(rows(out)) == list(CHECKS) and "ValueError" not in out + err


def test_untraceable_step_fails_with_the_likely_cause_and_exits_2(env_modules, capsys):
    code, out, err = check_env(["bad_envs:PythonIf"], capsys)
    assert code == 2
    assert rows(out) == {"import and interface": "fail", **{name: "skip" for name in CHECKS[1:]}}
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


def test_an_env_with_its_own_state_class_passes_the_checkpoint_and_resume_check(capsys):
    code, out, _ = check_env(["test_env_checkpoints:make", "--env-kwargs", '{kind = "jax"}'], capsys)
    assert code == 0
    assert rows(out) == {name: "pass" for name in CHECKS}


@pytest.mark.parametrize("env, first_failure, reason", [
    ("more_bad_envs:NaNObservations", "observations match observation_space", "step gives NaN in its observations"),
    ("more_bad_envs:NaNRewards", "rewards are finite scalars", "reward is NaN"),
], ids=["observations", "rewards"])
def test_nan_from_the_env_is_named_nan_not_randomness(env, first_failure, reason, env_modules, capsys):
    code, out, err = check_env([env], capsys)
    assert code == 2
    assert err.splitlines()[-1] == f"rltui: error: {env}: {first_failure}: {reason}"
    assert rows(out)["deterministic for a fixed key"] == "pass"
    assert rows(out)["observations and rewards stay finite"] == "fail"
    assert "of a random episode gives NaN in its" in out


def test_an_exception_in_the_envs_jax_callback_is_one_line_naming_its_file_and_line(env_modules, capsys):
    code, out, err = check_env(["more_bad_envs:CallbackRaises"], capsys)
    line = f"a JAX callback raised ValueError: time 0 is out of range at more_bad_envs.py:{CALLBACK_LINE}"
    assert code == 2
    assert err.splitlines()[-1] == f"rltui: error: more_bad_envs:CallbackRaises: step: jit and vmap: {line}"
    assert "Traceback" not in out + err
    assert len(err.splitlines()) <= 2  # the module's import notice and the error


def test_an_exception_in_the_envs_jax_callback_during_training_is_one_line(env_modules, tmp_path, capsys):
    from rltui.cli import main

    code = main(["launch", "--no-ui", "--run-dir", str(tmp_path / "run"), "--set", "env=more_bad_envs:CallbackRaises",
                 "--set", "num_envs=4", "--set", "num_steps=8", "--set", "total_timesteps=32"])
    captured = capsys.readouterr()
    assert code == 1
    assert "Traceback" not in captured.out + captured.err
    assert (f"Training failed: a JAX callback raised ValueError: time 0 is out of range at "
            f"more_bad_envs.py:{CALLBACK_LINE}") in captured.out + captured.err


@pytest.mark.parametrize("env_id, message", [
    ("exits_at_import:make", "importing exits_at_import called sys.exit(0)"),
    ("os_exits_at_import:make", "importing os_exits_at_import called os._exit(0)"),
    ("exits_in_step:Exits", "exits_in_step:Exits's step called os._exit(0)"),
], ids=["sys.exit at import", "os._exit at import", "os._exit in step"])
@pytest.mark.parametrize("command", ["check-env", "launch"])
def test_an_env_that_exits_the_process_is_one_line_and_exit_2(env_id, message, command, env_modules):
    # In a child process: an env that does end the process would end the test run with it.
    args = [env_id] if command == "check-env" else ["--no-ui", "--set", f"env={env_id}"]
    env = cli_env()
    env["PYTHONPATH"] += f":{env_modules}"
    done = subprocess.run([sys.executable, "-m", "rltui", command, *args], cwd=env_modules, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[-1].endswith(f"{message}; an env must not end the process")
    assert "Traceback" not in done.stderr
    assert not (env_modules / "runs").exists()


def test_an_unbounded_box_fails_the_action_check_for_sac_alone(env_modules, capsys):
    code, out, err = check_env(["more_bad_envs:unbounded", "--algo", "sac"], capsys)
    assert code == 2 and rows(out)["action space supported"] == "fail", out
    assert err.strip().endswith("sac squashes its actions into the env's bounds; more_bad_envs:unbounded has "
                                "unbounded ones"), err
    assert rows(out)["one policy update runs"] == "skip" and "ValueError" not in out + err
    code, out, _ = check_env(["more_bad_envs:unbounded", "--algo", "ppo"], capsys)  # PPO acts unclipped there
    assert code == 0 and rows(out)["action space supported"] == "warn", out
