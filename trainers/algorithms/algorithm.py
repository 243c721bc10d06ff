"""What an algorithm declares, in one place: the `Algorithm` record.

An algorithm is a package under `trainers/algorithms/`: its `__init__.py` declares its
`ALGORITHM` (plain Python, so that a configuration is checked before JAX starts), its
`trainer.py` defines `make_trainer(static, num_devices)` (JAX), and a `presets.toml` beside
them, where it has one, holds its tuned settings per environment (read by
`rltui.config.presets`). The registry, `trainers.algorithms.ALGORITHMS`, lists every one;
the trainer's key and metric tables, the `algo` key's choices and the dispatch to a
trainer derive from it.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, TypeVar

from trainers.keys import ACTION_KINDS, Key
from trainers.metric import MetricSpec

# How a batch fails to split into an algorithm's minibatches: (key, reason), or None.
BatchProblem = tuple[str, str] | None


def whole_batch(config: Any) -> int:
    return 1


def any_batch(config: Any, num_devices: int) -> BatchProblem:
    return None


def from_the_policy(config: Any) -> float | None:
    return None


@dataclasses.dataclass(frozen=True, eq=False)
class Algorithm:
    """One algorithm. `keys`: the keys only it reads, and `metrics`: the metrics only it
    reports (each marked as its own here: `Key.algos`, `MetricSpec.algos`). `unused_keys` and
    `unused_metrics`: the shared keys it does not read and the shared metrics it has no such
    quantity for (NaN in every update). `actions`: the action spaces it trains on.
    `defaults`: its built-in values for shared keys (trainer or run keys), below an
    environment's preset, a file and `--set`. `minibatches(config)`: the gradient steps one epoch splits a rollout's
    batch into (the rows of one step are the batch over this). `batch_problem(config,
    num_devices)`: how a batch fails its minibatch rule, checked with the split over
    devices (`trainers.hparams.batch_split_problem`). `sample_epsilon(config)`: outside
    training (`rltui eval --sample`, an exported policy), a sampled action of a network whose
    outputs are action values is epsilon-greedy at this rate; None: it is sampled from the
    policy's distribution. `config` is a `StaticConfig` or a run configuration: anything with
    the keys as attributes."""

    name: str
    package: str  # `__name__` of its package: where its trainer and presets are
    keys: tuple[Key, ...] = ()
    defaults: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    metrics: tuple[MetricSpec, ...] = ()
    unused_keys: tuple[str, ...] = ()
    unused_metrics: tuple[str, ...] = ()
    actions: tuple[str, ...] = ACTION_KINDS
    minibatches: Callable[[Any], int] = whole_batch
    batch_problem: Callable[[Any, int], BatchProblem] = any_batch
    sample_epsilon: Callable[[Any], float | None] = from_the_policy
    # Continuous actions squashed into the env's Box bounds (tanh, scaled): they must be finite.
    squashes_actions: bool = False
    # Its `q_mean` estimates discounted sums of rewards alone, so |Q| <= max |reward| / (1 -
    # gamma): a value far beyond that is a critic diverging while still finite. (SAC's soft
    # values add the entropy bonus: no such bound from the rewards.)
    values_bounded_by_rewards: bool = False

    def __post_init__(self):
        own = (self.name,)
        object.__setattr__(self, "keys", tuple(dataclasses.replace(key, algos=own) for key in self.keys))
        object.__setattr__(self, "metrics", tuple(dataclasses.replace(spec, algos=own) for spec in self.metrics))
        object.__setattr__(self, "defaults", MappingProxyType(dict(self.defaults)))

    def takes(self, actions: str) -> bool:
        return actions in self.actions

    @property
    def trainer_module(self) -> str:
        return f"{self.package}.trainer"

    def make_trainer(self, static: Any, num_devices: int = 1) -> Any:
        """The trainer for `static` split over `num_devices` (a `base.OnPolicyTrainer`)."""
        # Imported by name, when a trainer is made: the trainer imports JAX and the shared
        # trainer code, which itself reads the declarations this record is part of.
        return importlib.import_module(self.trainer_module).make_trainer(static, num_devices)


Declared = TypeVar("Declared", Key, MetricSpec)


def shared_by(shared: Iterable[Declared], algorithms: Iterable[Algorithm], unused: str) -> tuple[Declared, ...]:
    """`shared` with `algos` filled in where some algorithm does not use one (`unused` names
    the field listing those: `unused_keys` or `unused_metrics`): the algorithms that do."""
    algorithms = tuple(algorithms)
    names = {item.name for item in shared}
    for algorithm in algorithms:
        for name in getattr(algorithm, unused):
            if name not in names:
                raise ValueError(f"{algorithm.name}: {unused} names {name!r}, which is not a shared declaration")
    table = []
    for item in shared:
        users = tuple(a.name for a in algorithms if item.name not in getattr(a, unused))
        table.append(item if len(users) == len(algorithms) else dataclasses.replace(item, algos=users))
    return tuple(table)


def placed(shared: Iterable[Declared], additions: Iterable[Declared]) -> tuple[Declared, ...]:
    """`shared` with each of `additions` (algorithms' keys or metrics) inserted after the one
    its `after` names, in turn, or at the end where it names none."""
    table = list(shared)
    for item in additions:
        names = [declared.name for declared in table]
        if item.name in names:
            table[names.index(item.name)] = _merged(table[names.index(item.name)], item)
            continue
        if item.after is not None and item.after not in names:
            raise ValueError(f"{item.name}: placed after {item.after!r}, which is not declared before it")
        table.insert(names.index(item.after) + 1 if item.after is not None else len(table), item)
    return tuple(table)


def _merged(placed_item: Declared, item: Declared) -> Declared:
    """One declaration listed by several algorithms, read by all of them; a different
    declaration of a name already placed is refused."""
    same = dataclasses.replace(placed_item, algos=None) == dataclasses.replace(item, algos=None)
    if not same or placed_item.algos is None or item.algos is None:
        raise ValueError(f"{item.name}: declared twice (a name is declared once, shared or by one algorithm)")
    return dataclasses.replace(placed_item, algos=placed_item.algos + item.algos)
