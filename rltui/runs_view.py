"""`rltui runs [DIR]`: every run under DIR (default runs/) in one list, and the curves of
the runs picked from it overlaid or grouped (the view: rltui.ui.screens.runs).

This module is what the view shows, without Textual: finding runs, reading each one into
compact columns (cached per run by its files' mtimes and sizes), telling its state, and
the curves of an overlay or a grouping. Run directories are only read (a live run's
control socket is connected to and closed, nothing is sent), and an env's module is
never imported: config.toml is read as TOML.
"""

from __future__ import annotations

import dataclasses
import math
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from rltui.compare import STATISTICS, _show, band, config_differences, ema, group_by
from rltui.errors import UsageError
from rltui.export import CONFIG, EVENTS, METRICS, POPULATION, is_run_dir, member_tag, population_shape, read_run

ORIGINAL_CONFIG = "config.original.toml"
RETURN = "episode_return"
STATES = ("live", "finished", "stopped", "diverged", "crashed")
X_AXES = ("steps", "time")
SMOOTHING = (0.0, 0.6, 0.8, 0.9, 0.95, 0.99)  # the EMA weights `w` steps through; 0 is off
PROBE_TIMEOUT = 0.3  # seconds a control socket has to accept before the run counts as gone


# --- one run --------------------------------------------------------------------------------------


@dataclasses.dataclass
class LoadedRun:
    """A run directory read once: its configuration, events and problems as `read_run`
    gives them, and its metrics as one float column per metric (NaN where a record has
    no value), so a run of 100k updates is a few arrays rather than 100k dicts."""

    path: Path
    config: dict[str, Any]
    events: list[dict[str, Any]]
    problems: list[str]
    steps: np.ndarray  # env steps of each record
    wall: np.ndarray  # wall time (s) of each record
    columns: dict[str, np.ndarray]
    updates: int
    started: float | None  # when its configuration was first written (epoch seconds)
    load_seconds: float
    members: int = 0  # a population's size (0: one configuration)
    seeds_per_member: int = 1
    member_table: tuple[dict[str, Any], ...] = ()  # each member's values, state, parent (population.jsonl)

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def damaged(self) -> bool:
        return bool(self.problems)

    @property
    def env_steps(self) -> int:
        return int(self.steps[-1]) if len(self.steps) else 0

    @property
    def wall_time(self) -> float:
        return float(self.wall[-1]) if len(self.wall) and math.isfinite(self.wall[-1]) else 0.0

    def metrics(self) -> list[str]:
        return list(self.columns)

    @property
    def is_population(self) -> bool:
        return self.members > 0


    def curve(self, metric: str, x_axis: str = "steps") -> tuple[np.ndarray, np.ndarray]:
        """The x (env steps or wall time) and finite values of `metric`."""
        values = self.columns.get(metric)
        if values is None:
            return np.array([]), np.array([])
        xs = self.steps if x_axis == "steps" else self.wall
        keep = np.isfinite(values) & np.isfinite(xs)
        return xs[keep].astype(float), values[keep]


def _column(values: list[Any]) -> np.ndarray:
    try:
        out = np.array(values, dtype=float)  # None becomes NaN
    except (TypeError, ValueError):
        out = np.array([v if isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan for v in values],
                       dtype=float)
    return out


def _numeric(value: Any) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


def load_run(path: Path) -> LoadedRun:
    """Read a run directory into columns. Never raises for a damaged run: what cannot be
    read is in `problems`."""
    started_clock = time.perf_counter()
    try:
        data = read_run(path)
    except (OSError, ValueError, MemoryError) as err:  # a directory that vanished mid-read, say
        return LoadedRun(Path(path), {}, [], [f"unreadable ({type(err).__name__})"], np.array([], dtype=np.int64),
                         np.array([]), {}, 0, None, time.perf_counter() - started_clock)
    records = data.records
    names: dict[str, None] = {}
    seed_names: dict[tuple[str, int], None] = {}
    member_names: dict[str, int] = {}
    shape = None
    for record in records[:64] + records[-64:]:  # every record of a run carries the same keys
        for key, value in record.items():
            if key not in ("update", "env_steps", "wall_time", "seeds") and _numeric(value):
                names.setdefault(key, None)
        for key, values in (record.get("seeds") or {}).items() if isinstance(record.get("seeds"), dict) else ():
            if isinstance(values, list):
                for i in range(len(values)):
                    seed_names.setdefault((key, i), None)
        shape = population_shape(record) or shape
        for key, values in (record.get("members") or {}).items() if shape is not None else ():
            if isinstance(values, list):
                member_names[key] = max(member_names.get(key, 0), len(values))
    # Plain comprehensions over the records, one per column: a huge run is 100k records.
    columns = {name: _column([r.get(name) for r in records]) for name in names}
    if shape is not None:
        # A population: each member's series; its agents' only where a member has several seeds.
        for name, count in member_names.items():
            lists = [_member_list(r, name) for r in records]
            for m in range(count):
                columns[member_tag(m, name)] = _column([v[m] if v is not None and m < len(v) else None for v in lists])
    if shape is None or shape.seeds > 1:
        for name in dict.fromkeys(name for name, _ in seed_names):
            lists = [_seed_list(r, name) for r in records]
            for (seed_name, i) in seed_names:
                if seed_name == name:
                    tag = f"{name}/seed_{i}" if shape is None else member_tag(i // shape.seeds, name, i % shape.seeds)
                    columns[tag] = _column([v[i] if v is not None and i < len(v) else None for v in lists])
    steps = np.nan_to_num(_column([r.get("env_steps") for r in records]), nan=0).astype(np.int64)
    wall = _column([r.get("wall_time") for r in records])
    updates = int(records[-1].get("update", 0) or 0) if records else 0
    members = shape.members if shape is not None else data.num_members
    return LoadedRun(data.path, data.config, data.events, data.problems, steps, wall, columns, updates,
                     _started(data.path), time.perf_counter() - started_clock, members,
                     shape.seeds if shape is not None else 1, tuple(data.member_table()))


def _member_list(record: dict, name: str) -> list | None:
    members = record.get("members")
    values = members.get(name) if isinstance(members, dict) else None
    return values if isinstance(values, list) else None


def _seed_list(record: dict, name: str) -> list | None:
    seeds = record.get("seeds")
    values = seeds.get(name) if isinstance(seeds, dict) else None
    return values if isinstance(values, list) else None


def _started(path: Path) -> float | None:
    for name in (ORIGINAL_CONFIG, CONFIG, METRICS):  # a resume rewrites config.toml, not the original
        try:
            return (path / name).stat().st_mtime
        except OSError:
            continue
    return None


def signature(path: Path) -> tuple:
    """What changes when a run's files do: each file's mtime and size."""
    out = []
    for name in (CONFIG, METRICS, EVENTS, POPULATION):
        try:
            info = os.stat(path / name)
            out.append((info.st_mtime_ns, info.st_size, info.st_ino))
        except OSError:
            out.append(None)
    return tuple(out)


class RunCache:
    """Loaded runs, each read again only when its files changed (thread-safe: the view
    loads in a worker thread)."""

    def __init__(self, loader: Callable[[Path], LoadedRun] = load_run):
        self._loader = loader
        self._runs: dict[Path, tuple[tuple, LoadedRun]] = {}
        self._lock = threading.Lock()

    def get(self, path: Path) -> LoadedRun:
        key = signature(path)
        with self._lock:
            cached = self._runs.get(path)
        if cached is not None and cached[0] == key:
            return cached[1]
        run = self._loader(path)
        with self._lock:
            self._runs[path] = (key, run)
        return run

    def cached(self, path: Path) -> LoadedRun | None:
        with self._lock:
            cached = self._runs.get(path)
        return cached[1] if cached is not None else None


# --- finding runs and their state ---------------------------------------------------------------


def check_root(root: Path) -> None:
    """UsageError (one line) unless `root` is a directory this user can list."""
    if not root.exists():
        raise UsageError(f"{root}: no such directory")
    if not root.is_dir():
        raise UsageError(f"{root}: not a directory")
    if not os.access(root, os.R_OK | os.X_OK):
        raise UsageError(f"{root}: cannot read this directory (permission denied)")


def scan_runs(root: Path) -> list[Path]:
    """The run directories in `root` (its subdirectories holding metrics.jsonl or
    config.toml), and `root` itself if it is one."""
    root = Path(root)
    try:
        children = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError as err:
        raise UsageError(f"{root}: cannot read this directory ({err.strerror or err})") from None
    found = [p for p in children if is_run_dir(p)]
    return ([root] if is_run_dir(root) else []) + found


def socket_answers(path: Path, timeout: float = PROBE_TIMEOUT) -> bool:
    """Whether a run's control socket accepts a connection (its process is alive)."""
    from rltui.session.control_paths import find_socket

    where = find_socket(path)
    if where is None:
        return False
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(timeout)
    try:
        probe.connect(str(where))
    except OSError:
        return False
    finally:
        probe.close()
    return True


def has_socket(path: Path) -> bool:
    from rltui.session.control_paths import find_socket

    return find_socket(path) is not None


class RunState(NamedTuple):
    name: str  # one of STATES
    detail: str  # the words behind it, for the status line


def state_of(events: Sequence[dict[str, Any]], live: bool, socket_left: bool = False) -> RunState:
    """A run's state from its events (the last start, then how that session ended) and
    whether its control socket answers now."""
    if live:
        return RunState("live", "its control socket answers")
    end: dict[str, Any] | None = None
    diverged = target = False
    for event in events:
        kind = event.get("kind")
        if kind in ("compiled", "resumed"):  # a new session: what ended the last one no longer counts
            end, diverged, target = None, False, False
        elif kind == "nonfinite":
            diverged = True
        elif kind == "rolled back":  # back to a checkpoint from before the divergence
            diverged = False
        elif kind == "target_reached":
            target = True
        elif kind in ("finished", "error"):
            end = event
    if end is None:
        why = "its control socket no longer answers" if socket_left else "no final event in events.jsonl"
        return RunState("crashed", why)
    message = str(end.get("message", ""))
    if end.get("kind") == "error":
        return RunState("crashed", f"error: {message}")
    if diverged:
        return RunState("diverged", "stopped after a non-finite loss or gradient")
    if message.startswith("stopped") and not target:
        return RunState("stopped", message)
    return RunState("finished", message)


# --- the list's rows ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RunRow:
    path: Path
    name: str
    env: str
    algo: str
    state: RunState
    env_steps: int
    updates: int
    latest: float
    best: float
    wall_time: float
    started: float | None
    problems: tuple[str, ...]
    population: str = ""  # "3x1": members x seeds per member; empty for one configuration
    best_member: int | None = None  # the population's member whose latest return is highest

    @property
    def damaged(self) -> bool:
        return bool(self.problems)


def row_of(run: LoadedRun, state: RunState) -> RunRow:
    """A run's row. A population shows as such ("ppo, population 3x1") with its best
    member's return: the member whose latest return is highest, and the best any member had."""
    algo = str(run.config.get("algo", "?"))
    latest, best = _latest_best(run.columns.get(RETURN, np.array([])))
    best_member, population = None, ""
    if run.is_population:
        population = f"{run.members}x{run.seeds_per_member}"
        algo = f"{algo}, population {population}"
        figures = {m: _latest_best(run.columns.get(member_tag(m, RETURN), np.array([]))) for m in range(run.members)}
        latest_of = {m: f[0] for m, f in figures.items() if math.isfinite(f[0])}
        bests = [f[1] for f in figures.values() if math.isfinite(f[1])]
        best_member = max(latest_of, key=lambda m: (latest_of[m], -m)) if latest_of else None
        latest = latest_of[best_member] if best_member is not None else math.nan
        best = max(bests) if bests else math.nan
    return RunRow(
        path=run.path, name=run.name, env=str(run.config.get("env", "?")), algo=algo,
        state=state, env_steps=run.env_steps, updates=run.updates, latest=latest, best=best,
        wall_time=run.wall_time, started=run.started, problems=tuple(run.problems),
        population=population, best_member=best_member,
    )


def _latest_best(values: np.ndarray) -> tuple[float, float]:
    finite = values[np.isfinite(values)]
    return (float(finite[-1]), float(finite.max())) if len(finite) else (math.nan, math.nan)


def differences(base: dict[str, Any] | None, config: dict[str, Any]) -> str:
    if base is None:
        return ""
    if base is config:
        return "(first)"
    return " ".join(config_differences(base, config)) or "(same)"


SORT_KEYS: dict[str, Callable[[RunRow], Any]] = {
    "started": lambda r: r.started or 0.0,
    "name": lambda r: r.name,
    "env": lambda r: r.env,
    "algo": lambda r: r.algo,
    "state": lambda r: STATES.index(r.state.name),
    "env steps": lambda r: r.env_steps,
    "latest": lambda r: r.latest if math.isfinite(r.latest) else -math.inf,
    "best": lambda r: r.best if math.isfinite(r.best) else -math.inf,
    "wall time": lambda r: r.wall_time,
}


def sort_rows(rows: Sequence[RunRow], key: str, descending: bool) -> list[RunRow]:
    return sorted(rows, key=SORT_KEYS[key], reverse=descending)


def matches(row: RunRow, config: dict[str, Any], text: str) -> bool:
    """Every word of `text` is in the row's name, env, algo, state or a key=value of its
    configuration (case ignored)."""
    words = text.lower().split()
    if not words:
        return True
    haystack = " ".join([row.name, row.env, row.algo, row.state.name, "damaged" if row.damaged else "",
                         *(f"{k}={_show(v)}" for k, v in config.items())]).lower()
    return all(word in haystack for word in words)


# --- curves -------------------------------------------------------------------------------------------


class Line(NamedTuple):
    label: str
    xs: np.ndarray
    ys: np.ndarray  # smoothed (or raw when smoothing is off)
    raw: np.ndarray | None  # the raw values under a smoothed line


class GroupBand(NamedTuple):
    label: str
    key: Any  # the group's value of the grouping key
    members: tuple[str, ...]  # run names
    xs: np.ndarray
    center: np.ndarray
    low: np.ndarray
    high: np.ndarray


class Overlay(NamedTuple):
    metric: str
    x_axis: str
    smoothing: float
    lines: tuple[Line, ...]
    bands: tuple[GroupBand, ...]
    group: str | None
    statistic: str
    seconds: float  # what computing it took


def bucket(xs: np.ndarray, ys: np.ndarray, points: int) -> tuple[np.ndarray, np.ndarray]:
    """At most `points` points: the means of equal runs of consecutive ones (a chart cell
    cannot show more)."""
    if len(xs) <= points:
        return xs, ys
    starts = (np.arange(points) * len(xs)) // points
    counts = np.diff(np.append(starts, len(xs)))
    return np.add.reduceat(xs, starts) / counts, np.add.reduceat(ys, starts) / counts


def overlay(runs: Sequence[LoadedRun], metric: str, *, x_axis: str = "steps", smoothing: float = 0.6,
            group: str | None = None, statistic: str = "mean", points: int = 200) -> Overlay:
    """The runs' curves of `metric`: one line each (EMA-smoothed, the raw values kept
    beside; a population one line per member), or with `group`, one band per value of
    that config key (compare.group_by): the mean or IQM across the group's runs with a bootstrap 95% interval."""
    clock = time.perf_counter()
    lines: list[Line] = []
    bands: list[GroupBand] = []
    if group:
        for value, members in group_by(runs, group).items():
            curves = []
            for run in members:
                xs, ys = run.curve(metric, x_axis)
                if len(xs):
                    curves.append((xs, ema(ys, smoothing) if smoothing else ys))
            b = band(curves, statistic, points=points, resamples=500)
            if len(b.steps):
                label = f"{group}={_show(value)} ({len(members)})"
                bands.append(GroupBand(label, value, tuple(r.name for r in members), b.steps, b.center, b.low, b.high))
    else:
        for run in runs:
            for label, name in _series(run, metric):
                xs, ys = run.curve(name, x_axis)
                if not len(xs):
                    continue
                smoothed = ema(ys, smoothing) if smoothing else ys
                bx, by = bucket(xs, smoothed, points)
                raw = bucket(xs, ys, points)[1] if smoothing else None
                lines.append(Line(label, bx, by, raw))
    return Overlay(metric, x_axis, smoothing, tuple(lines), tuple(bands), group, statistic,
                   time.perf_counter() - clock)


def _series(run: LoadedRun, metric: str) -> list[tuple[str, str]]:
    """The (label, column) lines a run draws for `metric`: a population one per member
    ("NAME m0", ...) where its members have the metric, anything else its own column."""
    if run.is_population:
        members = [(f"{run.name} m{m}", member_tag(m, metric)) for m in range(run.members)]
        members = [(label, name) for label, name in members if name in run.columns]
        if members:
            return members
    return [(run.name, metric)]


def metric_choices(runs: Sequence[LoadedRun]) -> list[str]:
    """The metrics the runs have: the declared chart metrics first, then the rest, the
    seeds' series last."""
    from trainers import metrics_spec

    seen: dict[str, None] = {}
    for run in runs:
        for name in run.columns:
            seen.setdefault(name, None)
    declared = [spec.name for spec in metrics_spec.CHART_METRICS if spec.name in seen]
    rest = [n for n in seen if n not in declared and "/seed_" not in n and not n.startswith("members/")]
    members = [n for n in seen if "/seed_" not in n and n.startswith("members/")]
    return declared + rest + members + [n for n in seen if "/seed_" in n]


def group_keys(runs: Sequence[LoadedRun]) -> list[str]:
    """Config keys whose value differs among the runs (seed first): what grouping by
    would split."""
    keys: set[str] = set()
    for run in runs[1:]:
        keys |= {k for k in set(run.config) | set(runs[0].config) if run.config.get(k) != runs[0].config.get(k)}
    return sorted(keys, key=lambda k: (k != "seed", k))


# --- the command ---------------------------------------------------------------------------------------


class AttachRequest(NamedTuple):
    """What the view exits with when Enter is pressed on a live run."""

    run_dir: Path


def cmd_runs(args) -> int:
    root = Path(args.dir)
    check_root(root)
    if not scan_runs(root):
        print(f"no runs in {root} (a run directory holds {METRICS} or {CONFIG})")
        return 0
    from rltui.ui import can_show_dashboard
    from rltui.ui.themes import check_theme

    try:
        theme = check_theme(getattr(args, "theme", None))
    except ValueError as err:
        raise UsageError(str(err)) from None

    if not can_show_dashboard():
        raise UsageError("rltui runs needs a terminal (standard input or output is redirected); "
                         f"for a table: rltui compare {root}/*")
    from rltui.ui.screens.runs import RunsApp

    cache = RunCache()
    while True:
        app = RunsApp(root, cache=cache, theme=theme)
        result = app.run()
        if not isinstance(result, AttachRequest):
            return app.return_code or 0
        from argparse import Namespace

        from rltui.attach import cmd_attach

        # The dashboard in this terminal; detaching from it comes back to the list.
        code = cmd_attach(Namespace(run_dir=str(result.run_dir), theme=theme))
        if code:
            print("rltui: back to the runs list", file=sys.stderr)


def add_parser(sub) -> None:
    runs = sub.add_parser(
        "runs", help="list runs and overlay their curves",
        description="List every run in DIR (default runs/) with its state, env steps, latest and best return and "
                    "wall time; select runs (space) to overlay their curves or group them by a config key into a "
                    "mean or IQM with a bootstrap band; Enter attaches to a live run or opens a finished run's "
                    "curves. Run directories are only read.",
    )
    runs.add_argument("dir", metavar="DIR", nargs="?", default="runs", help="a directory of runs (default runs)")
    runs.add_argument("--theme", metavar="NAME", help="theme (default rltui-dark)")


STATISTIC_NAMES = tuple(sorted(STATISTICS))
