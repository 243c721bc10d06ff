"""Writes a run's files: metrics.jsonl (one record per update), events.jsonl, and for a
population population.jsonl.

A listener like any other; both the dashboard and `--no-ui` attach it. Lines are flushed
after every chunk so a crash loses at most the chunk in flight.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from rltui.session.controller import SessionListener
from rltui.session.events import SessionEvent
from rltui.session.metrics import MetricsSnapshot

DISCARDED = "metrics.discarded.jsonl"
POPULATION = "population.jsonl"


class RunFileError(OSError):
    """A run file could not be written; says which, without an errno number."""

    def __str__(self) -> str:
        return f"cannot write {self.filename}: {self.strerror}"


def _file_error(err: OSError, path: Path) -> RunFileError:
    return RunFileError(err.errno, err.strerror or str(err), str(path))


def _write_atomic(path: Path, text: str) -> None:
    """Replace `path` with `text` whole, or leave it as it was (a full disk, a crash)."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise _file_error(err, path) from None


def truncate_metrics(run_dir: Path, last_update: int) -> None:
    """Keep metrics.jsonl's records up to `last_update`, where a resumed or rolled-back run
    goes on from, so the file stays one agent's history with updates in order. The records
    after it (written before a crash, or the updates a rollback undid) move to
    metrics.discarded.jsonl rather than being lost. Each file is replaced whole, so a full
    disk leaves both as they were; raises RunFileError naming the file."""
    path = Path(run_dir) / "metrics.jsonl"
    if not path.exists():
        return
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise _file_error(err, path) from None
    kept, discarded = [], []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line cut short by a crash
        in_history = isinstance(record, dict) and record.get("update", 0) <= last_update
        (kept if in_history else discarded).append(line + "\n")
    if len(kept) == len(lines):
        return  # nothing to move: no write, which a full disk could refuse
    if discarded:
        aside = path.with_name(DISCARDED)
        try:
            before = aside.read_text(encoding="utf-8") if aside.exists() else ""
        except OSError as err:
            raise _file_error(err, aside) from None
        if before and not before.endswith("\n"):
            before += "\n"
        # Before metrics.jsonl: a failure between the two keeps every record somewhere.
        _write_atomic(aside, before + "".join(discarded))
    _write_atomic(path, "".join(kept))


def record_abort(run_dir: Path, event: SessionEvent) -> None:
    """Appends `event` to events.jsonl from the thread that aborts the process, which exits
    at once after it: the recorder's own file belongs to the session thread, and an appended
    line of its own keeps the log whole. Best effort: an abort never waits on a full disk."""
    try:
        with open(Path(run_dir) / "events.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps(event.to_json()) + "\n")
    except OSError:
        pass


class RunRecorder(SessionListener):
    """Raises RunFileError (which ends the session in the ERROR state) when a file cannot
    be written; that file is then closed and written no more, and `close` never raises."""

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self._metrics = open(self.run_dir / "metrics.jsonl", "a", encoding="utf-8")
        self._events = open(self.run_dir / "events.jsonl", "a", encoding="utf-8")
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
            self._metrics = open(self.run_dir / "metrics.jsonl", "a", encoding="utf-8")

    def _write_population(self, event: SessionEvent) -> None:
        """population.jsonl: one line per change of a population (start, edit, freeze, clone,
        pbt, diverged) with the whole member table after it, so that it alone replays the
        lineage of every member."""
        if self._population is None:
            self._population = open(self.run_dir / POPULATION, "a", encoding="utf-8")
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
