"""A population's members, from the `sweep` table: which traced hyperparameters vary, and each
member's values (`plan_sweep`). One entry's spec is parsed by `rltui.config.sweep_spec`.

With `sweep_size = 0` the members are every combination of the lists (the last key in the
trainer's key order varies fastest); with `sweep_size = N` there are N members, each key
drawn independently (lists as choices). Draws come from a NumPy generator seeded by
`sweep_seed` and the key's name, so a key's draws do not change when another key joins the
sweep.

Plain Python and NumPy: a sweep is checked before JAX starts. Every bad sweep is a
`ConfigError` of one line naming the key.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import zlib
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import numpy as np

from rltui.config.keys import KEYS, ConfigError
from rltui.config.sweep_spec import MAX_AGENTS, SWEEPABLE, format_value, parse_spec
from trainers.keys import HParamError


@dataclasses.dataclass(frozen=True)
class Sweep:
    """A population: the swept `keys` (in the trainer's key order) and, per member, its value
    of every swept key as the trainer takes it (a float; a switch 0.0 or 1.0). Member i's
    agents are i * num_seeds ... (i + 1) * num_seeds - 1."""

    keys: tuple[str, ...]
    members: tuple[Mapping[str, float], ...]

    def label(self, i: int) -> str:
        """Member i's values, shortest text: "lr=0.0003 ent_coef=0.01"."""
        return " ".join(f"{key}={format_value(key, self.members[i][key])}" for key in self.keys)

    def column(self, key: str) -> np.ndarray:
        """Every member's value of `key`, as the float32 array the trainer vmaps over."""
        return np.asarray([member[key] for member in self.members], dtype=np.float32)


def plan_sweep(config: Any) -> Sweep | None:
    """The members `config` (a RunConfig) trains, or None when `config.sweep` is empty.
    ConfigError naming the key for a sweep this configuration cannot train."""
    if not config.sweep:
        if config.sweep_size:
            raise ConfigError(
                "sweep_size: there is no sweep to draw members from; add one (--sweep KEY=SPEC), or use num_seeds "
                "for agents that differ only in their seed"
            )
        return None
    try:
        specs = {key: parse_spec(key, config.sweep[key], KEYS) for key in SWEEPABLE if key in config.sweep}
        for key in config.sweep:
            if key not in specs:
                parse_spec(str(key), config.sweep[key], KEYS)  # raises: not a sweepable key
    except HParamError as err:
        raise ConfigError(str(err)) from None
    for key, spec in specs.items():
        found = KEYS[key]
        if not found.reads(config.algo):
            raise ConfigError(
                f"{key}: cannot be swept with algo = {config.algo}, which does not read it "
                f"(read by {', '.join(found.algos)})"
            )
        if spec.sampled_only and not config.sweep_size:
            raise ConfigError(
                f"{key}: {spec.text} is drawn, not listed; set sweep_size, the number of members to draw "
                "(--sweep-size N)"
            )
    keys = tuple(specs)
    seeds = config.num_seeds
    if config.sweep_size:
        _check_agents("sweep_size", f"{config.sweep_size:,} members", config.sweep_size, seeds,
                      "lower sweep_size or num_seeds")
        columns = {key: specs[key].draw(_generator(config.sweep_seed, key), config.sweep_size) for key in keys}
        rows = [tuple(columns[key][i] for key in keys) for i in range(config.sweep_size)]
    else:
        size = math.prod(len(specs[key].values) for key in keys)
        _check_agents("sweep", f"the grid's {size:,} members", size, seeds,
                      "draw some of them with --sweep-size N, or lower num_seeds")
        rows = list(itertools.product(*(specs[key].values for key in keys)))
    members = tuple(MappingProxyType(dict(zip(keys, row))) for row in rows)
    return Sweep(keys=keys, members=members)


def _check_agents(key: str, what: str, members: int, seeds: int, advice: str) -> None:
    if members * seeds > MAX_AGENTS:
        raise ConfigError(
            f"{key}: {what} x {seeds} seed{'s' if seeds != 1 else ''} = {members * seeds:,} agents, more than "
            f"the {MAX_AGENTS:,} one run trains; {advice}"
        )


def _generator(seed: int, key: str) -> np.random.Generator:
    # Seeded by the key's name too: a key's draws stay the same when another key joins.
    return np.random.default_rng([seed, zlib.crc32(key.encode())])


def pbt_replace_count(num_members: int, fraction: float) -> int:
    """Members the bottom `fraction` replaces at each exploit step (and the top fraction
    lends): at least one, and with fraction <= 0.5 never more than half, so the two never
    overlap."""
    return max(1, int(num_members * fraction))
