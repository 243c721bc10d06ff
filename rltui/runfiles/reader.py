"""Reading a run directory as it is, and `rltui export`: a run's metrics and events to
TensorBoard event files (`--tensorboard [DIR]`) or a flat CSV table (`--csv FILE`).

Reading never writes into the run directory and never imports an env module (config.toml
is read as TOML, nothing is built from it), so it works on runs of any age, runs being
written (a last line still partial is left out), and damaged runs (what can be read is
read; `RunData.problems` says what could not).
"""

from __future__ import annotations

import dataclasses
import math
import os
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from rltui.errors import UsageError
from rltui.infra.read_limits import TEXT_FILE_BYTES, read_lines, read_text
from rltui.runfiles.names import CONFIG, EVENTS, METRICS, POPULATION
from trainers.json_text import loads

MEMBERS = "members"  # a population's series: `members/<m>/NAME` (and `members/<m>/NAME/seed_<s>`)


class PopulationShape(NamedTuple):
    members: int
    seeds: int  # agents per member


def population_shape(record: Mapping[str, Any]) -> PopulationShape | None:
    """A population record's members and seeds per member (its "seeds" lists are per agent,
    member-major); None for a record of one agent or of several seeds without members."""
    members = record.get(MEMBERS)
    if not isinstance(members, Mapping):
        return None
    count = next((len(v) for v in members.values() if isinstance(v, list)), 0)
    if not count:
        return None
    seeds = record.get("seeds")
    agents = count
    if isinstance(seeds, Mapping):
        agents = next((len(v) for v in seeds.values() if isinstance(v, list)), count)
    return PopulationShape(count, agents // count if agents % count == 0 and agents >= count else 1)


def member_tag(member: int, name: str, seed: int | None = None) -> str:
    return f"{MEMBERS}/{member}/{name}" + ("" if seed is None else f"/seed_{seed}")


class RunFolder:
    """What every reader of a run directory says of it the same way: its name, and whether
    something in it could not be read."""

    path: Path
    problems: list[str]

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def damaged(self) -> bool:
        return bool(self.problems)


@dataclasses.dataclass
class RunData(RunFolder):
    """What a run directory holds. `problems`: what could not be read, one phrase each
    (empty for a sound run); a run being written is not damaged."""

    path: Path
    config: dict[str, Any]
    records: list[dict[str, Any]]
    events: list[dict[str, Any]]
    problems: list[str]
    population: list[dict[str, Any]] = dataclasses.field(default_factory=list)  # population.jsonl's lines

    def column(self, name: str) -> tuple[list[int], list[float]]:
        """The env steps and finite values of metric `name` (a seed's: `NAME/seed_I`; a
        population member's: `members/M/NAME`, one of its seeds: `members/M/NAME/seed_S`)."""
        steps, values = [], []
        base, _, seed = name.partition("/seed_")
        member, metric = _member_part(base)
        for record in self.records:
            if member is not None:
                value = _member_value(record, metric, member, int(seed) if seed.isdigit() else None)
            else:
                value = record.get(name) if not seed else _seed_value(record, base, int(seed))
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                steps.append(int(record.get("env_steps", 0)))
                values.append(float(value))
        return steps, values

    @property
    def num_members(self) -> int:
        """A population's size (0 for a run of one configuration), from its records or,
        before the first record, its population.jsonl."""
        for record in self.records[:1] + self.records[-1:]:
            shape = population_shape(record)
            if shape is not None:
                return shape.members
        for line in self.population[-1:]:
            table = line.get("table")
            if isinstance(table, list) and len(table) > 1:
                return len(table)
        return 0

    @property
    def num_seeds(self) -> int:
        """Agents per member (per configuration)."""
        value = self.config.get("num_seeds", 1)
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1

    def member_table(self) -> list[dict[str, Any]]:
        """Each member's values, state and parent after the population's last change (from
        population.jsonl; empty without one)."""
        for line in reversed(self.population):
            table = line.get("table")
            if isinstance(table, list):
                return [row for row in table if isinstance(row, dict)]
        return []

    @property
    def steps_per_update(self) -> int:
        for record in self.records:
            if record.get("update"):
                return max(1, int(record.get("env_steps", 0)) // int(record["update"]))
        try:
            return max(1, int(self.config.get("num_envs", 1)) * int(self.config.get("num_steps", 1)))
        except (TypeError, ValueError, OverflowError):
            return 1


def _member_part(name: str) -> tuple[int | None, str]:
    """`members/M/NAME` as (M, NAME); (None, name) for any other name."""
    head, _, rest = name.partition("/")
    index, _, metric = rest.partition("/")
    if head == MEMBERS and index.isdigit() and metric:
        return int(index), metric
    return None, name


def _member_value(record: dict, name: str, member: int, seed: int | None) -> Any:
    if seed is None:
        values = (record.get(MEMBERS) or {}).get(name)
        return values[member] if isinstance(values, list) and member < len(values) else None
    shape = population_shape(record)
    if shape is None or seed >= shape.seeds:
        return None
    return _seed_value(record, name, member * shape.seeds + seed)


def _seed_value(record: dict, name: str, seed: int) -> Any:
    values = (record.get("seeds") or {}).get(name)
    return values[seed] if isinstance(values, list) and seed < len(values) else None


def is_run_dir(path: Path) -> bool:
    return (path / METRICS).is_file() or (path / CONFIG).is_file()


def is_count(value: Any) -> bool:
    """An update, step or sequence number as rltui writes them: an int, 0 or more (JSON's true
    is no count)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def sound_record(record: dict[str, Any]) -> bool:
    """A metrics record whose steps and time every reader can use as numbers."""
    wall = record.get("wall_time")
    return (all(is_count(record[k]) for k in ("update", "env_steps") if k in record)
            and (wall is None or isinstance(wall, (int, float)) and not isinstance(wall, bool) and math.isfinite(wall)))


def sound_event(event: dict[str, Any]) -> bool:
    """An event whose update (and env steps, where its data says them) are counts."""
    data = event.get("data")
    return is_count(event.get("update", 0)) and (
        not isinstance(data, dict) or is_count(data.get("env_steps", 0)))


def read_jsonl(path: Path, problems: list[str],
               sound: Callable[[dict[str, Any]], bool] | None = None) -> list[dict[str, Any]]:
    """The JSON objects of a .jsonl file (those `sound` accepts), streamed a line at a
    time. A last line without its newline is one being written (or cut by a crash) and is
    left out quietly; other unreadable lines (not JSON, nested too deeply, longer than
    JSONL_LINE_BYTES, refused by `sound`) are skipped and counted in `problems`."""
    out, bad = [], 0
    try:
        for line in read_lines(path):
            try:
                value = loads(line) if line is not None else None
            except ValueError:
                value = None
            if isinstance(value, dict) and (sound is None or sound(value)):
                out.append(value)
            else:
                bad += 1
    except FileNotFoundError:
        return []
    except OSError as err:
        problems.append(f"cannot read {path.name}: {err.strerror or err}")
        return out
    if bad:
        problems.append(f"{bad:,} damaged line{'s' if bad != 1 else ''} in {path.name}")
    return out


def read_run(path: Path) -> RunData:
    path = Path(path)
    problems: list[str] = []
    config: dict[str, Any] = {}
    try:
        config = tomllib.loads(read_text(path / CONFIG, TEXT_FILE_BYTES, "a configuration"))
    except FileNotFoundError:
        problems.append(f"no {CONFIG}")
    except OSError as err:
        problems.append(f"cannot read {CONFIG}: {err.strerror or err}")
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, ValueError, RecursionError) as err:
        problems.append(f"{CONFIG} unreadable ({type(err).__name__})")
    records = read_jsonl(path / METRICS, problems, sound_record)
    if not (path / METRICS).exists():
        problems.append(f"no {METRICS}")
    events = read_jsonl(path / EVENTS, problems, sound_event)
    population = read_jsonl(path / POPULATION, problems)
    return RunData(path, config, records, events, problems, population)


def open_run(path: Path, flag: str = "RUN_DIR") -> RunData:
    """read_run for a directory a user named: UsageError (one line) if it is not a run."""
    path = Path(path)
    if not path.is_dir():
        raise UsageError(f"{flag}: {path} is not a directory")
    if not os.access(path, os.R_OK | os.X_OK):
        raise UsageError(f"{flag}: cannot read {path}")
    if not is_run_dir(path):
        raise UsageError(f"{flag}: {path} is not a run directory (no {METRICS} or {CONFIG})")
    return read_run(path)


# --- export ---------------------------------------------------------------------------------
