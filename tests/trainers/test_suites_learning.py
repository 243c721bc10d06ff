"""One env of each optional suite learns measurably (slow: `pytest -m slow`). Each test
measures the return of a uniformly random policy on its env, trains PPO on a small budget,
and asserts the trained policy's return clears a threshold well above the random one.
Both returns come from the same whole-episode evaluation (`trainers.evaluate`), the
trained policy sampling its actions as in training. A suite that is not installed is
skipped, naming its extra."""

from __future__ import annotations

import importlib.util

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from trainers.envs import EnvSpec, make_env
from trainers.evaluate import evaluate
from trainers.hparams import DynamicHParams, StaticConfig
from trainers.networks import PolicyOutputs
from trainers.suites import SUITES

from helpers import train_run

pytestmark = pytest.mark.slow


def needs(suite: str):
    missing = importlib.util.find_spec(SUITES[suite].package) is None
    return pytest.mark.skipif(missing, reason=f'{suite} is not installed (pip install "rltui[{suite}]")')


def random_policy_return(spec: EnvSpec, episodes: int) -> float:
    """Mean return of a policy with uniform logits (discrete) or N(0, 1) actions clipped to
    the env's bounds (continuous), over `episodes` whole episodes."""
    n = spec.num_actions
    uniform = lambda params, hidden, obs: (hidden, PolicyOutputs(jnp.zeros(n), jnp.zeros(n), jnp.zeros(())))
    run = jax.jit(
        lambda key: evaluate(
            None, key, spec=spec, step_fn=uniform, initial_hidden=None, episodes=episodes, greedy=False
        )
    )
    return float(np.mean(run(jax.random.PRNGKey(7))))


def trained_return(env_id: str, timesteps: int, episodes: int, lr: float, **static) -> float:
    """Mean return of PPO's policy after `timesteps` steps (seed 0), over `episodes` episodes."""
    config = StaticConfig(env_id=env_id, **static)
    updates = timesteps // config.steps_per_update
    hp = DynamicHParams.create(lr=lr, anneal_updates=updates)
    parallel, state, _ = train_run(config, updates, 0, hp)
    trainer, params = parallel.trainer, parallel.unreplicate(state.params)
    run = jax.jit(
        lambda key: evaluate(
            params,
            key,
            spec=trainer.spec,
            step_fn=trainer.policy_step,
            initial_hidden=trainer.initial_hidden(episodes),
            episodes=episodes,
            greedy=False,
        )
    )
    return float(np.mean(run(jax.random.PRNGKey(7))))


@needs("navix")
def test_navix_empty_5x5_learns_to_reach_the_goal():
    # Reward 1 for reaching the goal within 100 steps, else 0. Measured here: random 0.50,
    # trained 0.98 after 50k steps (about 10 s of training on 2 cores).
    env_id = "navix:Navix-Empty-5x5-v0"
    random = random_policy_return(make_env(env_id), episodes=64)
    trained = trained_return(env_id, 50_000, episodes=64, lr=2.5e-4, num_envs=8, max_chunk_updates=64)
    assert random < 0.7, random
    assert trained >= 0.9, (random, trained)


@needs("jumanji")
def test_jumanji_snake_on_a_6x6_board_learns_to_eat():
    # Reward 1 per fruit eaten, episodes of at most 200 steps. Measured here: random 0.16,
    # trained 6.1 after 200k steps (about 20 s of training on 2 cores).
    env_id = 'jumanji:Snake-v1 {"num_rows": 6, "num_cols": 6, "time_limit": 200}'
    random = random_policy_return(make_env(env_id), episodes=64)
    trained = trained_return(env_id, 200_000, episodes=64, lr=1e-3, num_envs=16, num_steps=64, max_chunk_updates=64)
    assert random < 1.0, random
    assert trained >= 2.0, (random, trained)


@needs("brax")
def test_brax_inverted_pendulum_learns_to_balance():
    # Reward 1 per step the pole stays up, episodes of at most 1000 steps. Measured here:
    # random 5.6, trained 700 after 100k steps (about 30 s of training on 2 cores).
    env_id = "brax:inverted_pendulum"
    random = random_policy_return(make_env(env_id), episodes=32)
    trained = trained_return(env_id, 100_000, episodes=32, lr=1e-3, num_envs=16, num_steps=64, max_chunk_updates=32)
    assert random < 20, random
    assert trained >= 200, (random, trained)
