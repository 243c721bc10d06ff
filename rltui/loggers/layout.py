"""Where a run's numbers go in TensorBoard and W&B, the same in both.

- Series: each metric under the group its declaration names (`trainers.metric.MetricSpec`):
  `train/episode_return`, `loss/policy_loss`, `eval/eval_return`, `schedule/lr`; with
  several seeds each seed's beside it (`train/episode_return/seed_1`). Numbers a record
  holds that are not metrics (its update, its wall time) are the step and time of every
  point, not series.
- A population: each member is a run of its own (`member_<m>`, its series named as a
  single run's), and the population's run holds the means over its members and, under
  `population/`, the best member's value of each goal metric (`population/best_episode_return`).
- Hyperparameters: the keys the run's algorithm reads (`hparam_keys`), and a member's own
  values of the keys that differ between members, first.
"""

from __future__ import annotations

import json
import math
import types
from collections.abc import Mapping
from typing import Any, NamedTuple

from rltui.config.keys import KEYS, ConfigError
from rltui.runfiles.names import MEMBER_RUN_PREFIX
from rltui.runfiles.reader import MEMBERS, population_shape
from trainers.algorithms import DEFAULT_ALGORITHM
from trainers.keys import RUN, HParamError
from trainers.metrics_spec import METRIC_SPECS

POPULATION_GROUP = "population"
# Besides the keys the algorithm reads: what tells runs of one configuration apart.
RUN_HPARAMS = ("seed",)


class RecordScalars(NamedTuple):
    """One metrics.jsonl record's values by tag."""

    run: dict[str, float]  # the run's own (a population's: means over members, and `population/`)
    members: tuple[dict[str, float], ...]  # each member's run, in member order (a population's only)


def member_run(member: int) -> str:
    """A member's run: its folder in the population's TensorBoard run, the end of its W&B name."""
    return f"{MEMBER_RUN_PREFIX}{member}"


def seed_tag(tag: str, seed: int) -> str:
    return f"{tag}/seed_{seed}"


def best_tag(name: str) -> str:
    return f"{POPULATION_GROUP}/best_{name}"


def _number(value: Any) -> float | None:
    """A value a series has a point for: a finite number (null, a frozen member's: none)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _lists(record: Mapping[str, Any], field: str):
    """(spec, values) of each declared metric in `record[field]` (its "seeds" or "members")."""
    table = record.get(field)
    if isinstance(table, Mapping):
        for name, values in table.items():
            if name in METRIC_SPECS and isinstance(values, list):
                yield METRIC_SPECS[name], values


def record_scalars(record: Mapping[str, Any]) -> RecordScalars:
    run = {spec.tag: value for name, spec in METRIC_SPECS.items() if (value := _number(record.get(name))) is not None}
    shape = population_shape(record)
    if shape is None:
        for spec, values in _lists(record, "seeds"):
            run.update({seed_tag(spec.tag, i): v for i, value in enumerate(values)
                        if (v := _number(value)) is not None})
        return RecordScalars(run, ())
    members: list[dict[str, float]] = [{} for _ in range(shape.members)]
    for spec, values in _lists(record, MEMBERS):
        found = [(m, v) for m, value in enumerate(values[:shape.members]) if (v := _number(value)) is not None]
        for m, value in found:
            members[m][spec.tag] = value
        if spec.higher_is_better and found:
            run[best_tag(spec.name)] = max(value for _, value in found)
    if shape.seeds > 1:  # with one seed per member, the agents' values are the members' already
        for spec, values in _lists(record, "seeds"):
            for agent, value in enumerate(values[:shape.members * shape.seeds]):
                if (v := _number(value)) is not None:
                    member, seed = divmod(agent, shape.seeds)
                    members[member][seed_tag(spec.tag, seed)] = v
    return RecordScalars(run, tuple(members))


# --- hyperparameters ---------------------------------------------------------------------------


def hparam_keys(algo: str) -> tuple[str, ...]:
    """The configuration keys a run of `algo` is compared by: those its algorithm reads."""
    return tuple(name for name, key in KEYS.items() if key.kind != RUN and key.reads(algo)) + RUN_HPARAMS


def hparam_value(value: Any) -> Any:
    """A value as TensorBoard's hparams and W&B's config columns take it: a string, boolean or
    number (a list or table as JSON text)."""
    if isinstance(value, (str, bool, int, float)):
        return value
    return json.dumps(value, default=list, sort_keys=True)


def hparams(config: Mapping[str, Any]) -> dict[str, Any]:
    """The run's values of `hparam_keys`."""
    keys = hparam_keys(str(config.get("algo", DEFAULT_ALGORITHM)))
    return {name: hparam_value(config[name]) for name in keys if name in config}


def member_values(config: Mapping[str, Any]) -> tuple[dict[str, Any], ...]:
    """Each member's starting values of the keys that differ between members, as the
    configuration writes them; () for a run that is not a population (or whose sweep this
    rltui cannot plan, as an older run's may be)."""
    if not config.get("sweep"):
        return ()
    from rltui.config.sweep import plan_sweep

    values = types.SimpleNamespace(**{name: config.get(name, key.default) for name, key in KEYS.items()})
    try:
        sweep = plan_sweep(values)
    except (ConfigError, HParamError):
        return ()
    if sweep is None:
        return ()
    return tuple({key: KEYS[key].rule.from_trainer(member[key]) for key in sweep.keys} for member in sweep.members)


def member_hparams(config: Mapping[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """A member's hyperparameters: its own values of the keys that differ (first), then the
    run's of the others its algorithm reads."""
    own = {name: hparam_value(value) for name, value in values.items()}
    return {**own, **{name: value for name, value in hparams(config).items() if name not in own}}
