"""The (params, obs_stats) a Player acts with: their shapes for a config, and parameters
from elsewhere (copied in this process, or sent over the control socket) checked against
them.
"""

from __future__ import annotations

import numpy as np


class PolicyMismatch(ValueError):
    """Parameters that do not fit the network this config builds; the text says which."""


def acting_template(config, parallel):
    """The shapes and dtypes of (params, obs_stats) for `config` on `parallel` (one
    device), traced without running anything: a leading seed axis with several seeds."""
    import jax

    from trainers.hparams import DynamicHParams

    def init_one(key):  # one agent, on the one device: drop the device axis
        state = parallel._init(parallel._device_index, key, DynamicHParams.create())
        return jax.tree.map(lambda x: x[0], (state.params, state.obs_stats))

    acting = jax.eval_shape(init_one, jax.random.PRNGKey(0))
    agents = config.static_config().num_agents  # every seed of every member
    if agents > 1:
        acting = jax.tree.map(lambda x: jax.ShapeDtypeStruct((agents, *x.shape), x.dtype), acting)
    return acting


def adopt_params(template, params, obs_stats):
    """(params, obs_stats) in the structure of `template` (from `acting_template`), as
    NumPy arrays of its dtypes: parameters copied in this process, or the flax state dicts
    that came over the control socket (data from outside: every leaf is checked)."""
    import jax
    from flax import serialization

    state = {"params": serialization.to_state_dict(params), "obs_stats": serialization.to_state_dict(obs_stats)}
    target = {"params": template[0], "obs_stats": template[1]}
    try:
        restored = serialization.from_state_dict(target, state)
    except (KeyError, ValueError, TypeError) as err:
        raise PolicyMismatch(f"the parameters do not fit this run's network ({err})") from None
    want, got = jax.tree.leaves(target), jax.tree.leaves(restored)
    if len(want) != len(got) or jax.tree.structure(target) != jax.tree.structure(restored):
        raise PolicyMismatch("the parameters do not fit this run's network (a different structure)")
    checked = []
    for spec, leaf in zip(want, got, strict=True):
        array = np.asarray(leaf)
        if array.shape != tuple(spec.shape) or not np.issubdtype(array.dtype, np.number):
            raise PolicyMismatch(f"the parameters do not fit this run's network (an array of shape {array.shape} "
                                 f"where {tuple(spec.shape)} belongs)")
        checked.append(array.astype(spec.dtype, copy=False))
    restored = jax.tree.unflatten(jax.tree.structure(target), checked)
    return restored["params"], restored["obs_stats"]
