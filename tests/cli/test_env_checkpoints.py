"""Every env rltui trains checkpoints and resumes, whatever classes its state is made of: each
suite's (Jumanji's `State`...) and an env author's own (`flax.struct`, `chex.dataclass`,
`jax.tree_util.register_dataclass`), through a real run's checkpoint and `--resume`.

This module is also the env module of the author's own classes (`test_env_checkpoints:make`).
"""

from __future__ import annotations

import dataclasses
import json

import jax
import jax.numpy as jnp
import pytest
from flax import struct
from test_custom_env import Bandit
from test_suites import SUITE_ENVS, needs


@struct.dataclass
class FlaxState:
    time: jax.Array


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class JaxState:
    time: jax.Array


STATE_CLASSES = {"flax": FlaxState, "jax": JaxState}
try:
    import chex
except ImportError:  # chex comes with optax today; the test says so if it ever does not
    chex = None
else:

    @chex.dataclass
    class ChexState:
        time: jax.Array

    STATE_CLASSES["chex"] = ChexState


class StateBandit(Bandit):
    """test_custom_env's Bandit, its state of the class `kind` names."""

    def __init__(self, kind: str):
        super().__init__(arms=2)
        self.state_class = STATE_CLASSES[kind]

    def reset(self, key, params):
        return jnp.zeros((2, 1)), self.state_class(time=jnp.int32(0))

    def step(self, key, state, action, params):
        time = state.time + 1
        reward = (action == self.arms - 1).astype(jnp.float32)
        truncated = time >= params.max_steps_in_episode
        return jnp.zeros((2, 1)), self.state_class(time=time), reward, jnp.bool_(False), truncated, {}


def make(kind: str = "flax"):
    return StateBandit(kind)


SMALL = ["--set", "num_envs=4", "--set", "num_steps=8", "--set", "num_minibatches=1", "--set", "update_epochs=1"]


def launch_then_resume(env: list[str], run_dir, capsys) -> list[int]:
    """Two updates, a final checkpoint, then `--resume` for two more: the update indices of
    metrics.jsonl. Each launch must end with exit code 0."""
    from rltui.cli import main

    code = main(["launch", "--no-ui", "--run-dir", str(run_dir), *env, *SMALL, "--set", "total_timesteps=64"])
    assert code == 0, capsys.readouterr().err
    assert (run_dir / "checkpoints" / "checkpoint-000000002.msgpack").exists()
    code = main(["launch", "--no-ui", "--resume", str(run_dir), "--set", "total_timesteps=128"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "Training failed" not in err
    assert (run_dir / "checkpoints" / "checkpoint-000000004.msgpack").exists()
    return [json.loads(line)["update"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("suite", [pytest.param(s, marks=needs(s)) for s in SUITE_ENVS])
def test_each_installed_suites_run_checkpoints_and_resumes(suite, tmp_path, capsys):
    assert launch_then_resume(["--set", f"env={SUITE_ENVS[suite]}"], tmp_path / "run", capsys) == [1, 2, 3, 4]


@pytest.mark.parametrize("kind", ["flax", "jax", "chex"])
def test_a_run_on_an_env_with_its_own_state_class_checkpoints_and_resumes(kind, tmp_path, capsys):
    if kind not in STATE_CLASSES:
        pytest.skip("chex is not installed (it comes with optax)")
    env = ["--set", "env=test_env_checkpoints:make", "--set", f"env_kwargs={{kind = {kind!r}}}"]
    assert launch_then_resume(env, tmp_path / "run", capsys) == [1, 2, 3, 4]
