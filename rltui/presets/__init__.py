"""Tuned settings per environment, shipped with the package (`presets.toml`).

Precedence, lowest first: built-in defaults < the algorithm's defaults < the env preset <
`--config` file < `--set`. A preset holds ordinary configuration keys, so everything it
sets is visible in the run's config.toml and can be overridden.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from collections.abc import Mapping
from importlib import resources
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


@dataclasses.dataclass(frozen=True)
class PresetResult:
    """What a preset was measured to reach here (README's results table)."""

    reference: float  # the published return it aims for
    mean: float  # mean over seeds of the final return
    min: float  # worst seed's final return
    seeds: int
    steps: int
    wall_seconds: float
    # The best return any policy reaches on the same evaluation episodes, where it is known
    # (Pendulum-v1: benchmarks/pendulum_optimum.py); a reference above it is out of reach.
    optimum: float | None = None


@functools.lru_cache(maxsize=1)
def _load() -> dict[str, Any]:
    text = resources.files(__name__).joinpath("presets.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


def preset(algo: str, env: str) -> Mapping[str, Any]:
    """The configuration keys of `algo`'s preset for `env` (empty if there is none)."""
    table = _load().get(algo, {}).get(env, {})
    return {k: v for k, v in table.items() if k != "result"}


def result(algo: str, env: str) -> PresetResult | None:
    table = _load().get(algo, {}).get(env, {}).get("result")
    return PresetResult(**table) if table else None


def presets(algo: str) -> dict[str, Mapping[str, Any]]:
    """Every env's preset for `algo`."""
    return {env: preset(algo, env) for env in _load().get(algo, {})}
