"""The Python API (rltui.api): an env object trains to its known optimal return; the
documented example runs as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_custom_env import LEARNED, Bandit

REPO = Path(__file__).resolve().parents[2]


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
    with pytest.raises(rltui.ApiError, match=r"^num_envs: cannot be swept"):
        rltui.train(env=Bandit(), sweep={"num_envs": [4, 8]}, run_dir=tmp_path / "bad")


def test_bad_input_raises_api_error_before_anything_is_written(tmp_path):
    import rltui

    class NoReset:
        default_params = None

    with pytest.raises(rltui.ApiError, match=r"^env: object:NoReset gave a NoReset, which has no reset method"):
        rltui.train(env=NoReset(), run_dir=tmp_path / "run")
    with pytest.raises(rltui.ApiError, match=r"^lr: "):
        rltui.train(env=Bandit(), lr=-1.0, run_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_the_documented_example_runs(tmp_path):
    text = (REPO / "docs" / "python-api.md").read_text()
    code = re.search(r"```python\n(.*?)```", text, re.DOTALL).group(1)
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "PYTHONPATH")}
    env.update(JAX_PLATFORMS="cpu", XDG_CACHE_HOME=str(tmp_path / "cache"), PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    state, updates, latest = done.stdout.splitlines()[0].split()
    assert (state, updates) == ("finished", "64")
    assert float(latest) >= LEARNED
    assert (tmp_path / "runs" / "bandit" / "config.toml").exists()
