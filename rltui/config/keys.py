"""The configuration's key table, alone at the bottom of `rltui.config`: every key a run
is launched with (`KEYS`: the trainer's, `trainers.hparams.TRAINER_KEYS`, and the run's,
`RUN_KEYS` below), each value checked against its key (`coerce_value`), and each key's
built-in default for an algorithm (`defaults`). Every bad value raises `ConfigError` with
one line naming the field and what is allowed.

It imports nothing of `rltui.config` but the rules of the population's keys
(`sweep_spec`); `build` (the configuration of a run), `toml_text`, `sweep` and `presets`
read it. No JAX import here: validation runs before anything starts.
"""

from __future__ import annotations

from typing import Any

from rltui.config.logger_kinds import NAMES as LOGGER_NAMES
from rltui.config.sweep_spec import MAX_AGENTS, PERTURBABLE, Factors, SweepTable
from rltui.errors import UsageError
from trainers.algorithms import ALGORITHMS
from trainers.hparams import TRAINER_KEYS
from trainers.keys import (
    INT32_MAX,
    INT64_MAX,
    RUN,
    UINT32_MAX,
    Choice,
    HParamError,
    IntRange,
    Key,
    Names,
    Number,
    Table,
)
from trainers.metrics_spec import METRIC_SPECS, RANKING_METRICS
from trainers.quoting import QUOTE_LIMIT, closest, quote


class ConfigError(UsageError):
    """Bad configuration; the message is one line naming the field and what is allowed."""


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
        "tensorboard (event files in RUN_DIR, a run by its name in tensorboard --logdir runs/), wandb (Weights "
        "& Biases; its WANDB_* variables apply)",
        Names(LOGGER_NAMES), RUN),
    # A population (rltui.config.sweep): the sweep decides the members and their values, so
    # a resumed run keeps it; PBT's settings only steer what happens between chunks.
    Key("sweep", {}, "train a population: a table from traced keys to a list of values or a distribution "
        "(see docs/populations.md); members x num_seeds agents train in one program; empty = one member",
        SweepTable(lambda: KEYS), RUN, resumable=False),
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
    Key("pbt_metric", RANKING_METRICS[0], "PBT: what ranks members: " + " or ".join(
        f"{name} ({'needs eval_every_updates' if METRIC_SPECS[name].source == 'evaluation' else 'training'})"
        for name in RANKING_METRICS), Choice(RANKING_METRICS), RUN),
    Key("pbt_keys", (), "PBT: the hyperparameters a clone's perturbation changes; empty = the swept numeric keys",
        Names(PERTURBABLE), RUN),
)

# Every configuration key, in the order the reference and `--help` list them.
KEYS: dict[str, Key] = {key.name: key for key in (*TRAINER_KEYS, *RUN_KEYS) if key.config}
# Keys a resumed run may change: nothing that alters shapes, the program or the RNG stream.
RESUMABLE_KEYS = frozenset(name for name, key in KEYS.items() if key.can_resume_with_change)
# The keys that shape a population: they mean nothing to a run without a sweep.
POPULATION_KEYS = tuple(name for name in KEYS if name.startswith(("sweep", "pbt_")))
# The allowed values of every integer key (and of each item of a list of integers).
INT_RANGES: dict[str, IntRange] = {
    name: key.rule.integer_range() for name, key in KEYS.items() if key.rule.integer_range() is not None
}


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


def defaults(algo: str) -> dict[str, Any]:
    """Every key's built-in value for a run of `algo`: the key's own default, or the
    algorithm's where it declares one (`Algorithm.defaults`; below a preset, a file and
    `--set`)."""
    return {**{name: key.default for name, key in KEYS.items()}, **ALGORITHMS[algo].defaults}
