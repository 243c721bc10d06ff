"""The watch view's action is the one the env receives."""

from __future__ import annotations

import jax
import numpy as np

from rltui.config.build import build_config
from rltui.watch.player import Player


def test_a_squashed_policys_action_is_shown_as_the_env_receives_it():
    # SAC's Gaussian is over u; Pendulum receives 2 tanh(u), within its bounds of +-2.
    from trainers.parallel import build

    config = build_config({"algo": "sac", "env": "Pendulum-v1", "num_envs": 1, "num_steps": 1, "hidden_sizes": [8],
                           "buffer_size": 64, "batch_size": 8}, use_preset=False)
    parallel = build(config.static_config(), jax.local_devices()[:1])
    state = parallel.init(parallel.seed_keys(config.seed), config.dynamic_hparams())
    # A policy whose mean u is 3, far outside [-1, 1]: the actor's head outputs (mean u,
    # log std) from its bias alone.
    params = jax.tree.map(lambda x: np.array(np.asarray(x)[0]), state.params)
    head = params["params"]["actor_head"]
    head["kernel"] = np.zeros_like(head["kernel"])
    head["bias"] = np.array([3.0, 0.0], np.float32)
    player = Player(config, (params, jax.tree.map(lambda x: np.array(np.asarray(x)[0]), state.obs_stats)),
                    parallel=parallel)
    view = player.step()
    np.testing.assert_allclose(view.mean, [3.0], rtol=1e-6)
    assert view.squashed
    np.testing.assert_allclose(view.action, [2.0 * np.tanh(3.0)], rtol=1e-5)
