"""A second session on the same config in one process (`rltui.train` called again, a resume
from Python) takes the program the first compiled; its agent is its own."""

from __future__ import annotations

import jax
import numpy as np

from rltui.config.build import build_config
from rltui.session.backend import JaxBackend, _built_trainer

from helpers import count_compiles

# A network width no other test uses: the first build here compiles.
CONFIG = build_config({}, {"num_envs": 2, "num_steps": 8, "num_minibatches": 2, "update_epochs": 1,
                           "hidden_sizes": [13], "total_timesteps": 1024})


def trained(seed: int, hp=None) -> tuple[JaxBackend, list[dict], int]:
    """A backend of CONFIG with `seed`, built and run 3 updates; its rows and the compiles."""
    hp = hp or CONFIG.dynamic_hparams()
    with count_compiles() as compiles:
        backend = JaxBackend(CONFIG.static_config(), seed)
        backend.build(hp)
        rows = backend.run_chunk(3, hp)
    return backend, rows, compiles.count


def test_a_second_backend_on_the_same_config_compiles_nothing_and_trains_its_own_agent():
    first, first_rows, first_compiles = trained(seed=0)
    assert first_compiles > 0
    again, again_rows, again_compiles = trained(seed=0)
    assert again_compiles == 0
    # Same seed, same program: the same updates, from a state of its own.
    for a, b in zip(first_rows, again_rows):
        np.testing.assert_array_equal(a["policy_loss"], b["policy_loss"])
    other, _, _ = trained(seed=1)
    assert len({first.params_digest(), other.params_digest()}) == 2
    # The first backend's state is its own still (the chunk donates the state it is given):
    # it trains on.
    before = first.params_digest()
    first.run_chunk(1, CONFIG.dynamic_hparams())
    assert first.params_digest() != before


def test_an_env_given_by_import_path_is_built_afresh(tmp_path, monkeypatch):
    module = tmp_path / "reuse_env_module.py"
    module.write_text("from gymnax.environments.classic_control.cartpole import CartPole as Env\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    config = build_config({}, {"env": "reuse_env_module:Env", "num_envs": 2, "num_steps": 8, "num_minibatches": 2,
                               "update_epochs": 1, "hidden_sizes": [13], "total_timesteps": 1024})
    # Its code may have changed since the last build: each build is a new trainer (and so
    # a new compile), where a built-in env's is the one built before.
    devices = jax.local_devices()[:1]
    assert _built_trainer(config.static_config(), devices) is not _built_trainer(config.static_config(), devices)
    assert _built_trainer(CONFIG.static_config(), devices) is _built_trainer(CONFIG.static_config(), devices)
