"""Writes a run's files: metrics.jsonl (one record per update), events.jsonl, and for a
population population.jsonl.

A listener like any other; both the dashboard and `--no-ui` attach it. Lines are flushed
after every chunk so a crash loses at most the chunk in flight.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from rltui.infra.owner_only import open_private
from rltui.infra.read_limits import read_lines
from rltui.runfiles.names import EVENTS, METRICS, METRICS_DISCARDED, POPULATION, POPULATION_DISCARDED, TEMPORARY_SUFFIX
from rltui.runfiles.reader import is_count
from rltui.session.controller import SessionListener
from rltui.session.events import SessionEvent
from rltui.session.metrics import MetricsSnapshot
from trainers.json_text import loads


class RunFileError(OSError):
    """A run file could not be written; says which, without an errno number."""

    def __str__(self) -> str:
        return f"cannot write {self.filename}: {self.strerror}"


def _file_error(err: OSError, path: Path) -> RunFileError:
    return RunFileError(err.errno, err.strerror or str(err), str(path))


def _write_atomic(path: Path, text: str) -> None:
    """Replace `path` with `text` whole, or leave it as it was (a full disk, a crash)."""
    tmp = path.with_name(path.name + TEMPORARY_SUFFIX)
    try:
        with open_private(tmp, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise _file_error(err, path) from None


def truncate_metrics(run_dir: Path, last_update: int) -> int:
    """Keep metrics.jsonl's records up to `last_update`, where a resumed or rolled-back run
    goes on from, so the file stays one agent's history with updates in order. The records
    after it (written before a crash, or the updates a rollback undid) move to
    metrics.discarded.jsonl rather than being lost; returns how many moved. Each file is
    replaced whole, so a full disk leaves both as they were; raises RunFileError naming the
    file."""
    return _set_aside(Path(run_dir) / METRICS, METRICS_DISCARDED,
                      lambda record: _number(record, "update", last_update))


def truncate_population(run_dir: Path, seq: int | None, last_update: int) -> None:
    """Keep population.jsonl's changes up to the `seq` a checkpoint counted (None, from a
    checkpoint that did not count them: those up to `last_update`), so that the file is the
    lineage of the history that goes on; the others move to population.discarded.jsonl, as
    `truncate_metrics` moves records."""
    def in_history(record) -> bool:
        if seq is not None and isinstance(record, dict) and "seq" in record:
            return _number(record, "seq", seq)
        return _number(record, "update", last_update)

    _set_aside(Path(run_dir) / POPULATION, POPULATION_DISCARDED, in_history)


def _number(record, key: str, limit: float) -> bool:
    """Whether `record`'s `key` is a count up to `limit`: one that is no count is a record no
    reader uses (`export.sound_record`), so it moves aside too."""
    value = record.get(key, 0) if isinstance(record, dict) else None
    return is_count(value) and value <= limit


def _set_aside(path: Path, aside_name: str, in_history) -> int:
    """Keep the lines of the JSONL file `path` whose record is `in_history`, moving the others
    to `aside_name` beside it (appended); lines that cannot be read are dropped. Returns how
    many records moved."""
    if not path.exists():
        return 0
    kept, discarded, lines, size = [], [], 0, 0
    try:
        for line in read_lines(path):
            lines += 1
            if line is None:
                continue  # too long to read: dropped
            size += len(line) + 1
            try:
                record = loads(line)
            except ValueError:
                continue  # a line cut short by a crash, or too deep to read
            (kept if in_history(record) else discarded).append(line.decode("utf-8", "replace") + "\n")
        whole = len(kept) == lines and path.stat().st_size == size  # no partial last line either
    except OSError as err:
        raise _file_error(err, path) from None
    if whole:
        return 0  # nothing to move: no write, which a full disk could refuse
    if discarded:
        aside = path.with_name(aside_name)
        try:
            before = "".join(line.decode("utf-8", "replace") + "\n" for line in read_lines(aside)
                             if line is not None) if aside.exists() else ""
        except OSError as err:
            raise _file_error(err, aside) from None
        # Before `path`: a failure between the two keeps every record somewhere.
        _write_atomic(aside, before + "".join(discarded))
    _write_atomic(path, "".join(kept))
    return len(discarded)


def record_abort(run_dir: Path, event: SessionEvent) -> None:
    """Appends `event` to events.jsonl from the thread that aborts the process, which exits
    at once after it: the recorder's own file belongs to the session thread, and an appended
    line of its own keeps the log whole. Best effort: an abort never waits on a full disk."""
    try:
        with open_private(Path(run_dir) / EVENTS, "a", encoding="utf-8") as f:
            f.write(json.dumps(event.to_json()) + "\n")
    except OSError:
        pass


def _open(path: Path):
    """`path` opened to append to; RunFileError naming it if it cannot be (a pipe there)."""
    try:
        return open_private(path, "a", encoding="utf-8")
    except OSError as err:
        raise _file_error(err, path) from None


class RunRecorder(SessionListener):
    """Raises RunFileError (which ends the session in the ERROR state) when a file cannot
    be written; that file is then closed and written no more, and `close` never raises."""

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self._metrics = _open(self.run_dir / METRICS)
        try:
            self._events = _open(self.run_dir / EVENTS)
        except RunFileError:
            self._metrics.close()
            raise
        self._population = None  # population.jsonl, opened at a population's first event

    def _write(self, file, text: str) -> None:
        try:
            file.write(text)
            file.flush()
        except OSError as err:
            _close_quietly(file)
            raise _file_error(err, Path(file.name)) from None

    def on_metrics(self, snapshot: MetricsSnapshot) -> None:
        if not snapshot.new_records or self._metrics.closed:
            return
        self._write(self._metrics, "".join(json.dumps(r.to_json()) + "\n" for r in snapshot.new_records))

    def on_event(self, event: SessionEvent) -> None:
        if self._events.closed:
            return
        self._write(self._events, json.dumps(event.to_json()) + "\n")
        if event.kind == "population":
            self._write_population(event)
        if event.kind == "rolled back" and not self._metrics.closed:
            self._metrics.close()
            truncate_metrics(self.run_dir, event.update)
            self._metrics = open_private(self.run_dir / METRICS, "a", encoding="utf-8")
        if event.kind == "rolled back" and "population_seq" in event.data:
            if self._population is not None and self._population.closed:
                return  # written no more, after a failure
            if self._population is not None:
                self._population.close()
                self._population = None  # opened again at the next change
            truncate_population(self.run_dir, event.data["population_seq"], event.update)

    def _write_population(self, event: SessionEvent) -> None:
        """population.jsonl: one line per change of a population (start, edit, freeze, clone,
        pbt, diverged) with the whole member table after it, so that it alone replays the
        lineage of every member. A resume's line, which restates its checkpoint's table, is
        written only where the file holds no lineage yet (a resume into a new directory)."""
        if self._population is None:
            path = self.run_dir / POPULATION
            if event.data.get("action") == "resumed" and path.exists() and path.stat().st_size > 0:
                return
            self._population = open_private(path, "a", encoding="utf-8")
        if self._population.closed:
            return
        line = {"update": event.update, "wall_time": round(event.wall_time, 4), "message": event.message,
                **event.data}
        self._write(self._population, json.dumps(line) + "\n")

    def close(self) -> None:
        _close_quietly(self._metrics)
        _close_quietly(self._events)
        if self._population is not None:
            _close_quietly(self._population)


def _close_quietly(file) -> None:
    """Close even when the last flush fails (a full disk): the session has reported it."""
    try:
        file.close()
    except OSError:
        pass
