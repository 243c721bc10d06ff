"""Reading a run directory as it is, and `rltui export`: a run's metrics and events to
TensorBoard event files (`--tensorboard [DIR]`) or a flat CSV table (`--csv FILE`).

Reading never writes into the run directory and never imports an env module (config.toml
is read as TOML, nothing is built from it), so it works on runs of any age, runs being
written (a last line still partial is left out), and damaged runs (what can be read is
read; `RunData.problems` says what could not).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
import os
import sys
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from rltui.errors import UsageError
from rltui.infra.read_limits import TEXT_FILE_BYTES, read_lines, read_text
from trainers.json_text import loads

METRICS, EVENTS, CONFIG = "metrics.jsonl", "events.jsonl", "config.toml"
POPULATION = "population.jsonl"  # a population's changes, each with its member table after it
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


def export_tensorboard(run: RunData, directory: Path) -> int:
    """Write the run's records and events as a fresh TensorBoard run in `directory`;
    returns the number of records written."""
    import time

    from rltui.loggers import event_kind, event_text, scalars
    from rltui.loggers.tensorboard import (
        CONFIG_TAG,
        EVENTS_TAG,
        EventFileWriter,
        config_text,
        hparam_values,
        hparams_summaries,
        scalar_summary,
        text_summary,
    )

    try:
        started = (run.path / CONFIG).stat().st_mtime
    except OSError:
        started = time.time()
    # Inside the run directory the files are the run's, its owner's only; a folder named
    # elsewhere keeps the modes the user's umask gives.
    writer = EventFileWriter(directory, private=Path(directory).resolve().is_relative_to(run.path.resolve()))
    try:
        writer.write_summary(text_summary(CONFIG_TAG, config_text(run.config)), 0, started)
        experiment, session_start, _ = hparams_summaries(hparam_values(run.config), {"episode_return": None})
        writer.write_summary(experiment, 0, started)
        writer.write_summary(session_start, 0, started)
        last, written = -1, 0
        for record in run.records:
            step = int(record.get("env_steps", -1))
            if step <= last:
                continue  # steps only go forward in a run's history; a repeat is left out
            writer.write_summary(scalar_summary(scalars(record)), step, started + float(record.get("wall_time") or 0))
            last, written = step, written + 1
        texts: dict[int, list[str]] = {}
        per_update = run.steps_per_update
        for event in run.events:
            data = event.get("data") if isinstance(event.get("data"), dict) else {}
            step = int(data.get("env_steps", int(event.get("update", 0)) * per_update))
            kind = event_kind(str(event.get("kind", "")), data)
            texts.setdefault(step, []).append(event_text(kind, str(event.get("message", ""))))
        for step in sorted(texts):
            writer.write_summary(text_summary(EVENTS_TAG, "\n\n".join(texts[step])), step, started)
    finally:
        writer.close()
    return written


def csv_columns(records: list[dict[str, Any]]) -> list[str]:
    """update, env_steps, then every other number in the order first seen (a population's
    members after them, seeds last)."""
    from rltui.loggers import scalars

    columns: dict[str, None] = {"update": None, "env_steps": None}
    for record in records:
        for name in scalars(record):
            columns.setdefault(name, None)
    plain = [c for c in columns if "/seed_" not in c and not c.startswith(MEMBERS + "/")]
    members = [c for c in columns if "/seed_" not in c and c.startswith(MEMBERS + "/")]
    return plain + members + [c for c in columns if "/seed_" in c]


def write_csv(run: RunData, out) -> int:
    from rltui.loggers import scalars

    columns = csv_columns(run.records)
    writer = csv.writer(out)
    writer.writerow(columns)
    for record in run.records:
        values = {**scalars(record), "update": record.get("update"), "env_steps": record.get("env_steps")}
        writer.writerow(["" if values.get(c) is None else _cell(values[c]) for c in columns])
    return len(run.records)


def _cell(value: Any) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(value) if isinstance(value, float) else str(value)


def cmd_export(args) -> int:
    run = open_run(Path(args.run_dir))
    if args.tensorboard is None and args.csv is None:
        raise UsageError("export: say what to write: --tensorboard [DIR] and/or --csv FILE")
    # Neither writes over what is there, and both are checked before either writes.
    target = None
    if args.tensorboard is not None:
        from rltui.loggers import TB_DIR
        from rltui.loggers.tensorboard import event_files

        target = Path(args.tensorboard) if args.tensorboard else run.path / TB_DIR
        if event_files(target):
            raise UsageError(f"--tensorboard: {target} already holds event files; give another directory")
    if args.csv not in (None, "-") and Path(args.csv).is_file():
        raise UsageError(f"--csv: {args.csv} already exists; give another file, or remove it first")
    for problem in run.problems:
        print(f"rltui: warning: {run.path}: {problem}", file=sys.stderr)
    if target is not None:
        try:
            count = export_tensorboard(run, target)
        except OSError as err:
            raise UsageError(f"--tensorboard: cannot write {target}: {err.strerror or err}") from None
        print(f"wrote {count:,} updates and {len(run.events):,} events to {target} (tensorboard --logdir {target})")
    if args.csv is not None:
        if args.csv == "-":
            write_csv(run, sys.stdout)
        else:
            buffer = io.StringIO()
            count = write_csv(run, buffer)
            try:
                Path(args.csv).write_text(buffer.getvalue(), encoding="utf-8", newline="")
            except OSError as err:
                raise UsageError(f"--csv: cannot write {args.csv}: {err.strerror or err}") from None
            print(f"wrote {count:,} updates to {args.csv}")
    return 0


def add_parser(sub) -> None:
    export = sub.add_parser(
        "export", help="write a run's metrics as TensorBoard event files or CSV",
        description="Convert a run's metrics.jsonl and events.jsonl (of any age) to TensorBoard event files or a "
                    "flat CSV table. The run directory is only read, unless --tensorboard names no directory.",
    )
    export.add_argument("run_dir", metavar="RUN_DIR", help="a run directory (runs/NAME)")
    export.add_argument("--tensorboard", metavar="DIR", nargs="?", const="", default=None,
                        help="write event files into DIR (default RUN_DIR/tb), which must hold none yet")
    export.add_argument("--csv", metavar="FILE",
                        help="write a table, one row per update, to FILE, which must not exist yet (- for stdout)")
