"""Tuned settings per environment: each algorithm's, shipped in its package
(`trainers/algorithms/NAME/presets.toml`, where it has any).

Precedence, lowest first: built-in defaults < the algorithm's defaults < the env's family
defaults < the env's own preset < `--config` file < `--set`. Families and presets hold
ordinary configuration keys, so everything they set is visible in the run's config.toml
and can be overridden.
"""

from __future__ import annotations

import dataclasses
import functools
import tomllib
from collections.abc import Mapping
from importlib import resources
from typing import Any

from rltui.config.keys import coerce_value, defaults
from trainers.algorithms import ALGORITHMS


@dataclasses.dataclass(frozen=True)
class PresetResult:
    """What a preset was measured to reach here (README's results table)."""

    mean: float  # mean over seeds of the final return
    min: float  # worst seed's final return
    seeds: int
    steps: int
    wall_seconds: float
    reference: float | None = None  # the published return it aims for, where there is one
    # A uniformly random policy's return on the same evaluation episodes, where measured:
    # settings that do no better have learned nothing.
    random: float | None = None
    # The best return any policy reaches on the same evaluation episodes, where it is known
    # (Pendulum-v1: benchmarks/pendulum_optimum.py); a reference above it is out of reach.
    optimum: float | None = None

    @property
    def steps_label(self) -> str:
        """The env steps as the presets page's tables write them (`millions_label`)."""
        return millions_label(self.steps)


def millions_label(steps: float) -> str:
    """Env steps in millions, to one decimal where that is within 1% of them (a run's steps are
    whole updates, a little under the total asked for), else to two: 0.5M, 0.75M, 10.0M."""
    millions = steps / 1e6
    close = abs(round(millions, 1) - millions) <= 0.01 * millions
    return f"{millions:.1f}M" if close else f"{millions:.2f}M"


PRESETS_FILE = "presets.toml"  # in an algorithm's package
FAMILIES = "family"  # the table of an algorithm's families in its presets, beside its env presets
RESULT = "result"

# Envs with continuous (Box) actions, which share the `continuous` family whatever their
# suite. The env table records action types only in the built env, and building one starts
# JAX's backend before the launcher has sized XLA's thread pool; a test keeps this set
# equal to what `make_env` builds.
CONTINUOUS_ACTIONS = frozenset(
    {"Pendulum-v1", "MountainCarContinuous-v0", "PointRobot-misc", "Reacher-misc", "Swimmer-misc"}
)


@functools.lru_cache(maxsize=1)
def _load() -> dict[str, Any]:
    """Every algorithm's presets, by algorithm (an algorithm without a presets file has none)."""
    tables = {}
    for name, algorithm in ALGORITHMS.items():
        file = resources.files(algorithm.package).joinpath(PRESETS_FILE)
        tables[name] = tomllib.loads(file.read_text(encoding="utf-8")) if file.is_file() else {}
    return tables


def family_of(env: str) -> str | None:
    """The family whose defaults `env` gets: its suite in `trainers.envs` (a masked variant
    takes its base env's), or `continuous` for Box actions; None for an env that is not one
    of gymnax's (an import path, another suite), which starts from the defaults."""
    from trainers import envs

    base = envs.MASKED_ENVS.get(env, (env, ()))[0]
    if base in CONTINUOUS_ACTIONS:
        return "continuous"
    suites = {"classic": envs.CLASSIC_CONTROL, "minatar": envs.MINATAR, "bsuite": envs.BSUITE, "misc": envs.MISC}
    return next((name for name, members in suites.items() if base in members), None)


def families(algo: str) -> dict[str, Mapping[str, Any]]:
    """Every family `algo` declares, by name: its configuration keys."""
    return {name: _keys(table) for name, table in _family_tables(algo).items()}


def family(algo: str, env: str) -> Mapping[str, Any]:
    """The configuration keys of `env`'s family for `algo` (empty if it has none)."""
    return families(algo).get(family_of(env) or "", {})


def preset(algo: str, env: str) -> Mapping[str, Any]:
    """The configuration keys of `algo`'s own preset for `env` (empty if there is none)."""
    return _keys(_env_table(algo, env))


def settings(algo: str, env: str) -> Mapping[str, Any]:
    """What `env` gets from `algo`'s presets: its family's keys, then its own preset's over them."""
    return {**family(algo, env), **preset(algo, env)}


def result(algo: str, env: str) -> PresetResult | None:
    """What `env`'s settings reached: its own preset's record, else its family's record of
    it (measured on the family's settings alone)."""
    if has_preset(algo, env):
        table = _env_table(algo, env).get(RESULT)
    else:
        table = _family_tables(algo).get(family_of(env) or "", {}).get(RESULT, {}).get(env)
    return PresetResult(**table) if table else None


def has_preset(algo: str, env: str) -> bool:
    """Whether `algo`'s presets have a table for `env` itself (even one that only records a
    result)."""
    return env != FAMILIES and env in _load().get(algo, {})


def applied(algo: str, env: str, given: Mapping[str, Any]) -> dict[str, Any] | None:
    """What the presets changed for a new run on `env`: the keys of its family and preset that
    `given` (the config file and --set together) neither sets nor sweeps and that differ from
    `algo`'s defaults, as {"env", "preset": env or None, "family": name or None, "settings"}
    (TOML values, as the run's metadata keeps them); None where it changed nothing."""
    builtin = defaults(algo)
    swept = given.get("sweep") if isinstance(given.get("sweep"), Mapping) else {}
    changed = {key: value for key, value in settings(algo, env).items() if key not in given and key not in swept
               and coerce_value(key, value) != coerce_value(key, builtin[key])}
    if not changed:
        return None
    return {"env": env, "preset": env if preset(algo, env) else None, "family": family_of(env) if family(algo, env)
            else None, "settings": changed}


def describe(record: Mapping[str, Any]) -> str:
    """Where a run's settings came from, as launch and `rltui info` say it: "Breakout-MinAtar
    preset (on the minatar family)", "minatar family settings for Asterix-MinAtar"."""
    if record.get("preset"):
        on = f" (on the {record['family']} family)" if record.get("family") else ""
        return f"{record['preset']} preset{on}"
    return f"{record.get('family')} family settings for {record.get('env')}"


def presets(algo: str) -> dict[str, Mapping[str, Any]]:
    """Every env's own preset for `algo`."""
    return {env: preset(algo, env) for env in _load().get(algo, {}) if env != FAMILIES}


def _env_table(algo: str, env: str) -> Mapping[str, Any]:
    return _load().get(algo, {}).get(env, {}) if has_preset(algo, env) else {}


def _family_tables(algo: str) -> Mapping[str, Any]:
    return _load().get(algo, {}).get(FAMILIES, {})


def _keys(table: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in table.items() if k != RESULT}
