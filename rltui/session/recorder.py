"""Writes a run's files: metrics.jsonl (one record per update) and events.jsonl.

A listener like any other; both the dashboard and `--no-ui` attach it. Lines are flushed
after every chunk so a crash loses at most the chunk in flight.
"""

from __future__ import annotations

import json
from pathlib import Path

from rltui.session.controller import SessionListener
from rltui.session.events import SessionEvent
from rltui.session.metrics import MetricsSnapshot


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

    def close(self) -> None:
        self._metrics.close()
        self._events.close()
