"""Run configuration: built-in defaults < the algorithm's < the env's preset < TOML file <
`--set key=value`, into a frozen dataclass (`RunConfig`, `build_config`); checks across keys;
a resumed run's configuration.

Every key is declared once, as a `Key` (trainers.keys), in the key table below this module
(`rltui.config.keys`, which `KEYS`, `ConfigError` and the value checks come from and are
read through here too). `RunConfig`, the validators, the resumable set, the trainer's
`StaticConfig` and `DynamicHParams` and the configuration reference (docs/configuration.md,
`python -m rltui.config.reference`) derive from them. Keys are flat and identical in TOML and
`--set`. Every bad value raises `ConfigError` with one line naming the field and what is
allowed. No JAX import here: validation runs before anything starts.
`rltui.config.toml_text` reads and writes the TOML and `--set` text.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from rltui.config import presets
from rltui.config.keys import (
    KEYS,
    RESUMABLE_KEYS,
    ConfigError,
    TableEntries,
    coerce_value,
    defaults,
)
from rltui.config.sweep import plan_sweep
from rltui.config.sweep_spec import PERTURBABLE
from rltui.config.toml_text import show_setting
from trainers.algorithms import ALGORITHMS, action_problem, listed
from trainers.env_import import env_id_with_kwargs
from trainers.envs import MINATAR, is_builtin
from trainers.hparams import DynamicHParams, StaticConfig, batch_split_problem
from trainers.keys import INT32_MAX, STATIC, TRACED, UINT32_MAX, Key
from trainers.metrics_spec import METRIC_SPECS
from trainers.quoting import quote, shorten
from trainers.replay_keys import rows_per_env

IMAGE_ENVS = MINATAR  # (10, 10, channels) observations


class _RunConfigMethods:
    @property
    def steps_per_update(self) -> int:
        return self.num_envs * self.num_steps

    @property
    def total_updates(self) -> int:
        return max(1, self.total_timesteps // self.steps_per_update)

    def static_config(self) -> StaticConfig:
        # A list (a RunConfig made directly, not through its keys' rules) as the tuple a
        # compiled program's static configuration hashes.
        values = {k.attr: _hashable(getattr(self, k.name)) for k in KEYS.values() if k.kind == STATIC}
        env_id = env_id_with_kwargs(self.env, self.env_kwargs)
        sweep = plan_sweep(self)
        members = len(sweep.members) if sweep is not None else 1
        return StaticConfig(**{**values, "env_id": env_id, "num_members": members})

    def dynamic_hparams(self) -> DynamicHParams:
        values = {k.attr: k.rule.to_trainer(getattr(self, k.name)) for k in KEYS.values() if k.kind == TRACED}
        return DynamicHParams.create(**values, anneal_updates=float(self.total_updates))

    def to_toml_dict(self, *, only_read: bool = False) -> dict[str, Any]:
        """The configuration as TOML's values; `only_read`: only the keys this run's algorithm
        reads (`reads_key`), as a person reads config.toml."""
        # TOML has no null: an unset optional key is left out, which reads back as unset. A
        # tuple is written as what TOML reads back, a list.
        return {name: list(value) if isinstance(value, tuple) else value
                for name, value in dataclasses.asdict(self).items()
                if value is not None and (not only_read or reads_key(self, name))}


def known_actions(config: Any) -> str | None:
    """"discrete" or "continuous": the action space of a run's env where it is known before
    the env is built (gymnax's envs, or an algorithm that takes one kind only); None for
    another suite's env or an import path, known once built."""
    if is_builtin(config.env):
        return "continuous" if presets.family_of(config.env) == "continuous" else "discrete"
    declared = ALGORITHMS.get(config.algo)
    return declared.actions[0] if declared is not None and len(declared.actions) == 1 else None


def reads_key(config: Any, name: str) -> bool:
    """Whether the run `config` reads the key `name`: its algorithm's own keys and the shared
    ones it uses, less those made for an action space its env does not have
    (`Key.matters_for`)."""
    return KEYS[name].matters_for(config.algo, known_actions(config))


def unread_notice(config: Any, given: Iterable[str]) -> str | None:
    """One line naming the keys in `given` (set by --set, a file or a keyword) that the run
    `config` does not read, so that a setting with no effect is not taken for one; None if
    all count."""
    unread = [name for name in given if name in KEYS and not reads_key(config, name)]
    if not unread:
        return None
    algo = config.algo
    others = [name for name in unread if not KEYS[name].reads(algo)]  # another algorithm's keys
    spaces = [name for name in unread if KEYS[name].reads(algo)]  # keys for the other action space
    said = []
    if others:
        them = "it" if len(others) == 1 else "them"
        users = sorted({user for name in others for user in (KEYS[name].algos or ()) if user != algo})
        read_by = f" ({listed(users)} {'reads' if len(users) == 1 else 'read'} {them})" if users else ""
        said.append(f"{', '.join(others)}: algo = {algo} does not read {them}{read_by}")
    if spaces:
        said.append(f"{', '.join(spaces)}: {config.env} has {known_actions(config)} actions, and "
                    f"{'it is' if len(spaces) == 1 else 'they are'} for {KEYS[spaces[0]].actions} ones")
    return "; ".join(said) + "; no effect on this run"


def no_learning_notice(config: Any) -> str | None:
    """One line where a new run of a replay algorithm ends before its buffer holds
    `learning_starts` transitions (or is full): it would take no gradient step. None
    otherwise."""
    if not reads_key(config, "learning_starts"):
        return None
    start = min(config.learning_starts, rows_per_env(config) * config.num_envs)
    trained = config.total_updates * config.steps_per_update
    if trained >= start:
        return None
    return (f"learning_starts: gradient steps start once the replay buffer holds {start:,.0f} transitions, and this "
            f"run trains {trained:,} env steps: it learns nothing (lower learning_starts, live too, or raise "
            "total_timesteps)")


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def run_config_type(keys: Mapping[str, Key]) -> type:
    """A frozen dataclass with one field per configuration key."""
    fields = [
        (name, key.type_name(), dataclasses.field(default_factory=functools.partial(copy.deepcopy, key.default))
         if isinstance(key.default, (dict, list)) else dataclasses.field(default=key.default))
        for name, key in keys.items()
    ]
    cls = dataclasses.make_dataclass("RunConfig", fields, bases=(_RunConfigMethods,), frozen=True)
    cls.__module__ = __name__
    return cls


RunConfig = run_config_type(KEYS)
RunConfig.__doc__ = "Everything a run is launched with: one field per key of `KEYS`."


class DerivedLimit(NamedTuple):
    """A quantity computed from several keys that must also fit its type; an error names `key`."""

    key: str
    what: str
    value: Callable[[Any], int]
    high: int


DERIVED_LIMITS = (
    # Batch indices and the update counter are int32 inside the trainer.
    DerivedLimit("num_envs", "num_envs x num_steps (env steps per update)", lambda c: c.steps_per_update, INT32_MAX),
    DerivedLimit(
        "total_timesteps",
        "the number of updates (total_timesteps / env steps per update)",
        lambda c: c.total_updates,
        INT32_MAX,
    ),
    # Agent i of a many-seeds run starts from seed + i.
    DerivedLimit(
        "seed", "the last agent's seed (seed + num_seeds - 1)", lambda c: c.seed + c.num_seeds - 1, UINT32_MAX
    ),
)


def build_config(
    file_values: Mapping[str, Any] | None = None, overrides: Mapping[str, Any] | None = None, *, use_preset: bool = True
) -> RunConfig:
    """Built-in defaults < the algorithm's defaults < the env's family defaults < the env's
    tuned preset (neither when `use_preset` is off) < `file_values` < `overrides`."""
    merged: dict[str, Any] = {}
    for source in (file_values or {}, overrides or {}):
        for key, value in source.items():
            coerced = coerce_value(key, value)
            if isinstance(value, TableEntries):
                coerced = {**merged.get(key, {}), **coerced}
            merged[key] = coerced
    algo = merged.get("algo", KEYS["algo"].default)
    tuned = {}
    if use_preset:
        tuned = {
            key: coerce_value(key, value)
            for key, value in presets.settings(algo, merged.get("env", KEYS["env"].default)).items()
        }
    config = RunConfig(**{**defaults(algo), **tuned, **merged})
    for limit in DERIVED_LIMITS:
        if limit.value(config) > limit.high:
            raise ConfigError(f"{limit.key}: {limit.what} must be at most {limit.high}, got {limit.value(config)}")
    outside = not is_builtin(config.env)  # an import path, an env object's id or another suite's env
    if config.env_kwargs and not outside:
        raise ConfigError(
            f"env_kwargs: only an env given by import path or another suite's id takes arguments; "
            f"{config.env} is built in"
        )
    actions = known_actions(config)
    if actions is not None:
        problem = action_problem(config.algo, actions, config.env)
        if problem is not None:
            raise ConfigError(problem)
    # Such an env is checked by `check_env.preflight` once built.
    if config.network == "cnn" and config.env not in IMAGE_ENVS and not outside:
        raise ConfigError(
            f"network: cnn needs image observations (the MinAtar envs); {config.env} has flat observations"
        )
    check_devices(config, 1)
    _check_population(config)
    return config


def _check_population(config: RunConfig) -> None:
    """The sweep and population-based training's keys, across keys (ConfigError naming one)."""
    sweep = plan_sweep(config)
    members = len(sweep.members) if sweep is not None else 1
    if sweep is not None and members == 1:
        values = " ".join(f"--set {sweep.label(0).replace(' ', ' --set ')}".split())
        raise ConfigError(f"sweep: a population needs at least 2 members, this sweep gives one; for one value use "
                          f"{values}")
    for key in config.pbt_keys:
        if not KEYS[key].reads(config.algo):
            raise ConfigError(f"pbt_keys: algo = {config.algo} does not read {key}")
    if not config.pbt_every_updates:
        return
    if members < 2:
        raise ConfigError(
            f"pbt_every_updates: population-based training needs a population of at least 2 members, got {members}; "
            "add a sweep (--sweep \"lr=loguniform(1e-4,1e-3)\" --sweep-size 8)"
        )
    if METRIC_SPECS[config.pbt_metric].source == "evaluation" and not config.eval_every_updates:
        raise ConfigError(f"pbt_metric: {config.pbt_metric} needs evaluation; set eval_every_updates > 0")
    if not config.pbt_keys and not any(key in PERTURBABLE for key in sweep.keys):
        raise ConfigError(
            f"pbt_keys: the sweep has no numeric key for PBT to perturb ({', '.join(sweep.keys)} "
            f"{'is a switch' if len(sweep.keys) == 1 else 'are switches'}); name some, like pbt_keys = [\"lr\"]"
        )


def hparams_as_config(live_hparams: Mapping[str, float]) -> dict[str, Any]:
    """Hyperparameters as the trainer holds them (a checkpoint's "hparams") as config values:
    switches are 0.0/1.0 floats while training, booleans in the config; values that are not
    config keys (anneal_updates, derived from total_timesteps) are left out."""
    return {
        name: KEYS[name].rule.from_trainer(value)
        for name, value in live_hparams.items()
        if name in KEYS and KEYS[name].live
    }


def resume_config(
    checkpoint_config: Mapping[str, Any], live_hparams: Mapping[str, float], overrides: Mapping[str, Any]
) -> RunConfig:
    """The config of a resumed run: the checkpoint's, with the hyperparameters as they were
    when it was saved (live edits included), then `overrides`, which may only touch
    RESUMABLE_KEYS."""
    base = dict(checkpoint_config)
    base.update({name: value for name, value in hparams_as_config(live_hparams).items() if name in base})
    original = build_config(base, use_preset=False)
    for key, value in overrides.items():
        if key not in RESUMABLE_KEYS and coerce_value(key, value) != getattr(original, key):
            value = getattr(original, key)
            shown = quote(value) if isinstance(value, str) else shorten(show_setting(value))
            raise ConfigError(
                f"{key}: cannot change when resuming (the checkpoint was made with {shown}); start a new run instead"
            )
    return build_config(base, overrides, use_preset=False)


def check_run_name(name: str) -> str:
    """`name` if it names one directory inside runs/, else ConfigError: a path separator, "."
    or ".." would place the run elsewhere, and a control character would break the one-line
    messages that show the run directory."""
    if not name or name in (".", ".."):
        raise ConfigError(f"--name: expected a directory name, got {quote(name)}")
    separators = [sep for sep in ("/", os.sep, os.altsep) if sep and sep in name]
    if separators:
        raise ConfigError(
            f"--name: expected a name without {quote(separators[0])} (one directory under runs/; "
            f"--run-dir takes a path), got {quote(name)}"
        )
    if not name.isprintable():
        raise ConfigError(f"--name: expected a name without control characters, got {quote(name)}")
    return name


def check_devices(config: Any, num_devices: int) -> None:
    """The batch splits evenly over `num_devices` devices and the algorithm's minibatches;
    ConfigError naming the key otherwise (the rules: `trainers.hparams.batch_split_problem`)."""
    problem = batch_split_problem(config, num_devices)
    if problem is not None:
        key, reason = problem
        raise ConfigError(f"{key}: {reason}")
