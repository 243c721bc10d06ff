"""What runs are compared by, shared by `rltui compare` and the runs view: a run's figures
of a metric (its final value, the mean of its last FINAL_WINDOW, its best, the env steps to
a threshold; a population by its best member), how its configuration differs from another's,
and runs grouped by a config key. Plain Python on runs read by `reader.read_run`."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from rltui.runfiles.reader import MEMBERS, RunData, member_tag
from rltui.runfiles.statistics import mean

FINAL_WINDOW = 10  # the final return: the mean of the last this many finite values


class RunSummary(NamedTuple):
    name: str
    env: str
    algo: str
    updates: int
    env_steps: int
    final: float  # mean of the last FINAL_WINDOW finite values of the metric
    best: float
    steps_to_threshold: int | None  # first env steps at which the metric reached the threshold
    wall_time: float
    differences: tuple[str, ...]  # "key=value" where the config differs from the first run's
    problems: tuple[str, ...]
    population: str = ""  # a population: "3x1 (members x seeds), best member 2 (lr=0.001)"; else empty


def _direction(metric: str) -> bool | None:
    """`higher_is_better` of the declared metric `metric` names (a metric's name, or a
    member's or seed's series of one); True for a name no declaration knows."""
    from trainers.metrics_spec import METRIC_SPECS

    names = [part for part in metric.split("/") if part in METRIC_SPECS]
    return METRIC_SPECS[names[-1]].higher_is_better if names else True


def lower_is_better(metric: str) -> bool:
    """Whether a lower value of `metric` is the better: a loss. Returns, rates and
    diagnostics count upward."""
    return _direction(metric) is False


def best_label(metric: str) -> str:
    """What `best_of` gives for `metric`, as a column says it: "best" where a declared
    direction makes one value better (a return, a loss), "max" for a diagnostic (a policy
    loss, an entropy, an episode's length), where the highest is only the highest."""
    return "max" if _direction(metric) is None else "best"


def best_of(metric: str, values: Sequence[float]) -> float:
    """The best of `values`: the lowest of a loss, else the highest (`best_label`); NaN for
    none."""
    if not values:
        return math.nan
    return min(values) if lower_is_better(metric) else max(values)


def steps_to(steps: Sequence[int], values: Sequence[float], threshold: float, lower: bool = False) -> int | None:
    """The first of `steps` whose value reached `threshold`: at or above it, or at or below
    it where `lower` is better."""
    for step, value in zip(steps, values):
        if (value <= threshold) if lower else (value >= threshold):
            return int(step)
    return None


def config_differences(base: dict[str, Any], config: dict[str, Any]) -> tuple[str, ...]:
    """"key=value" for each key whose value differs, as `--set` writes it: a table's
    entries as dotted keys (sweep.lr=[0.0001,0.001])."""
    out = []
    for key in sorted(set(base) | set(config)):
        before, after = base.get(key), config.get(key)
        if before == after:
            continue
        tables = (before if before is not None else {}), (after if after is not None else {})
        if all(isinstance(table, dict) for table in tables):  # a table on both sides, or on one and unset
            out += [f"{key}.{difference}" for difference in config_differences(*tables)]
        else:
            out.append(f"{key}={show_value(config.get(key, '(unset)'))}")
    return tuple(out)


def show_value(value: Any) -> str:
    """A configuration value as one word (`[64,64]`); "(unset)" for a key a run does not have."""
    from rltui.config.toml_text import show_setting

    return "(unset)" if value is None else show_setting(value, compact=True)


def summarize(run: RunData, metric: str, threshold: float | None, base: dict[str, Any]) -> RunSummary:
    """A run's figures of `metric`. A population is compared by its best member (the one
    whose final value is highest, a loss's lowest): its final, best and steps to the
    threshold (reached from above for a loss)."""
    compared = compared_column(run, metric)
    steps, values = compared.steps, compared.values
    population = ""
    if run.num_members and not metric.startswith(MEMBERS + "/"):
        population = f"{run.num_members}x{run.num_seeds}"
        if compared.member is not None:
            population += f", best member {compared.member}{_member_values(run, compared.member)}"
    last = run.records[-1] if run.records else {}
    tail = values[-FINAL_WINDOW:]
    return RunSummary(
        name=run.name,
        env=str(run.config.get("env", "?")),
        algo=str(run.config.get("algo", "?")),
        updates=int(last.get("update", 0) or 0),
        env_steps=int(last.get("env_steps", 0) or 0),
        final=mean(tail) if tail else math.nan,
        best=best_of(metric, values),
        steps_to_threshold=(steps_to(steps, values, threshold, lower_is_better(metric))
                            if threshold is not None else None),
        wall_time=float(last.get("wall_time", 0.0) or 0.0),
        differences=read_differences(base, run.config) if run.config is not base else (),
        problems=tuple(run.problems),
        population=population,
    )


def read_differences(base: dict[str, Any], config: dict[str, Any]) -> tuple[str, ...]:
    """`config_differences` of the keys the run of `config` reads: what `compare` and the runs
    view list beside a run."""
    return _read_by(config, config_differences(base, config))


def swept_keys(config: dict[str, Any]) -> frozenset[str]:
    """The keys a run of `config` sweeps: each member trains at a value of its own, none at
    the key's plain value."""
    sweep = config.get("sweep")
    return frozenset(sweep) if isinstance(sweep, dict) else frozenset()


def _read_by(config: dict[str, Any], differences: tuple[str, ...]) -> tuple[str, ...]:
    """`differences` ("key=value") less those of keys the run of `config` does not read
    (`reads_key`): beside a run of another algorithm, or on the other action space, those
    keys differ without meaning anything (and its config.toml leaves them out). A key the
    run sweeps is left out too: no member trains at its plain value, and the `sweep.KEY`
    entry says what they train at."""
    import types

    from rltui.config.build import reads_key
    from rltui.config.keys import KEYS

    swept = swept_keys(config)
    differences = tuple(d for d in differences if d.split("=", 1)[0] not in swept)
    algo, env = config.get("algo"), config.get("env")
    if not isinstance(algo, str) or not isinstance(env, str):
        return differences
    run = types.SimpleNamespace(algo=algo, env=env)

    def read(difference: str) -> bool:
        name = difference.split("=", 1)[0].split(".", 1)[0]
        return name not in KEYS or reads_key(run, name)

    return tuple(filter(read, differences))


class Compared(NamedTuple):
    steps: list[int]
    values: list[float]
    member: int | None  # the population member these are of; None: the run's own column


def compared_column(run: RunData, metric: str) -> Compared:
    """What a run is compared by: its `metric`, or for a population its best member's."""
    if run.num_members and not metric.startswith(MEMBERS + "/"):
        best = _best_member(run, metric)
        if best is not None:
            return Compared(*run.column(member_tag(best, metric)), best)
    return Compared(*run.column(metric), None)


def _best_member(run: RunData, metric: str) -> int | None:
    """The member whose final `metric` (mean of its last FINAL_WINDOW values) is best: the
    highest, or a loss's lowest (`lower_is_better`)."""
    finals = {}
    for m in range(run.num_members):
        tail = run.column(member_tag(m, metric))[1][-FINAL_WINDOW:]
        if tail:
            finals[m] = mean(tail)
    return best_final(finals, metric)


def best_final(finals: dict[int, float], metric: str) -> int | None:
    """The member whose final `metric` in `finals` (member -> final value) is best: the
    highest, or a loss's lowest (`lower_is_better`); the lowest index on a tie; None for none."""
    sign = -1.0 if lower_is_better(metric) else 1.0
    return max(finals, key=lambda m: (sign * finals[m], -m)) if finals else None


def _member_values(run: RunData, member: int) -> str:
    """ " (lr=0.001)": the member's values of the swept keys, as its population.jsonl last
    recorded them."""
    table = run.member_table()
    row = next((r for r in table if r.get("member") == member), None)
    values = row.get("values") if row else None
    sweep = run.config.get("sweep")
    if not isinstance(values, dict) or not isinstance(sweep, dict):
        return ""
    shown = [f"{k}={show_value(values[k])}" for k in sweep if isinstance(values.get(k), (int, float))]
    return f" ({' '.join(shown)})" if shown else ""


def group_by(runs: Sequence[Any], key: str, value_of: Callable[[Any], Any] | None = None) -> dict[Any, list[Any]]:
    """Runs by their value of config key `key` (or `value_of(run)`), in order of first
    appearance; lists are made hashable as tuples."""
    groups: dict[Any, list[Any]] = {}
    for run in runs:
        value = run.config.get(key) if value_of is None else value_of(run)
        groups.setdefault(tuple(value) if isinstance(value, list) else value, []).append(run)
    return groups


def grouped_value(run: RunData, key: str, metric: str) -> Any:
    """What `--group-by key` groups `run` by: its config's value, or for a population its
    best member's (`compared_column`), the one it is compared by."""
    best = compared_column(run, metric).member if run.num_members else None
    return member_value(run.member_table(), best, key, run.config.get(key))


def member_value(table: Sequence[dict[str, Any]], member: int | None, key: str, default: Any) -> Any:
    """The value of `key` that `member` trains with, from a population's member table (as
    population.jsonl last recorded it), in six significant figures as a config holds it;
    `default` when there is no such member or it holds no such key."""
    from rltui.config.build import hparams_as_config

    row = next((r for r in table if r.get("member") == member), None) if member is not None else None
    values = row.get("values") if row is not None else None
    if not isinstance(values, dict) or not isinstance(values.get(key), (int, float)):
        return default
    value = hparams_as_config({key: values[key]}).get(key, values[key])
    return value if isinstance(value, bool) else float(f"{value:.6g}")
