"""The other JAX suites, as optional extras (`pip install "rltui[navix]"`): env ids with the
suite's name as a prefix (`navix:Navix-Empty-5x5-v0`), each adapted by the module of the
same name here to the gymnax interface `env_import` trains on (`env_import` loads them
through `load`; both share `env_source`).

Nothing here imports a suite at module level: config validation parses ids with it, and a
suite takes seconds to import.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from typing import NamedTuple

from trainers.env_source import EnvImportError, EnvSource, split_env_id


class Suite(NamedTuple):
    name: str  # the id prefix, the extra and the adapter module's name
    package: str  # what the extra installs, as imported
    example: str  # an env id of the suite


SUITES: dict[str, Suite] = {
    "navix": Suite("navix", "navix", "navix:Navix-Empty-5x5-v0"),
    "craftax": Suite("craftax", "craftax", "craftax:Craftax-Classic-Symbolic-v1"),
    "jumanji": Suite("jumanji", "jumanji", "jumanji:Snake-v1"),
    "brax": Suite("brax", "brax", "brax:inverted_pendulum"),
}
_SUITE_ID = re.compile(r"^([a-z]+):(\S+)$")


def suite_of(env_id: str) -> Suite | None:
    """The suite a prefixed id names (`navix:...`), or None for any other id."""
    found = _SUITE_ID.match(split_env_id(env_id).path)
    return SUITES.get(found.group(1)) if found else None


def installed(suite: Suite) -> bool:
    return importlib.util.find_spec(suite.package) is not None


def _adapter(suite: Suite):
    if not installed(suite):
        raise EnvImportError(f'env: {suite.name} is not installed; pip install "rltui[{suite.name}]"')
    return importlib.import_module(f"trainers.suites.{suite.name}")


def env_names(suite: Suite) -> tuple[str, ...]:
    """Every env the installed suite offers, without its prefix."""
    return tuple(_adapter(suite).env_names())


def load(env_id: str) -> EnvSource:
    """The suite env `env_id` names, adapted; EnvImportError (one line) when the suite is
    not installed or has no such env."""
    suite = suite_of(env_id)
    ref = split_env_id(env_id)
    name = ref.path.partition(":")[2]
    adapter = _adapter(suite)
    names = adapter.env_names()
    if name not in names:
        from trainers.quoting import closest
        close = closest(name, names, cutoff=0.5)
        hint = f"did you mean {suite.name}:{close}? " if close else ""
        raise EnvImportError(f"env: {suite.name} has no env {name!r}; {hint}run `rltui envs` for the list")
    env, params = adapter.make(name, **ref.kwargs)
    return EnvSource(env, params, ref.path)
