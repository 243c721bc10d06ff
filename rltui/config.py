"""Run configuration: built-in defaults < TOML file < `--set key=value`, into a frozen dataclass.

Keys are flat and identical in TOML and `--set`. Every bad value raises `ConfigError` with
one line naming the field and what is allowed. No JAX import here: validation runs before
anything starts.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
from pathlib import Path
from typing import Any, Callable, Mapping, NamedTuple

from trainers.envs import MINATAR, SUPPORTED_ENVS
from trainers.hparams import (
    ACTIVATIONS,
    ALGOS,
    LOG_STD_MODES,
    NETWORKS,
    PRECISIONS,
    QUOTE_LIMIT,
    DynamicHParams,
    HParamError,
    StaticConfig,
    quote,
    validate_hparam,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


class ConfigError(ValueError):
    """Bad user input; the message is one line naming the field and what is allowed."""


_STATIC = StaticConfig()
IMAGE_ENVS = MINATAR  # (10, 10, channels) observations
_HPARAMS = DynamicHParams().as_floats()


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """Everything a run is launched with. Trainer defaults come from the trainer's own
    StaticConfig and DynamicHParams, so they are defined once."""

    env: str = _STATIC.env_id
    algo: str = _STATIC.algo
    seed: int = 0
    total_timesteps: int = 500_000
    num_envs: int = _STATIC.num_envs
    num_steps: int = _STATIC.num_steps
    num_minibatches: int = _STATIC.num_minibatches
    update_epochs: int = _STATIC.update_epochs
    hidden_sizes: tuple[int, ...] = _STATIC.hidden_sizes
    activation: str = _STATIC.activation
    precision: str = _STATIC.precision
    num_seeds: int = _STATIC.num_seeds
    network: str = _STATIC.network
    log_std: str = _STATIC.log_std
    log_std_init: float = _STATIC.log_std_init
    noise_hold: int = _STATIC.noise_hold
    normalize_obs: bool = _STATIC.normalize_obs
    normalize_rewards: bool = _STATIC.normalize_rewards
    reward_scale: float = _HPARAMS["reward_scale"]
    lr: float = _HPARAMS["lr"]
    anneal_lr: bool = _HPARAMS["anneal_lr"] > 0
    gamma: float = _HPARAMS["gamma"]
    gae_lambda: float = _HPARAMS["gae_lambda"]
    clip_eps: float = _HPARAMS["clip_eps"]
    ent_coef: float = _HPARAMS["ent_coef"]
    vf_coef: float = _HPARAMS["vf_coef"]
    max_grad_norm: float = _HPARAMS["max_grad_norm"]
    baseline: bool = _HPARAMS["baseline"] > 0
    normalize_returns: bool = _HPARAMS["normalize_returns"] > 0
    devices: int = 0
    cpu_threads: int = 0
    chunk_seconds: float = 0.3
    checkpoint_every_updates: int = 0
    checkpoint_minutes: float = 10.0
    keep_checkpoints: int = 3

    @property
    def steps_per_update(self) -> int:
        return self.num_envs * self.num_steps

    @property
    def total_updates(self) -> int:
        return max(1, self.total_timesteps // self.steps_per_update)

    def static_config(self) -> StaticConfig:
        # Every StaticConfig field has a key of the same name here, except the env id and
        # the trainer's own metrics buffer size.
        shared = {f.name: getattr(self, f.name) for f in dataclasses.fields(StaticConfig) if f.name in _FIELDS}
        return StaticConfig(env_id=self.env, **{**shared, "hidden_sizes": tuple(self.hidden_sizes)})

    def dynamic_hparams(self) -> DynamicHParams:
        return DynamicHParams.create(
            lr=self.lr,
            gamma=self.gamma,
            gae_lambda=self.gae_lambda,
            clip_eps=self.clip_eps,
            ent_coef=self.ent_coef,
            vf_coef=self.vf_coef,
            max_grad_norm=self.max_grad_norm,
            baseline=1.0 if self.baseline else 0.0,
            normalize_returns=1.0 if self.normalize_returns else 0.0,
            reward_scale=self.reward_scale,
            anneal_lr=1.0 if self.anneal_lr else 0.0,
            anneal_updates=float(self.total_updates),
        )

    def to_toml_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["hidden_sizes"] = list(self.hidden_sizes)
        return out


@dataclasses.dataclass(frozen=True)
class KeyInfo:
    meaning: str
    dynamic: bool = False  # editable while training runs


# Documentation of every key; README's config reference is generated from the same text.
KEYS: dict[str, KeyInfo] = {
    "env": KeyInfo("gymnax environment id (`rltui envs` lists them)"),
    "algo": KeyInfo("training algorithm: " + ", ".join(ALGOS)),
    "seed": KeyInfo("random seed: same seed, same machine, same metrics"),
    "total_timesteps": KeyInfo("environment steps to train for (rounded down to whole updates, at least one)"),
    "num_envs": KeyInfo("parallel environments (split evenly across devices)"),
    "num_steps": KeyInfo("steps per environment in each rollout"),
    "num_minibatches": KeyInfo("minibatches per epoch; must divide num_steps (gru: num_envs per device)"),
    "update_epochs": KeyInfo("passes over each rollout"),
    "hidden_sizes": KeyInfo("hidden layer widths of the policy and value MLPs"),
    "activation": KeyInfo("hidden activation: " + ", ".join(ACTIVATIONS)),
    "precision": KeyInfo("network arithmetic: fp32, or bf16 (bfloat16 matmuls; float32 params, optimizer and losses)"),
    "num_seeds": KeyInfo("independent agents trained at once (seed, seed+1, ...), vmapped in one program"),
    "network": KeyInfo("policy network: mlp, gru (recurrent, see Recurrent policies), or cnn (a 3x3 convolution "
                       "before the MLP, for MinAtar's image observations)"),
    "log_std": KeyInfo("continuous actions: param (a learned std per action dimension) or state (the policy "
                       "outputs a std for each state)"),
    "log_std_init": KeyInfo("continuous actions: initial log standard deviation of the policy, in [-5, 2]"),
    "noise_hold": KeyInfo("keep each env's exploration noise for N steps of a rollout (temporally correlated "
                          "exploration); 1 = fresh noise every step"),
    "normalize_obs": KeyInfo("standardise observations by their running mean and std (kept in checkpoints)"),
    "normalize_rewards": KeyInfo("divide rewards by the running std of the discounted return (kept in checkpoints)"),
    "reward_scale": KeyInfo("multiply rewards by this for learning (after normalize_rewards); reported returns "
                            "stay unscaled", dynamic=True),
    "lr": KeyInfo("Adam learning rate (start value when annealed)", dynamic=True),
    "anneal_lr": KeyInfo("decay the learning rate linearly to 0 over the run"),
    "gamma": KeyInfo("discount factor", dynamic=True),
    "gae_lambda": KeyInfo("GAE lambda", dynamic=True),
    "clip_eps": KeyInfo("PPO clip range for the policy ratio and the value", dynamic=True),
    "ent_coef": KeyInfo("entropy bonus coefficient", dynamic=True),
    "vf_coef": KeyInfo("value loss coefficient", dynamic=True),
    "max_grad_norm": KeyInfo("global gradient norm clip", dynamic=True),
    "baseline": KeyInfo("reinforce: subtract a learned value baseline V(s) from the return", dynamic=True),
    "normalize_returns": KeyInfo("reinforce: normalise the returns (advantages) over each batch", dynamic=True),
    "devices": KeyInfo("devices to split environments over; 0 = automatic (all GPUs, or one CPU device); on a CPU-only machine N > 1 splits the CPU into N host devices"),
    "cpu_threads": KeyInfo("XLA's CPU worker threads; 0 = automatic: 1 for an MLP on small minibatches (faster "
                           "there, and leaves the other cores free), otherwise one per CPU"),
    "chunk_seconds": KeyInfo("target wall time of one chunk of updates (latency of pause/edit)"),
    "checkpoint_every_updates": KeyInfo("save a checkpoint every N updates; 0 = only by time"),
    "checkpoint_minutes": KeyInfo("save a checkpoint every M minutes; 0 = only by update count"),
    "keep_checkpoints": KeyInfo("how many recent checkpoints to keep"),
}

# Keys a resumed run may change: nothing that alters shapes, the program or the RNG stream.
RESUMABLE_KEYS = frozenset(
    {"lr", "gamma", "gae_lambda", "clip_eps", "ent_coef", "vf_coef", "max_grad_norm", "baseline",
     "normalize_returns", "reward_scale", "anneal_lr",
     "total_timesteps", "devices", "cpu_threads", "chunk_seconds", "checkpoint_every_updates",
     "checkpoint_minutes", "keep_checkpoints"}
)

_FIELDS = {f.name: f for f in dataclasses.fields(RunConfig)}

INT32_MAX = 2**31 - 1
UINT32_MAX = 2**32 - 1
INT64_MAX = 2**63 - 1


class IntRange(NamedTuple):
    low: int
    high: int

    def __contains__(self, value: object) -> bool:
        return isinstance(value, int) and self.low <= value <= self.high

    def describe(self) -> str:
        return f"an integer in [{self.low}, {self.high}]"


# The allowed values of every integer key (and of hidden_sizes' widths): each fits the type
# it becomes. Counts and sizes reach the trainer as int32; a seed becomes a 32-bit PRNG key,
# where a larger one would wrap around to a smaller seed's stream.
INT_RANGES: dict[str, IntRange] = {
    "seed": IntRange(0, UINT32_MAX),
    "total_timesteps": IntRange(1, INT64_MAX),
    "num_envs": IntRange(1, INT32_MAX),
    "num_steps": IntRange(1, INT32_MAX),
    "num_minibatches": IntRange(1, INT32_MAX),
    "update_epochs": IntRange(1, INT32_MAX),
    "hidden_sizes": IntRange(1, INT32_MAX),
    "num_seeds": IntRange(1, INT32_MAX),
    "noise_hold": IntRange(1, INT32_MAX),
    "devices": IntRange(0, INT32_MAX),
    "cpu_threads": IntRange(0, INT32_MAX),
    "checkpoint_every_updates": IntRange(0, INT32_MAX),
    "keep_checkpoints": IntRange(1, INT32_MAX),
}


class DerivedLimit(NamedTuple):
    """A quantity computed from several keys that must also fit its type; an error names `key`."""

    key: str
    what: str
    value: Callable[["RunConfig"], int]
    high: int


DERIVED_LIMITS = (
    # Batch indices and the update counter are int32 inside the trainer.
    DerivedLimit("num_envs", "num_envs x num_steps (env steps per update)", lambda c: c.steps_per_update, INT32_MAX),
    DerivedLimit("total_timesteps", "the number of updates (total_timesteps / env steps per update)",
                 lambda c: c.total_updates, INT32_MAX),
    # Agent i of a many-seeds run starts from seed + i.
    DerivedLimit("seed", "the last agent's seed (seed + num_seeds - 1)", lambda c: c.seed + c.num_seeds - 1, UINT32_MAX),
)

# The allowed values of the float keys that are not trainer hyperparameters (those follow
# trainers.hparams' rules): predicate, description.
FLOAT_RULES: dict[str, tuple[Callable[[float], bool], str]] = {
    "log_std_init": (lambda v: -5 <= v <= 2, "a number in [-5, 2]"),
    "chunk_seconds": (lambda v: 0.01 <= v <= 60, "a number of seconds in [0.01, 60]"),
    "checkpoint_minutes": (lambda v: math.isfinite(v) and v >= 0, "a number of minutes >= 0"),
}


def _expect(key: str, allowed: str, value: Any) -> ConfigError:
    return ConfigError(f"{key}: expected {allowed}, got {quote(value)}")


def check_integer(name: str, value: int, allowed: IntRange) -> int:
    """`value` if it lies in `allowed`, else ConfigError naming `name` (a key or a flag)."""
    if value not in allowed:
        raise _expect(name, allowed.describe(), value)
    return value


def int_range(key: str) -> IntRange:
    return INT_RANGES[key]


def coerce_value(key: str, value: Any) -> Any:
    """`value` (from TOML or `--set`) as key `key` holds it, or ConfigError."""
    return _coerce(_known_key(key, value), value)


def _coerce(key: str, value: Any) -> Any:
    default = getattr(RunConfig, key) if key != "hidden_sizes" else (64, 64)
    if key == "hidden_sizes":
        allowed = f"a list of positive integers up to {INT_RANGES[key].high}, like [64, 64]"
        if isinstance(value, str):
            value = [v.strip() for v in value.strip("[]() ").split(",") if v.strip()]
            try:
                value = [int(v) for v in value]
            except ValueError:
                raise _expect(key, allowed, value) from None
        if not isinstance(value, (list, tuple)) or not value or not all(
            not isinstance(v, bool) and v in INT_RANGES[key] for v in value
        ):
            raise _expect(key, allowed, value)
        return tuple(value)
    if isinstance(default, bool):
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        if not isinstance(value, bool):
            raise _expect(key, "true or false", value)
        return value
    if isinstance(default, int):
        number = value
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            number = int(value)  # allows 2e6
        if isinstance(number, bool) or not isinstance(number, int):
            raise _expect(key, "an integer", value)
        if number not in INT_RANGES[key]:
            raise _expect(key, INT_RANGES[key].describe(), value)
        return number
    if isinstance(default, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _expect(key, "a number", value)
        if key in DynamicHParams._fields:
            try:
                return validate_hparam(key, value)
            except HParamError as err:
                raise ConfigError(str(err)) from None
        ok, allowed = FLOAT_RULES[key]
        try:
            number = float(value)
        except OverflowError:  # an integer beyond the float range
            raise _expect(key, allowed, value) from None
        if not ok(number):
            raise _expect(key, allowed, value)
        return number
    if not isinstance(value, str):
        raise _expect(key, "a string", value)
    if key == "env" and value not in SUPPORTED_ENVS:
        raise ConfigError(f"env: unknown environment {quote(value)}; run `rltui envs` to list the supported ones")
    if key == "algo" and value not in ALGOS:
        raise _expect(key, "one of " + ", ".join(ALGOS), value)
    if key == "activation" and value not in ACTIVATIONS:
        raise _expect(key, "one of " + ", ".join(ACTIVATIONS), value)
    if key == "precision" and value not in PRECISIONS:
        raise _expect(key, "one of " + ", ".join(PRECISIONS), value)
    if key == "network" and value not in NETWORKS:
        raise _expect(key, "one of " + ", ".join(NETWORKS), value)
    if key == "log_std" and value not in LOG_STD_MODES:
        raise _expect(key, "one of " + ", ".join(LOG_STD_MODES), value)
    return value


def parse_set_value(text: str) -> Any:
    """Read a `--set` value as a TOML value (numbers, booleans, arrays, quoted strings);
    anything that is not valid TOML is taken as a bare string (e.g. Acrobot-v1). A value
    TOML reads as a number or array but Python cannot hold raises ConfigError."""
    try:
        return _parse_toml(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def _parse_toml(text: str) -> dict[str, Any]:
    """tomllib.loads, with the inputs it fails on outside TOMLDecodeError as ConfigError
    (the message lacks the field; callers add it)."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        raise
    except RecursionError:  # the parser recurses once per level of nested arrays
        raise ConfigError("arrays are nested too deeply to read") from None
    except ValueError:  # an integer longer than Python converts from text
        raise ConfigError(
            f"a number has more than {sys.get_int_max_str_digits():,} digits, too many to read"
        ) from None


def parse_overrides(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--set: expected key=value, got {quote(item)}")
        try:
            out[key] = parse_set_value(text.strip())
        except ConfigError as err:
            raise ConfigError(f"{_known_key(key, None)}: {err}") from None
    return out


def load_toml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"--config: no such file: {path}") from None
    except OSError as err:
        raise ConfigError(f"--config: cannot read {path}: {err.strerror}") from None
    except UnicodeDecodeError as err:
        raise ConfigError(
            f"--config: {path} is not UTF-8 text (byte 0x{err.object[err.start]:02x} at offset {err.start}); "
            "TOML files are UTF-8"
        ) from None
    try:
        values = _parse_toml(text)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"--config: {path} is not valid TOML: {err}") from None
    except ConfigError as err:
        raise ConfigError(f"--config: {path} is not readable as TOML: {err}") from None
    try:  # checked here so that an error names the file it is in, not only the key
        for key, value in values.items():
            coerce_value(key, value)
    except ConfigError as err:
        raise ConfigError(f"--config: {path}: {err}") from None
    return values


def _known_key(key: str, value: Any) -> str:
    if key not in _FIELDS:
        if isinstance(value, dict):
            raise ConfigError(f"{_show_key(key)}: tables are not supported; keys are flat (e.g. lr = 3e-4)")
        raise ConfigError(f"{_show_key(key)}: unknown key; known keys: {', '.join(_FIELDS)}")
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
    """Built-in defaults < the algorithm's defaults < the env's tuned preset (unless
    `use_preset` is off) < `file_values` < `overrides`."""
    merged: dict[str, Any] = {}
    for source in (file_values or {}, overrides or {}):
        for key, value in source.items():
            merged[key] = coerce_value(key, value)
    algo = merged.get("algo", RunConfig.algo)
    algo_defaults = ALGO_DEFAULTS.get(algo, {})
    if use_preset:
        from rltui import presets

        tuned = {key: _coerce(key, value) for key, value in presets.preset(algo, merged.get("env", RunConfig.env)).items()}
        algo_defaults = {**algo_defaults, **tuned}
    config = RunConfig(**{**algo_defaults, **merged})
    for limit in DERIVED_LIMITS:
        if limit.value(config) > limit.high:
            raise ConfigError(f"{limit.key}: {limit.what} must be at most {limit.high}, got {limit.value(config)}")
    if config.network == "cnn" and config.env not in IMAGE_ENVS:
        raise ConfigError(
            f"network: cnn needs image observations (the MinAtar envs); {config.env} has flat observations"
        )
    if config.network == "gru" and config.algo == "ppo":
        # Recurrent minibatches hold whole env sequences (the GRU is replayed over time).
        if config.num_envs % config.num_minibatches:
            raise ConfigError(
                f"num_minibatches: with network = \"gru\" must divide num_envs ({config.num_envs}), "
                f"got {config.num_minibatches}"
            )
    elif config.num_steps % config.num_minibatches:
        raise ConfigError(
            f"num_minibatches: must divide num_steps ({config.num_steps}), got {config.num_minibatches}"
        )
    return config


def hparams_as_config(live_hparams: Mapping[str, float]) -> dict[str, Any]:
    """Hyperparameters as the trainer holds them (a checkpoint's "hparams") as config values:
    switches are 0.0/1.0 floats while training, booleans in the config; values that are not
    config keys (anneal_updates, derived from total_timesteps) are left out."""
    return {
        name: bool(value) if isinstance(getattr(RunConfig, name), bool) else value
        for name, value in live_hparams.items()
        if name in KEYS and KEYS[name].dynamic
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
            raise ConfigError(
                f"{key}: cannot change when resuming (the checkpoint was made with {quote(getattr(original, key))}); "
                "start a new run instead"
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


def check_devices(config: RunConfig, num_devices: int) -> None:
    if config.num_envs % num_devices:
        raise ConfigError(
            f"num_envs: {config.num_envs} environments cannot be split evenly over {num_devices} devices; "
            f"use a multiple of {num_devices}, or set devices to a count that divides {config.num_envs}"
        )
    per_device = config.num_envs // num_devices
    if config.network == "gru" and config.algo == "ppo" and per_device % config.num_minibatches:
        raise ConfigError(
            f"num_minibatches: with network = \"gru\" each of {num_devices} devices holds {per_device} environments, "
            f"which {config.num_minibatches} minibatches cannot split evenly; use more num_envs or fewer minibatches"
        )


def dump_toml(config: RunConfig) -> str:
    import tomli_w

    return tomli_w.dumps(config.to_toml_dict())
