"""Watching a Q-learner: the panel shows each action's Q-value (not probabilities), greedy
play takes the action of the largest, and sampled play explores epsilon-greedily."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from rltui.config.build import build_config
from rltui.watch.describe import describe_step
from rltui.watch.player import Player

TINY = {"pqn": {"algo": "pqn", "num_envs": 4, "num_steps": 16, "num_minibatches": 2, "update_epochs": 1,
                "hidden_sizes": [16], "total_timesteps": 6400, "eps_end": 0.5},
        "dqn": {"algo": "dqn", "num_envs": 4, "num_steps": 2, "buffer_size": 64, "batch_size": 8,
                "hidden_sizes": [16], "total_timesteps": 6400, "eps_end": 0.5}}
Q_LEARNERS = pytest.mark.parametrize("algo", sorted(TINY))


def q_player(algo: str, greedy: bool) -> Player:
    from trainers.parallel import build

    config = build_config({**TINY[algo], "env": "CartPole-v1"}, use_preset=False)
    parallel = build(config.static_config(), jax.local_devices()[:1])
    state = parallel.init(parallel.seed_keys(config.seed), config.dynamic_hparams())
    acting = jax.tree.map(lambda x: np.array(np.asarray(x)[0]), (state.params, state.obs_stats))
    return Player(config, acting, seed=0, greedy=greedy, parallel=parallel)


@Q_LEARNERS
def test_the_panel_shows_q_values_and_greedy_play_takes_the_largest(algo):
    player = q_player(algo, greedy=True)
    view = player.step()
    assert view.q_values and view.probs.shape == (2,)
    assert view.action == int(np.argmax(view.probs))
    assert view.value == max(view.probs)  # max_a Q(s, a)
    text = describe_step(player).plain
    assert "Q(s, a)" in text and "max Q" in text and "V(s)" not in text
    assert "bars: Q above the lowest" in text  # a full bar beside none may be a small difference
    assert f"{view.probs[0]:+.3f}" in text and f"{view.probs[1]:+.3f}" in text


@Q_LEARNERS
def test_sampled_play_explores_at_the_final_epsilon(algo):
    player = q_player(algo, greedy=False)
    views = [player.step() for _ in range(400)]
    off_greedy = np.mean([v.action != int(np.argmax(v.probs)) for v in views])
    # eps_end 0.5 over two actions: a quarter of the actions are not the greedy one.
    assert 0.15 < off_greedy < 0.35, off_greedy
