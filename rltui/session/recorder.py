"""Writes a run's files: metrics.jsonl (one record per update) and events.jsonl.

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


def truncate_metrics(run_dir: Path, last_update: int) -> None:
    """Keep metrics.jsonl's records up to `last_update`, where a resumed or rolled-back run
    goes on from, so the file stays one agent's history with updates in order. The records
    after it (written before a crash, or the updates a rollback undid) move to
    metrics.discarded.jsonl rather than being lost."""
    path = Path(run_dir) / "metrics.jsonl"
    if not path.exists():
        return
    kept, discarded = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line cut short by a crash
        in_history = isinstance(record, dict) and record.get("update", 0) <= last_update
        (kept if in_history else discarded).append(line + "\n")
    if discarded:
        with open(path.with_name(DISCARDED), "a", encoding="utf-8") as out:
            out.write("".join(discarded))
    tmp = path.with_suffix(".jsonl.tmp")
    tmp.write_text("".join(kept), encoding="utf-8")
    os.replace(tmp, path)


class RunRecorder(SessionListener):
    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self._metrics = open(self.run_dir / "metrics.jsonl", "a", encoding="utf-8")
        self._events = open(self.run_dir / "events.jsonl", "a", encoding="utf-8")

    def on_metrics(self, snapshot: MetricsSnapshot) -> None:
        if not snapshot.new_records or self._metrics.closed:
            return
        self._metrics.write("".join(json.dumps(r.to_json()) + "\n" for r in snapshot.new_records))
        self._metrics.flush()

    def on_event(self, event: SessionEvent) -> None:
        if self._events.closed:
            return
        self._events.write(json.dumps(event.to_json()) + "\n")
        self._events.flush()
        if event.kind == "rolled back" and not self._metrics.closed:
            self._metrics.close()
            truncate_metrics(self.run_dir, event.update)
            self._metrics = open(self.run_dir / "metrics.jsonl", "a", encoding="utf-8")

    def close(self) -> None:
        self._metrics.close()
        self._events.close()
