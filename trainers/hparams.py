"""The trainer's keys, declared once (`TRAINER_KEYS`: the shared ones here, each algorithm's
own in its package, `trainers.algorithms`), and the two types derived from them:
`StaticConfig` (shapes and program, compiled in) and `DynamicHParams` (traced float32
scalars, changed without recompiling).

This module is plain Python and NumPy so that validation can run before JAX starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from trainers.algorithms import ALGORITHMS, DEFAULT_ALGORITHM
from trainers.algorithms.algorithm import placed, shared_by
from trainers.env_import import is_import_path, is_object_id
from trainers.envs import SUPPORTED_ENVS
from trainers.keys import (
    INT32_MAX,
    STATIC,
    TRACED,
    Choice,
    HParamError,
    IntRange,
    Key,
    Number,
    Rule,
    Switch,
    TrainerSwitch,
    Widths,
    static_config_type,
    traced_fields_type,
)
from trainers.quoting import QUOTE_LIMIT, closest, quote, shorten

__all__ = [
    "ACTIVATIONS", "ALGO_HPARAMS", "EDITABLE_HPARAMS", "LIVE_HPARAMS", "LOG_STD_MODES", "NETWORKS",
    "PRECISIONS", "QUOTE_LIMIT", "SHARED_KEYS", "TRAINER_KEYS", "DynamicHParams", "HParamError",
    "StaticConfig", "batch_split_problem", "check_changes", "hparam_rule", "quote", "shorten", "show_hparam",
    "validate_hparam",
]

ACTIVATIONS = ("tanh", "relu")
PRECISIONS = ("fp32", "bf16")
NETWORKS = ("mlp", "gru", "cnn")
LOG_STD_MODES = ("param", "state")


class EnvId(Rule):
    """An environment `trainers.envs.make_env` can build: a built-in id, or an import path
    (imported later, by the commands that must)."""

    def describe(self) -> str:
        return ("an environment id (`rltui envs` lists them; another suite's with its prefix, "
                "`navix:Navix-Empty-5x5-v0`) or an import path (`my_pkg.envs:make_env`)")

    def coerce(self, name: str, value: Any) -> str:
        if not isinstance(value, str):
            raise HParamError(f"{name}: expected a string, got {quote(value)}")
        from trainers.suites import suite_of

        if (value not in SUPPORTED_ENVS and not is_import_path(value) and not is_object_id(value)
                and suite_of(value) is None):
            by_lower = {env.lower(): env for env in SUPPORTED_ENVS}
            close = closest(value.lower(), by_lower, cutoff=0.5)
            hint = f"did you mean {by_lower[close]!r}? " if close else ""
            raise HParamError(
                f"{name}: unknown environment {quote(value)}; {hint}run `rltui envs` to list the supported ones"
            )
        return value


_COUNT = IntRange(1, INT32_MAX)

# The keys every algorithm reads. With each algorithm's own placed among them
# (`TRAINER_KEYS`), their order is the order of the configuration reference, the editor and
# the DynamicHParams fields.
SHARED_KEYS: tuple[Key, ...] = (
    # --- compiled in: shapes and the program --------------------------------------------
    Key("env", "CartPole-v1", "the environment to train on: a built-in id, or `module:attr` for your own "
        "(see docs/environments.md)", EnvId(), STATIC, field="env_id"),
    Key("algo", DEFAULT_ALGORITHM, "training algorithm: " + ", ".join(ALGORITHMS), Choice(tuple(ALGORITHMS)),
        STATIC),
    Key("num_envs", 4, "parallel environments (split evenly across devices)", _COUNT, STATIC),
    Key("num_steps", 128, "steps per environment in each rollout", _COUNT, STATIC),
    Key("num_minibatches", 4, "minibatches per epoch; must divide num_steps (gru: num_envs per device)", _COUNT,
        STATIC),
    Key("update_epochs", 4, "passes over each rollout", _COUNT, STATIC),
    Key("hidden_sizes", (64, 64), "hidden layer widths of the policy and value MLPs", Widths(), STATIC),
    Key("activation", "tanh", "hidden activation: " + ", ".join(ACTIVATIONS), Choice(ACTIVATIONS), STATIC),
    Key("precision", "fp32", "network arithmetic: fp32, or bf16 (bfloat16 matmuls; float32 params, optimizer and "
        "losses)", Choice(PRECISIONS), STATIC),
    Key("num_seeds", 1, "independent agents trained at once (seed, seed+1, ...), vmapped in one program", _COUNT,
        STATIC),
    # A population's size, from the sweep (rltui.config.sweep): members x num_seeds agents
    # share one program, each member with its own traced hyperparameters.
    Key("num_members", 1, "population members trained at once, each with its own hyperparameters", _COUNT, STATIC,
        config=False),
    Key("network", "mlp", "policy network: mlp, gru (a GRU core whose hidden state is carried per environment "
        "through rollouts and updates), or cnn (a 3x3 convolution before the MLP, for MinAtar's image "
        "observations)", Choice(NETWORKS), STATIC),
    Key("log_std", "param", "continuous actions: param (a learned std per action dimension) or state (the policy "
        "outputs a std for each state)", Choice(LOG_STD_MODES), STATIC, actions="continuous"),
    Key("log_std_init", 0.0, "continuous actions: initial log standard deviation of the policy",
        Number(-5.0, 2.0), STATIC, actions="continuous"),
    Key("noise_hold", 1, "keep each env's exploration noise for N steps of a rollout (temporally correlated "
        "exploration); 1 = fresh noise every step", _COUNT, STATIC),
    Key("normalize_obs", False, "standardise observations by their running mean and std (kept in checkpoints)",
        Switch(), STATIC),
    Key("normalize_rewards", False, "divide rewards by the running std of the discounted return (kept in "
        "checkpoints)", Switch(), STATIC),
    # The capacity of the per-chunk metrics buffer: a chunk's update count is traced up to
    # this bound, so the session sizes chunks without recompiling.
    Key("max_chunk_updates", 512, "updates a chunk may hold", _COUNT, STATIC, config=False),
    # --- traced: float32 arguments of the compiled step ----------------------------------
    Key("lr", 2.5e-4, "Adam learning rate (start value when annealed)", Number(0, low_open=True, float32=True),
        TRACED, live=True),
    Key("gamma", 0.99, "discount factor", Number(0, 1, low_open=True, float32=True), TRACED, live=True),
    Key("ent_coef", 0.01, "entropy bonus coefficient", Number(0, float32=True), TRACED, live=True),
    Key("vf_coef", 0.5, "value loss coefficient", Number(0, float32=True), TRACED, live=True),
    Key("max_grad_norm", 0.5, "global gradient norm clip", Number(0, low_open=True, float32=True), TRACED,
        live=True),
    Key("anneal_lr", True, "decay the learning rate linearly to 0 over the run", Switch(), TRACED),
    # The update count the annealing runs over, from total_timesteps.
    Key("anneal_updates", 1.0, "updates the learning rate anneals over", Number(1, float32=True), TRACED,
        config=False),
    Key("reward_scale", 1.0, "multiply rewards by this for learning (after normalize_rewards); reported returns "
        "stay unscaled", Number(0, low_open=True, float32=True), TRACED, live=True),
)
# Every key the trainer reads.
TRAINER_KEYS: tuple[Key, ...] = placed(
    shared_by(SHARED_KEYS, ALGORITHMS.values(), "unused_keys"), (key for a in ALGORITHMS.values() for key in a.keys)
)
_BY_NAME = {key.attr: key for key in TRAINER_KEYS}

# The live-editable hyperparameters each algorithm reads, in display order.
ALGO_HPARAMS = {
    algo: tuple(k.name for k in TRAINER_KEYS if k.live and k.reads(algo)) for algo in ALGORITHMS
}
EDITABLE_HPARAMS = ALGO_HPARAMS[DEFAULT_ALGORITHM]
# Everything a live edit may change, whatever the algorithm.
LIVE_HPARAMS = tuple(k.name for k in TRAINER_KEYS if k.live)


class _StaticMethods:
    @property
    def steps_per_update(self) -> int:
        return self.num_envs * self.num_steps

    @property
    def recurrent(self) -> bool:
        return self.network == "gru"

    @property
    def num_agents(self) -> int:
        """Agents trained at once: each member's seeds, member-major (agent = member * num_seeds + seed)."""
        return self.num_members * self.num_seeds


StaticConfig = static_config_type(TRAINER_KEYS, _StaticMethods)
StaticConfig.__doc__ = "Everything that changes a shape or the traced program: changing it recompiles."


class DynamicHParams(traced_fields_type(TRAINER_KEYS)):
    """Hyperparameters passed to the jitted step as float32 scalars, one per traced key.

    A NamedTuple is a pytree without importing JAX. Every leaf is a float32 NumPy scalar:
    a Python float or a float64 would change the traced dtype and recompile. Switches are
    1.0 (on) or 0.0 (off).
    """

    __slots__ = ()

    @classmethod
    def create(cls, **values: float) -> DynamicHParams:
        for name, value in values.items():
            if name not in cls._fields:
                raise KeyError(f"unknown hyperparameter {quote(name)}")
            validate_hparam(name, value)
        return cls()._replace(**{k: np.float32(v) for k, v in values.items()})

    def with_updates(self, changes: Mapping[str, float]) -> DynamicHParams:
        """A copy with the live `changes` applied (checked by `check_changes`); static or
        unknown keys are rejected. Each value keeps its leaf's dtype."""
        try:
            checked = check_changes(changes)
        except HParamError as err:
            if any(name not in LIVE_HPARAMS for name in changes):
                raise KeyError(str(err)) from None
            raise
        cast = {k: np.asarray(v, dtype=np.asarray(getattr(self, k)).dtype)[()] for k, v in checked.items()}
        return self._replace(**cast)

    def as_floats(self) -> dict[str, float]:
        # str() of a float32 is its shortest round-tripping decimal: 0.2, not 0.20000000298
        return {k: float(str(v)) for k, v in self._asdict().items()}


def annealed_rate(lr: Any, anneal_lr: Any, anneal_updates: Any, index: Any, xp: Any = np) -> Any:
    """The learning rate of the update with 0-based `index`: `lr`, decayed linearly to zero
    over `anneal_updates` when `anneal_lr` is on. `xp` is the array module: jax.numpy inside
    the compiled step, NumPy on the host (what a resume says of the schedule), so that both
    compute the rate with this one formula."""
    fraction = xp.clip(1.0 - index / xp.maximum(anneal_updates, 1.0), 0.0, 1.0)
    return lr * xp.where(anneal_lr > 0, fraction, 1.0)


def _trainer_rule(key: Key) -> Rule:
    # A traced switch is a bool in the configuration and 0.0/1.0 in the trainer.
    return TrainerSwitch() if isinstance(key.rule, Switch) else key.rule


def show_hparam(name: str, value: float) -> str:
    """A traced hyperparameter's value as messages write it: a switch true or false (as a
    config file does), a number in six significant figures."""
    key = next((k for k in TRAINER_KEYS if k.attr == name), None)
    if key is not None and isinstance(key.rule, Switch) and value in (0.0, 1.0):
        return "true" if value else "false"
    return f"{value:.6g}"


def hparam_rule(name: str) -> str:
    """What a traced hyperparameter allows, as the trainer (and the editor) takes it."""
    return _trainer_rule(_BY_NAME[name]).describe()


def validate_hparam(name: str, value: object) -> float:
    """`value` as a float, or HParamError saying what `name` allows. The value must also
    hold as the float32 the trainer receives (1e39 is inf there, 1e-50 is 0)."""
    return float(_trainer_rule(_BY_NAME[name]).coerce(name, value))


def check_changes(changes: Mapping[str, object]) -> dict[str, float]:
    """A live edit, checked: every name live-editable and every value allowed; HParamError
    naming the first bad field. The one check every path of an edit goes through."""
    out = {}
    for name, value in changes.items():
        if name not in LIVE_HPARAMS:
            raise HParamError(f"{quote(name)}: not editable while training; editable: {', '.join(LIVE_HPARAMS)}")
        out[name] = validate_hparam(name, value)
    return out


def batch_split_problem(config: Any, num_devices: int = 1) -> tuple[str, str] | None:
    """How the batch of `config` (a StaticConfig or a run configuration) fails to split over
    `num_devices` devices and its algorithm's minibatches, as (key, reason), or None. The one
    statement of these rules: the configuration checks them before anything starts and the
    trainer before it compiles."""
    if config.num_envs % num_devices:
        return "num_envs", (
            f"{config.num_envs} environments cannot be split evenly over {num_devices} devices; "
            f"use a multiple of {num_devices}, or set devices to a count that divides {config.num_envs}"
        )
    return ALGORITHMS[config.algo].batch_problem(config, num_devices)
