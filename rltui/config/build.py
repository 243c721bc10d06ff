"""Run configuration: built-in defaults < TOML file < `--set key=value`, into a frozen dataclass.

Every key is declared once, as a `Key` (trainers.keys): the trainer's in
`trainers.hparams.TRAINER_KEYS`, the run's in `RUN_KEYS` below. `RunConfig`, the
validators, the resumable set, the trainer's `StaticConfig` and `DynamicHParams` and the
configuration reference (docs/configuration.md, `python -m rltui.config.reference`) derive
from them. Keys are flat and identical in TOML and `--set`. Every bad value raises
`ConfigError` with one line naming the field and what is allowed. No JAX import here:
validation runs before anything starts. `rltui.config.toml_text` reads and writes the TOML and
`--set` text.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import os
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from rltui.config.sweep import MAX_AGENTS, PERTURBABLE, Factors, SweepTable
from rltui.errors import UsageError
from trainers.env_import import env_id_with_kwargs, is_import_path
from trainers.envs import MINATAR
from trainers.hparams import (
    TRAINER_KEYS,
    DynamicHParams,
    StaticConfig,
    batch_split_problem,
)
from trainers.keys import (
    INT32_MAX,
    INT64_MAX,
    QUOTE_LIMIT,
    RUN,
    STATIC,
    TRACED,
    UINT32_MAX,
    Choice,
    HParamError,
    IntRange,
    Key,
    Names,
    Number,
    Table,
    closest,
    quote,
    shorten,
)


class ConfigError(UsageError):
    """Bad configuration; the message is one line naming the field and what is allowed."""


IMAGE_ENVS = MINATAR  # (10, 10, channels) observations


class OptionalNumber(Number):
    """A number, or unset (None, the default; TOML cannot write it, so a file leaves the key
    out, and `--set key=none` unsets it)."""

    def describe(self) -> str:
        return super().describe() + ", or none (unset)"

    def coerce(self, name: str, value: Any) -> float | None:
        if value is None or (isinstance(value, str) and value.lower() == "none"):
            return None
        return super().coerce(name, value)

# The run's own keys: read by the session and the launcher around the compiled step.
RUN_KEYS: tuple[Key, ...] = (
    # Folded into the trainer's env id (`env_import.env_id_with_kwargs`), which must stay
    # hashable: the launcher reads the table, the trainer never sees it as such.
    Key("env_kwargs", {}, "keyword arguments for an env given by import path (a TOML table: "
        "env_kwargs = {size = 5})", Table(), RUN, resumable=False),
    Key("seed", 0, "random seed: same seed, same machine, same metrics (a 32-bit PRNG key)",
        IntRange(0, UINT32_MAX), RUN, resumable=False),
    Key("total_timesteps", 500_000, "environment steps to train for (rounded down to whole updates, at least one)",
        IntRange(1, INT64_MAX), RUN),
    Key("devices", 0, "devices to split environments over; 0 = automatic (all GPUs, or one CPU device); on a "
        "CPU-only machine N > 1 splits the CPU into N host devices", IntRange(0, INT32_MAX), RUN),
    Key("cpu_threads", 0, "XLA's CPU worker threads; 0 = automatic: 1 for an MLP on small minibatches (faster "
        "there, and leaves the other cores free), otherwise one per CPU", IntRange(0, INT32_MAX), RUN),
    Key("chunk_seconds", 0.3, "target wall time of one chunk of updates (latency of pause/edit)",
        Number(0.01, 60, unit="seconds"), RUN),
    Key("checkpoint_every_updates", 0, "save a checkpoint every N updates; 0 = only by time",
        IntRange(0, INT32_MAX), RUN),
    Key("checkpoint_minutes", 1.0, "save a checkpoint every M minutes, the first 10 seconds after training starts "
        "(never more often than 100x a save's own time, so saving takes at most 1% of the run); "
        "0 = only by update count", Number(0, unit="minutes"), RUN),
    Key("keep_checkpoints", 3, "how many recent checkpoints to keep", IntRange(1, INT32_MAX), RUN),
    Key("eval_every_updates", 0, "evaluate the policy greedily every N updates on envs of its own (eval_return in "
        "metrics.jsonl; the best policy kept as checkpoints/best.msgpack); 0 = off", IntRange(0, INT32_MAX), RUN),
    Key("eval_episodes", 16, "episodes per evaluation (one env each)", IntRange(1, 4096), RUN),
    Key("stop_at_eval_return", None, "stop the run, with a final checkpoint, once an evaluation's mean return "
        "reaches this; unset = never", OptionalNumber(), RUN),
    Key("loggers", (), "where metrics and events go besides metrics.jsonl and events.jsonl (always written): "
        "tensorboard (event files in RUN_DIR/tb/), wandb (Weights & Biases; its WANDB_* variables apply)",
        Names(("jsonl", "tensorboard", "wandb")), RUN),
    # A population (rltui.population): the sweep decides the members and their values, so
    # a resumed run keeps it; PBT's settings only steer what happens between chunks.
    Key("sweep", {}, "train a population: a table from traced keys to a list of values or a distribution "
        "(see docs/populations.md); members x num_seeds agents train in one program; empty = one member",
        SweepTable(), RUN, resumable=False),
    Key("sweep_size", 0, "members of the population: 0 = every combination of the sweep's lists (a grid); N = N "
        "members, each drawing its values (lists as choices)", IntRange(0, MAX_AGENTS), RUN, resumable=False),
    Key("sweep_seed", 0, "seed of the sweep's draws (sweep_size > 0)", IntRange(0, UINT32_MAX), RUN,
        resumable=False),
    Key("pbt_every_updates", 0, "population-based training: every N updates the bottom pbt_fraction of members "
        "is replaced by perturbed clones of the top; 0 = off", IntRange(0, INT32_MAX), RUN),
    Key("pbt_fraction", 0.25, "PBT: the fraction of members replaced (the bottom), and cloned from (the top)",
        Number(0, 0.5, low_open=True), RUN),
    Key("pbt_perturb", (0.8, 1.25), "PBT: a clone's hyperparameters are each multiplied by one of these factors, "
        "drawn", Factors(), RUN),
    Key("pbt_metric", "episode_return", "PBT: what ranks members: episode_return (training) or eval_return "
        "(needs eval_every_updates)", Choice(("episode_return", "eval_return")), RUN),
    Key("pbt_keys", (), "PBT: the hyperparameters a clone's perturbation changes; empty = the swept numeric keys",
        Names(PERTURBABLE), RUN),
)

# Every configuration key, in the order the reference and `--help` list them.
KEYS: dict[str, Key] = {key.name: key for key in (*TRAINER_KEYS, *RUN_KEYS) if key.config}
# Keys a resumed run may change: nothing that alters shapes, the program or the RNG stream.
RESUMABLE_KEYS = frozenset(name for name, key in KEYS.items() if key.can_resume_with_change)
# The keys that shape a population: they mean nothing to a run without a sweep.
POPULATION_KEYS = tuple(name for name in KEYS if name.startswith(("sweep", "pbt_")))
# The allowed values of every integer key (and of hidden_sizes' widths).
INT_RANGES: dict[str, IntRange] = {
    name: key.rule if isinstance(key.rule, IntRange) else IntRange(key.rule.low, key.rule.high)
    for name, key in KEYS.items()
    if isinstance(key.rule, IntRange) or name == "hidden_sizes"
}


class _RunConfigMethods:
    @property
    def steps_per_update(self) -> int:
        return self.num_envs * self.num_steps

    @property
    def total_updates(self) -> int:
        return max(1, self.total_timesteps // self.steps_per_update)

    def static_config(self) -> StaticConfig:
        from rltui.config.sweep import plan_sweep

        values = {k.attr: getattr(self, k.name) for k in KEYS.values() if k.kind == STATIC}
        env_id = env_id_with_kwargs(self.env, self.env_kwargs)
        sweep = plan_sweep(self)
        members = len(sweep.members) if sweep is not None else 1
        return StaticConfig(
            **{**values, "env_id": env_id, "hidden_sizes": tuple(self.hidden_sizes), "num_members": members}
        )

    def dynamic_hparams(self) -> DynamicHParams:
        values = {k.attr: k.rule.to_trainer(getattr(self, k.name)) for k in KEYS.values() if k.kind == TRACED}
        return DynamicHParams.create(**values, anneal_updates=float(self.total_updates))

    def to_toml_dict(self) -> dict[str, Any]:
        # TOML has no null: an unset optional key is left out, which reads back as unset.
        out = {name: value for name, value in dataclasses.asdict(self).items() if value is not None}
        out["hidden_sizes"] = list(self.hidden_sizes)
        out["pbt_perturb"] = list(self.pbt_perturb)
        return out


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
_FIELDS = KEYS


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


def check_integer(name: str, value: int, allowed: IntRange) -> int:
    """`value` if it lies in `allowed`, else ConfigError naming `name` (a key or a flag)."""
    if value not in allowed:
        raise ConfigError(f"{name}: expected {allowed.describe()}, got {quote(value)}")
    return value


def int_range(key: str) -> IntRange:
    return INT_RANGES[key]


def coerce_value(key: str, value: Any) -> Any:
    """`value` (from TOML or `--set`) as key `key` holds it, or ConfigError."""
    try:
        return KEYS[known_key(key, value)].coerce(value)
    except HParamError as err:
        raise ConfigError(str(err)) from None


class TableEntries(dict):
    """Entries of a table key, set one at a time: they merge over the lower sources' table."""


def known_key(key: str, value: Any) -> str:
    """`key` if it is a configuration key, else ConfigError naming it (`value`, a table,
    gets a message of its own)."""
    if key not in KEYS:
        if isinstance(value, dict):
            raise ConfigError(f"{_show_key(key)}: tables are not supported; keys are flat (e.g. lr = 3e-4)")
        close = closest(key, KEYS)
        if close:
            raise ConfigError(f"{_show_key(key)}: unknown key; did you mean {close}? (`rltui launch --help` "
                              "lists every key)")
        raise ConfigError(f"{_show_key(key)}: unknown key; known keys: {', '.join(KEYS)}")
    return key


def _show_key(key: str) -> str:
    """An unknown key as a message names it: bare when short and printable, else quoted."""
    return key if key.isprintable() and len(key) <= QUOTE_LIMIT else quote(key)


# Built-in defaults that differ by algorithm (below any file or --set value). REINFORCE makes
# one gradient step per long rollout, and its gradient norm (~100-170, mostly the value
# regression on raw returns) would be clipped on every step by PPO's max_grad_norm of 0.5.
ALGO_DEFAULTS: dict[str, dict[str, Any]] = {
    "reinforce": {"num_envs": 8, "num_steps": 512, "lr": 5e-3, "max_grad_norm": 100.0, "total_timesteps": 614_400},
}


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
    algo_defaults = ALGO_DEFAULTS.get(algo, {})
    if use_preset:
        from rltui.config import presets
        tuned = {
            key: coerce_value(key, value)
            for key, value in presets.settings(algo, merged.get("env", KEYS["env"].default)).items()
        }
        algo_defaults = {**algo_defaults, **tuned}
    config = RunConfig(**{**algo_defaults, **merged})
    for limit in DERIVED_LIMITS:
        if limit.value(config) > limit.high:
            raise ConfigError(f"{limit.key}: {limit.what} must be at most {limit.high}, got {limit.value(config)}")
    from trainers.suites import suite_of

    outside = is_import_path(config.env) or suite_of(config.env) is not None  # not one of gymnax's
    if config.env_kwargs and not outside:
        raise ConfigError(
            f"env_kwargs: only an env given by import path or another suite's id takes arguments; "
            f"{config.env} is built in"
        )
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
    from rltui.config.sweep import plan_sweep

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
    if config.pbt_metric == "eval_return" and not config.eval_every_updates:
        raise ConfigError("pbt_metric: eval_return needs evaluation; set eval_every_updates > 0")
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
            from rltui.config.toml_text import show_setting

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
    """The batch splits evenly over `num_devices` devices and the minibatches; ConfigError
    naming the key otherwise (the rules: `trainers.hparams.batch_split_problem`)."""
    problem = batch_split_problem(
        algo=config.algo, network=config.network, num_envs=config.num_envs, num_steps=config.num_steps,
        num_minibatches=config.num_minibatches, num_devices=num_devices,
    )
    if problem is not None:
        key, reason = problem
        raise ConfigError(f"{key}: {reason}")
