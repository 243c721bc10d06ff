"""An environment of the user's own, by import path (`env = "module:factory"`).

This module is also the env module: `Bandit` and `make_bandit` below are what the runs
import, with this directory on PYTHONPATH. Its optimal return is known: each of the 10
steps of an episode pays 1 for the best arm (the last) and 0 otherwise, so the best policy
returns 10 and a uniformly random one with 2 arms about 5.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from flax import struct
from gymnax.environments import spaces

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parents[1]
OPTIMAL_RETURN = 10.0
RANDOM_RETURN = 5.0  # two arms
LEARNED = 9.5  # between the random and the optimal return, near the optimum


@struct.dataclass
class BanditState:
    time: jax.Array


@struct.dataclass
class BanditParams:
    max_steps_in_episode: int = 10


class Bandit:
    """A duck-typed env (no gymnax base class): it ends episodes by truncation after 10
    steps and does not reset itself, so rltui's wrapper resets it."""

    def __init__(self, arms: int = 2):
        self.arms = arms

    @property
    def default_params(self) -> BanditParams:
        return BanditParams()

    def reset(self, key, params):
        return jnp.zeros((2, 1)), BanditState(jnp.int32(0))  # a 2-D observation, flattened for the MLP

    def step(self, key, state, action, params):
        time = state.time + 1
        reward = (action == self.arms - 1).astype(jnp.float32)
        truncated = time >= params.max_steps_in_episode
        return jnp.zeros((2, 1)), BanditState(time), reward, jnp.bool_(False), truncated, {}

    def observation_space(self, params):
        return spaces.Box(0.0, 1.0, (2, 1))

    def action_space(self, params):
        return spaces.Discrete(self.arms)


def make_bandit(arms: int = 2):
    return Bandit(arms), BanditParams()


TRAIN = ["--set", "total_timesteps=16384", "--set", "num_envs=8", "--set", "num_steps=32", "--set", "lr=0.003"]


def cli_env(*, with_module: bool = True) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "COLUMNS", "FORCE_COLOR", "PYTHONPATH")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + ([str(TESTS)] if with_module else []))
    env["JAX_PLATFORMS"] = "cpu"
    return env


def rltui(args, tmp: Path, *, with_module: bool = True, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rltui", *map(str, args)], cwd=tmp, env=cli_env(with_module=with_module),
        capture_output=True, text=True, timeout=timeout, check=False,
    )


def final_return(run_dir: Path) -> float:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    returns = [r["episode_return"] for r in rows if r.get("episode_return") is not None]
    return returns[-1]


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("custom")
    run_dir = tmp / "run"
    done = rltui(["launch", "--no-ui", "--run-dir", run_dir, "--set", "env=test_custom_env:make_bandit",
                  "--set", "env_kwargs={arms = 2}", *TRAIN], tmp)
    assert done.returncode == 0, done.stderr
    assert "importing env module test_custom_env" in done.stderr
    return tmp, run_dir


def test_bandit_trains_to_its_optimal_return_through_the_import_path(trained):
    _, run_dir = trained
    assert final_return(run_dir) >= LEARNED  # random: 5.0, optimal: 10.0
    config = (run_dir / "config.toml").read_text()
    assert 'env = "test_custom_env:make_bandit"' in config
    assert "arms = 2" in config  # the kwargs are recorded, so eval and --resume rebuild the same env


def test_info_reads_a_custom_env_run_without_importing_its_module(trained):
    tmp, run_dir = trained
    info = rltui(["info", run_dir], tmp, with_module=False)
    assert info.returncode == 0, info.stderr
    assert "importing env module" not in info.stderr
    assert "test_custom_env:make_bandit" in info.stdout


def test_eval_of_a_custom_env_run_imports_its_module_and_says_so(trained):
    tmp, run_dir = trained
    done = rltui(["eval", run_dir, "--episodes", "4"], tmp)
    assert done.returncode == 0, done.stderr
    assert "importing env module test_custom_env" in done.stderr
    assert "mean 10.00" in done.stdout


# --- bad input: one line, exit code 2, nothing written --------------------------------------

BAD_MODULE = '''
import dataclasses

import jax.numpy as jnp
from gymnax.environments import spaces
from test_custom_env import Bandit, BanditParams


class NoStep:
    default_params = BanditParams()

    def reset(self, key, params):
        return jnp.zeros(2), 0

    def observation_space(self, params):
        return spaces.Box(0, 1, (2,))

    def action_space(self, params):
        return spaces.Discrete(2)


class PythonIf(Bandit):
    def step(self, key, state, action, params):
        if action == 1:
            pass
        return super().step(key, state, action, params)


class MultiDiscrete:
    n = 3


class TwoActionSets(Bandit):
    def action_space(self, params):
        return MultiDiscrete()


def raises(arms=2):
    raise ValueError("arms must be positive\\nmore detail")


@dataclasses.dataclass
class PlainParams:
    arms: int = 2


class PlainDataclassParams(Bandit):
    default_params = PlainParams()


@dataclasses.dataclass
class PlainState:
    t: int = 0


class PlainDataclassState(Bandit):
    def reset(self, key, params):
        return jnp.zeros(2), PlainState()
'''

BAD_INPUTS = {
    "not installed": ("no_such_pkg.envs:make", (
                      "env: cannot import no_such_pkg.envs: no module named 'no_such_pkg' (install it, or run rltui "
                      "in its directory or with it on PYTHONPATH)")),
    "no attribute": ("test_custom_env:make_nothing", "env: module test_custom_env has no attribute 'make_nothing'"),
    "import raises": ("import_raises:make", "env: importing import_raises raised RuntimeError: no GPU here"),
    "call raises": ("bad_envs:raises", "env: bad_envs:raises() raised ValueError: arms must be positive"),
    "no step": ("bad_envs:NoStep", (
                "env: bad_envs:NoStep gave a NoStep, which has no step method (an environment needs reset, step, "
                "observation_space, action_space and default_params, as gymnax's do)")),
    "not traceable": ("bad_envs:PythonIf", (
                      "env: bad_envs:PythonIf's step cannot be traced by JAX at bad_envs.py:24: Python control flow "
                      "on traced values (an if, while or int() on an array; use jnp.where or jax.lax.cond) "
                      "(TracerBoolConversionError)")),
    "plain dataclass": ("bad_envs:PlainDataclassParams", (
                        "env: bad_envs:PlainDataclassParams's reset: JAX cannot handle a value of type "
                        "bad_envs.PlainParams: params and states must be JAX pytrees of arrays and numbers: a "
                        "flax.struct.dataclass, a NamedTuple or a dict (a plain @dataclass is not one)")),
    "plain dataclass state": ("bad_envs:PlainDataclassState", (
                              "env: bad_envs:PlainDataclassState's reset: JAX cannot handle a value of type "
                              "bad_envs.PlainState: params and states must be JAX pytrees of arrays and numbers: "
                              "a flax.struct.dataclass, a NamedTuple or a dict (a plain @dataclass is not one)")),
    "action space": ("bad_envs:TwoActionSets", (
                     "env: bad_envs:TwoActionSets's action space MultiDiscrete is not supported; rltui trains "
                     "Discrete and Box action spaces")),
}


def write_bad_modules(directory: Path) -> None:
    (directory / "bad_envs.py").write_text(BAD_MODULE)
    (directory / "import_raises.py").write_text('raise RuntimeError("no GPU here")\n')


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_env_is_one_line_and_exit_2_before_anything_is_written(case, tmp_path, monkeypatch, capsys):
    from rltui.cli import main

    write_bad_modules(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    env_id, message = BAD_INPUTS[case]
    run_dir = tmp_path / "run"
    code = main(["launch", "--no-ui", "--run-dir", str(run_dir), "--set", f"env={env_id}"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.splitlines()[-1] == f"rltui: error: {message}"
    assert "Traceback" not in err
    assert not run_dir.exists()


# --- the same custom env through resume, eval, and a run over two processes -----------------

def test_default_run_names_keep_no_odd_characters_from_env_ids():
    from rltui.config.build import build_config
    from rltui.runfiles.rundir import default_run_name

    expected = {
        "test_custom_env:make_bandit": "test_custom_env-make_bandit-ppo-",
        "my_pkg.envs:Maze.make": "my_pkg.envs-Maze.make-ppo-",
        "CartPole-v1": "CartPole-v1-ppo-",
    }
    for env_id, prefix in expected.items():
        name = default_run_name(build_config({"env": env_id}, use_preset=False))
        assert name.startswith(prefix), name
        assert all(c.isalnum() or c in "._-" for c in name), name


def test_a_launch_without_run_dir_names_its_directory_safely(tmp_path):
    done = rltui(["launch", "--no-ui", "--set", "env=test_custom_env:make_bandit", "--set", "total_timesteps=256",
                  "--set", "num_envs=8", "--set", "num_steps=32"], tmp_path)
    assert done.returncode == 0, done.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert run_dir.name.startswith("test_custom_env-make_bandit-ppo-")
    assert (run_dir / "metrics.jsonl").exists()


def test_resume_of_a_custom_env_run_imports_it_again_and_trains_on(trained):
    tmp, run_dir = trained
    resumed = tmp / "resumed"
    done = rltui(["launch", "--no-ui", "--resume", run_dir, "--run-dir", resumed, "--set", "total_timesteps=20480"],
                 tmp)
    assert done.returncode == 0, done.stderr
    assert "importing env module test_custom_env" in done.stderr
    rows = [json.loads(line) for line in (resumed / "metrics.jsonl").read_text().splitlines() if line.strip()]
    assert rows[-1]["env_steps"] == 20480
    assert final_return(resumed) >= LEARNED
    assert "arms = 2" in (resumed / "config.toml").read_text()


def test_resume_where_the_env_module_cannot_be_imported_is_one_line(trained):
    tmp, run_dir = trained
    target = tmp / "resumed-without-module"
    done = rltui(["launch", "--no-ui", "--resume", run_dir, "--run-dir", target, "--set", "total_timesteps=20480"],
                 tmp, with_module=False)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith(
        "rltui: error: env: cannot import test_custom_env: no module named 'test_custom_env'")
    assert "Traceback" not in done.stderr
    assert not target.exists()


def test_eval_where_the_env_module_cannot_be_imported_is_one_line(trained):
    tmp, run_dir = trained
    done = rltui(["eval", run_dir, "--episodes", "2"], tmp, with_module=False)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last == (
        "rltui: error: eval: the run's env test_custom_env:make_bandit cannot be built here: cannot import "
        "test_custom_env: no module named 'test_custom_env' (install it, or run rltui in its directory or with it on "
        "PYTHONPATH)"
    ), last


def _start_process(cwd: Path, process_id: int, port: int, *, with_module: bool, peer_timeout: int) -> subprocess.Popen:
    cwd.mkdir(parents=True, exist_ok=True)
    args = ["launch", "--no-ui", "--run-dir", "run", "--set", "env=test_custom_env:make_bandit", *TRAIN,
            "--coordinator", f"127.0.0.1:{port}", "--num-processes", "2", "--process-id", str(process_id),
            "--peer-timeout", str(peer_timeout)]
    return subprocess.Popen([sys.executable, "-m", "rltui", *args], cwd=cwd,
                            env=cli_env(with_module=with_module),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _two_processes(tmp: Path, *, module_in_process_1: bool, peer_timeout: int = 30) -> list[tuple[int, str]]:
    with socket.socket() as sock:  # a free port for the coordinator
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    procs = [_start_process(tmp / f"p{i}", i, port, with_module=(i == 0 or module_in_process_1),
                            peer_timeout=peer_timeout) for i in range(2)]
    results = []
    try:
        for proc in procs:
            _, err = proc.communicate(timeout=400)
            results.append((proc.returncode, err))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return results


# Slow: two processes learning. The test below (a process without the module) shows that
# each process imports the env module itself; test_multiprocess.py covers training over two.
@pytest.mark.slow
def test_a_custom_env_trains_over_two_processes(tmp_path):
    (code0, err0), (code1, err1) = _two_processes(tmp_path, module_in_process_1=True)
    assert code0 == 0, err0[-3000:]
    assert code1 == 0, err1[-3000:]
    for err in (err0, err1):  # each process imports the env module itself
        assert "importing env module test_custom_env" in err
    assert final_return(tmp_path / "p0" / "run") >= LEARNED


def test_a_process_that_cannot_import_the_env_module_says_so_in_one_line(tmp_path):
    # A short peer timeout: process 0 waits that long for the peer that never comes.
    (code0, err0), (code1, err1) = _two_processes(tmp_path, module_in_process_1=False, peer_timeout=5)
    # The process says why in one line before anything is compiled; JAX's distributed runtime
    # then ends both processes (its shutdown waits for a peer that never reaches it).
    assert code1 != 0 and code0 != 0
    assert "Traceback" not in err1
    assert (
        "rltui: error: process 1 of 2: env: cannot import test_custom_env: no module named 'test_custom_env' "
        "(install it, or put its directory on PYTHONPATH; every process of a run imports the env module)"
    ) in err1.splitlines()
    assert not (tmp_path / "p1" / "run").exists()


@struct.dataclass
class NoLimitParams:
    """Params that declare no step limit: the env ends its own episodes."""

    arms: int = 2


def make_bandit_without_a_declared_limit():
    env = Bandit(2)
    env.step = lambda key, state, action, params: Bandit.step(env, key, state, action, BanditParams())
    return env, NoLimitParams()


def test_an_env_that_declares_no_step_limit_is_evaluated_to_the_default_limit():
    """Evaluation (eval_every_updates, rltui eval) runs each episode to its end or to
    DEFAULT_EPISODE_LIMIT steps, where gymnax's params would declare the limit."""
    from trainers.algorithms import make_trainer
    from trainers.envs import DEFAULT_EPISODE_LIMIT, episode_limit
    from trainers.evaluate import evaluate
    from trainers.hparams import StaticConfig

    static = StaticConfig(env_id="test_custom_env:make_bandit_without_a_declared_limit", num_envs=2, num_steps=8,
                          num_minibatches=2, hidden_sizes=(8,))
    trainer = make_trainer(static, 1)
    assert episode_limit(trainer.spec.params) == DEFAULT_EPISODE_LIMIT
    params = trainer.network.init(jax.random.PRNGKey(0), jnp.zeros((1, trainer.spec.obs_size)))
    returns = evaluate((params, None), jax.random.PRNGKey(1), spec=trainer.spec, step_fn=trainer.act_step,
                       initial_hidden=None, episodes=4)
    assert returns.shape == (4,)
    assert all(0.0 <= r <= 10.0 for r in returns.tolist())  # ten steps of at most 1


def test_an_env_module_in_the_working_directory_is_found_as_python_m_finds_it(tmp_path):
    """A console script's sys.path lacks the current directory; an env module there is
    imported anyway (last on the path), and the notice says where it came from."""
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir(), elsewhere.mkdir()
    (project / "bandit_env.py").write_text((TESTS / "test_custom_env.py").read_text())
    script = elsewhere / "rltui_script.py"  # like the installed `rltui`: its own directory is sys.path[0]
    script.write_text("import sys\nfrom rltui.cli import entry\nsys.exit(entry())\n")

    def check_env(cwd: Path) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(script), "check-env", "bandit_env:make_bandit"], cwd=cwd,
                              env=cli_env(with_module=False), capture_output=True, text=True,
                              timeout=300, check=False)

    found = check_env(project)
    assert found.returncode == 0, found.stderr
    assert "importing env module bandit_env (from the current directory)" in found.stderr
    missing = check_env(elsewhere)
    assert missing.returncode == 2, missing.stderr
    assert "cannot import bandit_env: no module named 'bandit_env'" in missing.stderr.strip().splitlines()[-1]
