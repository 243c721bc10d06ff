"""Static configuration (shapes, compiled in) versus dynamic hyperparameters (traced).

This module is plain Python and NumPy so that validation can run before JAX starts.
"""

from __future__ import annotations

import dataclasses
import math
import reprlib
import sys
from typing import Any, Mapping, NamedTuple

import numpy as np

ACTIVATIONS = ("tanh", "relu")
ALGOS = ("ppo", "reinforce")
# Metrics an algorithm has no such quantity for: reported as NaN in every update.
UNDEFINED_METRICS = {"reinforce": ("clip_frac",)}
PRECISIONS = ("fp32", "bf16")
NETWORKS = ("mlp", "gru", "cnn")
LOG_STD_MODES = ("param", "state")


@dataclasses.dataclass(frozen=True)
class StaticConfig:
    """Everything that changes a shape or the traced program: changing it recompiles."""

    env_id: str = "CartPole-v1"
    algo: str = "ppo"
    num_envs: int = 4
    num_steps: int = 128
    num_minibatches: int = 4
    update_epochs: int = 4
    hidden_sizes: tuple[int, ...] = (64, 64)
    activation: str = "tanh"
    # "bf16": network matmuls in bfloat16; params, optimizer state and losses stay float32.
    precision: str = "fp32"
    # Independent agents trained at once, vmapped over a seed axis inside the device map.
    num_seeds: int = 1
    # "mlp": feed-forward actor-critic. "gru": a GRU core whose hidden state is carried per
    # environment through rollouts and updates (trainers/recurrent.py). "cnn": a convolution
    # over image observations (MinAtar's 10x10xC), then the MLP towers.
    network: str = "mlp"
    # Continuous actions: "param", a learned log standard deviation per action dimension
    # (state-independent); "state", a standard deviation the policy head outputs per state.
    log_std: str = "param"
    log_std_init: float = 0.0  # the initial log standard deviation
    # Keep each env's exploration noise for this many steps (1: fresh noise every step).
    noise_hold: int = 1
    # Running mean/std normalisation of observations, and of rewards by the running standard
    # deviation of the discounted return; the statistics are part of the training state.
    normalize_obs: bool = False
    normalize_rewards: bool = False
    # Capacity of the per-chunk metrics buffer. The number of updates a chunk runs is a
    # traced argument up to this bound, so the session can size chunks without recompiling.
    max_chunk_updates: int = 512

    @property
    def steps_per_update(self) -> int:
        return self.num_envs * self.num_steps

    @property
    def recurrent(self) -> bool:
        return self.network == "gru"


class DynamicHParams(NamedTuple):
    """Hyperparameters passed to the jitted step as float32 scalars.

    A NamedTuple is a pytree without importing JAX. Every leaf is a float32 NumPy scalar:
    a Python float or a float64 would change the traced dtype and recompile.
    """

    lr: np.float32 = np.float32(2.5e-4)
    gamma: np.float32 = np.float32(0.99)
    gae_lambda: np.float32 = np.float32(0.95)
    clip_eps: np.float32 = np.float32(0.2)
    ent_coef: np.float32 = np.float32(0.01)
    vf_coef: np.float32 = np.float32(0.5)
    max_grad_norm: np.float32 = np.float32(0.5)
    # 1.0 anneals lr linearly to zero over `anneal_updates` updates, 0.0 keeps it constant.
    anneal_lr: np.float32 = np.float32(1.0)
    anneal_updates: np.float32 = np.float32(1.0)
    # REINFORCE switches, 1.0 on / 0.0 off: a learned value baseline, and normalising the
    # returns (advantages, with the baseline) over the batch. Ignored by PPO.
    baseline: np.float32 = np.float32(1.0)
    normalize_returns: np.float32 = np.float32(1.0)
    # Rewards are multiplied by this before the advantage and value targets are computed
    # (after `normalize_rewards`, when on); episode returns are reported unscaled.
    reward_scale: np.float32 = np.float32(1.0)

    @classmethod
    def create(cls, **values: float) -> "DynamicHParams":
        for name, value in values.items():
            if name not in cls._fields:
                raise KeyError(f"unknown hyperparameter {quote(name)}")
            validate_hparam(name, value)
        return cls()._replace(**{k: np.float32(v) for k, v in values.items()})

    def with_updates(self, changes: Mapping[str, float]) -> "DynamicHParams":
        """Return a copy with `changes` applied; static or unknown keys are rejected."""
        for name, value in changes.items():
            if name not in LIVE_HPARAMS:
                raise KeyError(f"{quote(name)} is not a live-editable hyperparameter")
            validate_hparam(name, value)
        cast = {k: np.asarray(v, dtype=np.asarray(getattr(self, k)).dtype)[()] for k, v in changes.items()}
        return self._replace(**cast)

    def as_floats(self) -> dict[str, float]:
        # str() of a float32 is its shortest round-tripping decimal: 0.2, not 0.20000000298
        return {k: float(str(v)) for k, v in self._asdict().items()}


# name -> (predicate, description of what is allowed)
_HPARAM_RULES = {
    "lr": (lambda v: v > 0, "a number > 0"),
    "gamma": (lambda v: 0 < v <= 1, "a number in (0, 1]"),
    "gae_lambda": (lambda v: 0 <= v <= 1, "a number in [0, 1]"),
    "clip_eps": (lambda v: v > 0, "a number > 0"),
    "ent_coef": (lambda v: v >= 0, "a number >= 0"),
    "vf_coef": (lambda v: v >= 0, "a number >= 0"),
    "max_grad_norm": (lambda v: v > 0, "a number > 0"),
    "anneal_lr": (lambda v: v in (0, 1), "0 or 1"),
    "anneal_updates": (lambda v: v >= 1, "a number >= 1"),
    "baseline": (lambda v: v in (0, 1), "0 or 1"),
    "normalize_returns": (lambda v: v in (0, 1), "0 or 1"),
    "reward_scale": (lambda v: v > 0, "a number > 0"),
}

EDITABLE_HPARAMS = ("lr", "gamma", "gae_lambda", "clip_eps", "ent_coef", "vf_coef", "max_grad_norm", "reward_scale")
# The live-editable hyperparameters each algorithm reads, in display order.
ALGO_HPARAMS = {
    "ppo": EDITABLE_HPARAMS,
    "reinforce": ("lr", "gamma", "ent_coef", "vf_coef", "max_grad_norm", "baseline", "normalize_returns", "reward_scale"),
}
# Everything `with_updates` accepts, whatever the algorithm.
LIVE_HPARAMS = tuple(dict.fromkeys(name for names in ALGO_HPARAMS.values() for name in names))


class HParamError(ValueError):
    """A hyperparameter value that is not allowed; the message names field and rule."""


def hparam_rule(name: str) -> str:
    return _HPARAM_RULES[name][1]


def validate_hparam(name: str, value: object) -> float:
    """Return `value` as a float, or raise HParamError saying what is allowed. The value must
    also hold as the float32 the trainer receives (1e39 is inf there, 1e-50 is 0)."""
    ok, allowed = _HPARAM_RULES[name]
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise HParamError(f"{name}: expected {allowed}, got {quote(value)}")
    try:
        number = float(value)
    except OverflowError:  # an integer beyond the float range
        number = math.inf
    if not math.isfinite(number):
        raise HParamError(f"{name}: expected {allowed}, got {quote(value)}, which is not a finite number")
    as_float32 = float(np.float32(number)) if abs(number) <= _FLOAT32_MAX else math.inf
    if not math.isfinite(as_float32):
        raise HParamError(f"{name}: expected {allowed}, got {quote(value)}, which is too large for a 32-bit float")
    if not ok(number):
        raise HParamError(f"{name}: expected {allowed}, got {quote(value)}")
    if not ok(as_float32):
        raise HParamError(f"{name}: expected {allowed}, got {quote(value)}, which is {as_float32:g} as a 32-bit float")
    return number


_FLOAT32_MAX = float(np.finfo(np.float32).max)
QUOTE_LIMIT = 80  # characters of a quoted value in an error message


def _quoter() -> reprlib.Repr:
    r = reprlib.Repr()
    # Depth and width bounds keep nested values short before the final cut.
    r.maxlevel, r.maxlist, r.maxtuple, r.maxdict, r.maxset = 3, 6, 6, 4, 6
    r.maxstring, r.maxlong, r.maxother = QUOTE_LIMIT, QUOTE_LIMIT, QUOTE_LIMIT
    return r


_QUOTER = _quoter()


def shorten(text: str, limit: int = QUOTE_LIMIT) -> str:
    """`text` cut to about `limit` characters, keeping its start and end."""
    if len(text) <= limit:
        return text
    half = (limit - 3) // 2
    return text[:half] + "..." + text[-half:]


def quote(value: Any) -> str:
    """A user's value as an error message shows it: its repr, shortened to about QUOTE_LIMIT
    characters (a long string says how long it is), whatever its size or depth. Every
    message that quotes a value goes through here, so none can echo megabytes back."""
    try:
        text = shorten(_QUOTER.repr(value))
    except ValueError:  # an int beyond sys.get_int_max_str_digits() has no decimal repr
        return f"an integer of more than {sys.get_int_max_str_digits():,} digits"
    if isinstance(value, (str, bytes)) and len(value) > QUOTE_LIMIT:
        text += f" ({len(value):,} characters)"
    elif isinstance(value, int) and not isinstance(value, bool) and len(text) >= QUOTE_LIMIT:
        text += f" ({len(str(abs(value))):,} digits)"
    return text
