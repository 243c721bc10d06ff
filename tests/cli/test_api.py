"""The Python API (rltui.api): an env object trains to its known optimal return; the
documented example runs as written."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
import test_custom_env
from test_custom_env import LEARNED

REPO = Path(__file__).resolve().parents[2]
TINY = {"total_timesteps": 512, "num_envs": 8, "num_steps": 32}


def _defined_where_no_import_reaches():
    """The envs these tests hand over, defined as in a script run as __main__: no import path
    rebuilds them, so their runs have ids of their own (`object:Bandit`)."""

    class Bandit(test_custom_env.Bandit):
        pass

    class NanBandit(Bandit):
        """Rewards that are NaN: the first update's loss is not finite."""

        def step(self, key, state, action, params):
            obs, state, reward, terminated, truncated, info = super().step(key, state, action, params)
            return obs, state, reward * jnp.nan, terminated, truncated, info

    return Bandit, NanBandit


Bandit, NanBandit = _defined_where_no_import_reaches()


def train_within(seconds: float, **kwargs):
    """rltui.train on a thread, failing the test rather than hanging it."""
    import rltui

    out = {}

    def target():
        try:
            out["result"] = rltui.train(**kwargs)
        except BaseException as err:  # noqa: BLE001 - handed back to the test
            out["error"] = err

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"rltui.train did not return within {seconds:.0f} s"
    if "error" in out:
        raise out["error"]
    return out["result"]


def test_import_rltui_does_not_import_jax():
    code = "import rltui, sys; assert 'jax' not in sys.modules; assert callable(rltui.train)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=False)
    assert done.returncode == 0, done.stderr


def test_an_env_object_trains_to_its_optimal_return(tmp_path):
    import rltui

    result = rltui.train(env=Bandit(arms=2), total_timesteps=16384, num_envs=8, num_steps=32, lr=3e-3,
                         run_dir=tmp_path / "run", progress=False)
    assert result.state == "finished"
    assert result.updates == 64 and len(result.metrics) == 64
    assert result.latest_return >= LEARNED  # random: 5.0, optimal: 10.0
    assert 'env = "object:Bandit' in (result.run_dir / "config.toml").read_text()
    assert result.params is not None
    lines = (result.run_dir / "metrics.jsonl").read_text().splitlines()
    assert list(result.metrics) == [json.loads(line) for line in lines]  # metrics.jsonl, line for line
    assert {"wall_time", "sps", "eval_return", "policy_loss"} <= set(result.metrics[-1])
    shown = repr(result)
    assert len(shown) < 200 and shown.startswith("TrainResult(state='finished', updates=64, env_steps=16384, ")
    assert f"run_dir={str(result.run_dir)!r}" in shown


def test_a_population_from_python_trains_each_member_and_hands_back_their_parameters(tmp_path):
    import json

    import rltui

    result = rltui.train(env=Bandit(arms=2), total_timesteps=16384, num_envs=8, num_steps=32,
                         sweep={"lr": [1e-4, 3e-3]}, run_dir=tmp_path / "run", progress=False)
    assert result.state == "finished"
    import jax

    assert {leaf.shape[0] for leaf in jax.tree.leaves(result.params)} == {2}  # one per member
    last = json.loads((result.run_dir / "metrics.jsonl").read_text().splitlines()[-1])
    slow, fast = last["members"]["episode_return"]
    assert fast >= LEARNED and fast > slow  # 3e-3 learns the bandit, 1e-4 has barely begun
    assert result.metrics[-1]["members"] == last["members"]
    with pytest.raises(rltui.ApiError, match=r"^num_envs: cannot be swept"):
        rltui.train(env=Bandit(), sweep={"num_envs": [4, 8]}, run_dir=tmp_path / "bad")


def test_bad_input_raises_api_error_before_anything_is_written(tmp_path):
    import rltui

    class NoReset:
        default_params = None

        def step(self, key, state, action, params):
            return state

    plainly = r"^env: must be an env id \(a string: 'CartPole-v1', 'my_pkg.envs:make_env'\) or an env object with reset"
    with pytest.raises(rltui.ApiError, match=plainly + r".*; got 42$"):
        rltui.train(env=42, run_dir=tmp_path / "run")
    with pytest.raises(rltui.ApiError, match=plainly + r".*; got 'a'$"):
        rltui.train(env=("a", 1), run_dir=tmp_path / "run")
    with pytest.raises(rltui.ApiError, match=r"^env: object:NoReset gave a NoReset, which has no reset method"):
        rltui.train(env=NoReset(), run_dir=tmp_path / "run")
    with pytest.raises(rltui.ApiError, match=r"^lr: "):
        rltui.train(env=Bandit(), lr=-1.0, run_dir=tmp_path / "run")
    config = rltui.make_config(Bandit(), **TINY)
    with pytest.raises(rltui.ApiError, match=r"^lr: "):
        rltui.train(config=config, lr=-1.0, run_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "metrics.jsonl").touch()
    with pytest.raises(rltui.ApiError, match=r"^run_dir: .*taken already holds a run"):
        rltui.train(config=config, run_dir=taken, progress=False)
    # A refusal comes alone: not after a notice of what the run would have done.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(rltui.ApiError, match=r"^run_dir: .*taken already holds a run"):
            rltui.train(env="CartPole-v1", algo="dqn", total_timesteps=1000, run_dir=taken, progress=False)


def test_keys_given_with_a_config_go_over_it(tmp_path):
    import rltui

    config = rltui.make_config(Bandit(), **TINY)
    result = rltui.train(config=config, total_timesteps=256, lr=1e-3, run_dir=tmp_path / "run", progress=False)
    assert (result.state, result.updates, result.config.lr) == ("finished", 1, 1e-3)
    assert result.config.env == config.env and result.config.num_envs == 8


def test_a_diverged_run_says_so_and_offers_only_a_resume_that_can_work(tmp_path, capsys):

    result = train_within(120, env=NanBandit(), **TINY, run_dir=tmp_path / "run")
    assert (result.state, result.updates) == ("diverged", 1)
    assert result.error == "non-finite loss or gradient at update 1; stopped"
    assert "error='non-finite loss or gradient at update 1; stopped'" in repr(result)
    err = capsys.readouterr().err
    assert "Training diverged (non-finite loss or gradient); stopped." in err
    assert "--resume" not in err  # an env object: no other process can build it
    # It diverged at update 1, before any checkpoint: a resume could not work.
    assert "resume=" not in err
    assert "It diverged before its first checkpoint: train again with rltui.train(env=<your env>, ...)" in err
    from rltui.runfiles.discovery import STATES

    assert result.state in STATES  # the words `rltui runs` uses


def test_a_diverged_run_without_progress_stops_rather_than_waiting_paused(tmp_path):
    result = train_within(120, env=NanBandit(), **TINY, run_dir=tmp_path / "run", progress=False)
    assert (result.state, result.updates) == ("diverged", 1)


def test_the_dashboard_without_a_terminal_warns_and_trains_headless(tmp_path, monkeypatch, capsys):
    import rltui
    import rltui.ui.runner

    def no_dashboard(*args, **kwargs):
        raise AssertionError("the dashboard opened without a terminal")

    monkeypatch.setattr(rltui.ui.runner, "run_dashboard", no_dashboard)
    monkeypatch.delenv("TEXTUAL_DRIVER", raising=False)
    assert not sys.stdin.isatty()  # pytest's standard input is not a terminal
    with pytest.warns(RuntimeWarning, match=r"^rltui: ui=True needs a terminal on standard input and output; "):
        result = rltui.train(env=Bandit(), **TINY, run_dir=tmp_path / "run", ui=True)
    assert result.state == "finished"
    assert "\x1b[" not in capsys.readouterr().out


def test_the_documented_example_runs(tmp_path):
    text = (REPO / "docs" / "python-api.md").read_text()
    code = re.search(r"```python\n(.*?)```", text, re.DOTALL).group(1)
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "PYTHONPATH")}
    env.update(JAX_PLATFORMS="cpu", PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    state, updates, latest = done.stdout.splitlines()[0].split()
    assert (state, updates) == ("finished", "64")
    assert float(latest) >= LEARNED
    assert (tmp_path / "runs" / "bandit" / "config.toml").exists()


def test_pqn_trains_from_python_on_an_env_object(tmp_path):
    import rltui

    result = rltui.train(env=Bandit(), algo="pqn", total_timesteps=4096, num_envs=8, num_steps=32,
                         num_minibatches=4, hidden_sizes=[16], run_dir=tmp_path / "run", progress=False)
    assert (result.state, result.updates, result.config.algo) == ("finished", 16, "pqn")
    last = result.metrics[-1]
    assert all(np.isfinite(last[name]) for name in ("td_loss", "q_mean", "epsilon", "grad_norm"))
    assert last["policy_loss"] is None and last["clip_frac"] is None  # not PQN's quantities
    assert any(name.startswith("LayerNorm") for name in result.params["params"])  # the Q-network's own


CTRL_C_CHILD = """
import signal, sys, threading
# A shell starts a program with Ctrl+C's default action; a child of a test worker may inherit
# SIGINT ignored or blocked, which Python then keeps.
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
import rltui, rltui.api
from rltui.session.controller import TrainingSession

seen, stop, stopping = rltui.api._Records.on_metrics, TrainingSession.stop, threading.Event()

def stop_and_say_so(self):
    stop(self)
    stopping.set()

def announce_once(self, snapshot):
    seen(self, snapshot)
    if not getattr(self, "announced", False):
        self.announced = True
        print("training", flush=True)
        # Held until the Ctrl+C is handled, so that a loaded machine cannot finish the run first.
        stopping.wait(60)

TrainingSession.stop, rltui.api._Records.on_metrics = stop_and_say_so, announce_once
result = rltui.train(env="CartPole-v1", total_timesteps=65536, num_envs=8, num_steps=32, num_minibatches=2,
                     update_epochs=1, hidden_sizes=[16], run_dir=sys.argv[1], progress=False, chunk_seconds=0.05)
print(result.state, result.updates, flush=True)
"""


def test_ctrl_c_without_progress_stops_the_run_at_a_chunk_boundary(tmp_path):
    """A process of its own, as a user's: Ctrl+C is a SIGINT to the process, which its main
    thread, waiting in rltui.train, turns into a stop at the next chunk boundary."""
    import signal

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(JAX_PLATFORMS="cpu", PYTHONPATH=str(REPO))
    child = subprocess.Popen([sys.executable, "-c", CTRL_C_CHILD, str(tmp_path / "run")], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert child.stdout.readline().strip() == "training", child.stderr.read()
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=120)
    finally:
        child.kill()
    assert child.returncode == 0, err
    state, updates = out.split()
    assert state == "stopped" and 0 < int(updates) < 256
    assert (tmp_path / "run" / "checkpoints").is_dir()


def updates_in(run_dir: Path) -> list[int]:
    return [json.loads(line)["update"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_a_run_on_an_env_object_resumes_from_python_with_the_env_handed_over_again(tmp_path, capsys):
    import rltui

    run = tmp_path / "run"
    first = rltui.train(env=Bandit(), **TINY, run_dir=run)  # 2 updates of 256 env steps
    assert (first.state, first.updates) == ("finished", 2)
    err = capsys.readouterr().err
    assert f'To train on: rltui.train(env=<your env>, resume="{run}", total_timesteps=1024)' in err
    assert "--resume" not in err  # `rltui launch` could not build the env

    # Refused in one line, before anything is written.
    refusals = [
        ({}, r"^env: .*run trained on an env object \(object:Bandit.*\), which only the process that had it can "
             r"build; hand it over again: rltui.train\(env=<your env>, resume=\.\.\.\)$"),
        ({"env": Bandit(), "total_timesteps": 512},
         r"^total_timesteps: the checkpoint is at update 2 \(512 env steps\), which 512 does not go beyond; "
         r"set a larger one to train on, e.g. total_timesteps=1024$"),
        ({"env": Bandit(), "total_timesteps": 1024, "num_envs": 16},
         r"^num_envs: cannot change when resuming \(the checkpoint was made with 8\); start a new run instead$"),
        ({"env": Bandit(), "name": "other"}, r"^name: not with resume"),
        ({"env": Bandit(), "config": first.config}, r"^config: not with resume"),
    ]
    for keys, message in refusals:
        with pytest.raises(rltui.ApiError, match=message):
            rltui.train(resume=run, progress=False, **keys)
    assert updates_in(run) == [1, 2] and not (run / "config.original.toml").exists()

    # Another Bandit object: this process gives it another id, which the resumed run records.
    resumed = rltui.train(env=Bandit(), resume=run, total_timesteps=1024, progress=False)
    assert (resumed.state, resumed.updates, resumed.env_steps, resumed.run_dir) == ("finished", 4, 1024, run)
    assert resumed.config.env.startswith("object:Bandit") and resumed.config.env != first.config.env
    assert f'env = "{resumed.config.env}"' in (run / "config.toml").read_text()
    assert f'env = "{first.config.env}"' in (run / "config.original.toml").read_text()
    assert updates_in(run) == [1, 2, 3, 4]  # goes on after the checkpoint, nothing twice
    lines = (run / "metrics.jsonl").read_text().splitlines()
    assert list(resumed.metrics) == [json.loads(line) for line in lines]  # the whole run, line for line
    assert sorted(p.name for p in (run / "checkpoints").glob("checkpoint-*"))[-1] == "checkpoint-000000004.msgpack"


def test_a_command_line_run_on_a_built_in_env_resumes_from_python_without_the_env(tmp_path):
    import rltui

    run = tmp_path / "run"
    tiny = ["--set", "num_envs=4", "--set", "num_steps=32", "--set", "num_minibatches=2", "--set", "update_epochs=1",
            "--set", "hidden_sizes=[16]", "--set", "total_timesteps=256"]
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "PYTHONPATH", "COLUMNS", "FORCE_COLOR")}
    env.update(JAX_PLATFORMS="cpu", PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-m", "rltui", "launch", "--no-ui", "--set", "env=CartPole-v1",
                           "--run-dir", str(run), *tiny], capture_output=True, text=True, cwd=tmp_path, env=env,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert updates_in(run) == [1, 2]
    with pytest.raises(rltui.ApiError, match=r"^env: cannot change when resuming \(the checkpoint was made with "
                                             r"'CartPole-v1'\); start a new run instead$"):
        rltui.train(env="Acrobot-v1", resume=run, total_timesteps=512)
    resumed = rltui.train(resume=run, total_timesteps=512, lr=1e-3, progress=False)
    assert (resumed.state, resumed.updates, resumed.config.env, resumed.config.lr) == ("finished", 4, "CartPole-v1",
                                                                                        1e-3)
    assert updates_in(run) == [1, 2, 3, 4]
    assert 'env = "CartPole-v1"' in (run / "config.toml").read_text()


def test_a_keyword_the_algorithm_does_not_read_warns_and_config_toml_leaves_it_out(tmp_path):
    import tomllib

    import rltui

    with pytest.warns(UserWarning, match=r"^clip_eps: algo = reinforce does not read it \(ppo reads it\); no effect"):
        result = rltui.train(env=Bandit(), algo="reinforce", clip_eps=0.3, **TINY, run_dir=tmp_path / "run",
                             progress=False)
    assert result.state == "finished"
    written = tomllib.loads((tmp_path / "run" / "config.toml").read_text())
    assert written["algo"] == "reinforce" and "clip_eps" not in written and "baseline" in written
