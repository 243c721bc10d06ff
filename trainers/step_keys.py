"""What an env's step may be given in place of a plain PRNG key, declared below the env
factory (`envs`) and the wrappers that honour it (`presampled_reset`, `env_adapter`), which
all import it. Imports nothing: the factory imports gymnax only where it builds an env."""

from __future__ import annotations

from typing import Any, NamedTuple


class NoResetKey(NamedTuple):
    """A step's key, asking the env not to restart where the episode ends: the step returns
    the state (and observation) that ended it, and whoever steps on resets it. For acting
    outside training, where the last state is shown (the watch view). Every `EnvSpec.env`
    takes one: the transition is the one a plain `key` makes. An imported env that resets
    itself inside its own step still returns its reset state; its
    `info["final_observation"]` is the last observation all the same."""

    key: Any
