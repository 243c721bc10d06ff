"""Loggers beside training: each runs on a thread of its own, fed by a session listener at
chunk boundaries, so neither a logger that is slow to start (W&B with no network) nor one
slow to write holds up training. A logger that fails (a full disk, a missing library, a
network that went away), or that has not started within `START_TIMEOUT` seconds, is
reported once, in one line, as a warning event and switched off; training goes on.
"""

from __future__ import annotations

import importlib
import os
import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from rltui.config.logger_kinds import ALWAYS, LOGGERS
from rltui.loggers.base import START_TIMEOUT, Logger, event_kind
from rltui.session.controller import SessionListener
from rltui.session.events import SessionEvent, SessionState
from rltui.session.metrics import MetricsSnapshot
from trainers.env_import import one_line

# Seconds the end of a run waits for its loggers to write out what they hold: long enough for
# W&B to upload a run's last records (a run left unfinished there reads as crashed), short
# enough that a logger whose network went away does not keep the process, and with it the
# run directory's lock, for long (a run whose terminal hung up is resumed from elsewhere).
CLOSE_TIMEOUT = 30.0


class _Worker:
    """One logger on a thread of its own: it starts there, then writes what the session hands
    it, in order. The session thread only queues; nothing it does waits on the logger."""

    def __init__(self, label: str, opener: Callable[[], Logger], warn: Callable[[str], None], deadline: float):
        self.label = label
        self.deadline = deadline  # by when it must have started
        self._warn = warn
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self.state = "starting"  # then "running", or "off" (failed, or given up on)
        self.thread = threading.Thread(target=self._run, args=(opener,), name=f"rltui-logger-{label}", daemon=True)
        self.thread.start()

    def submit(self, method: str, *args) -> None:
        if self.state != "off":
            self._queue.put((method, args))

    def end(self) -> None:
        self._queue.put(None)

    def give_up(self) -> bool:
        """Off, if it has not started yet; True if this call switched it off."""
        with self._lock:
            if self.state != "starting":
                return False
            self.state = "off"
            return True

    def _run(self, opener: Callable[[], Logger]) -> None:
        try:
            logger = opener()
        except Exception as exc:  # noqa: BLE001 - a logger that cannot start is a warning, not a failed run
            if self.give_up():
                self._warn(f"logger {self.label} could not start ({one_line(exc)}); the run goes on without it")
            return
        with self._lock:
            started = self.state == "starting"
            if started:
                self.state = "running"
        if started:
            while (item := self._queue.get()) is not None:
                method, args = item
                if not self._call(logger, method, *args):
                    break
        _close_quietly(logger)  # once, whether it ended, failed or started too late

    def _call(self, logger: Logger, method: str, *args) -> bool:
        """False if the logger failed: it is off, and is written to no more (not even flushed)."""
        try:
            getattr(logger, method)(*args)
            return True
        except Exception as exc:  # noqa: BLE001 - any failure of a logger: it goes off, training goes on
            self.state = "off"
            self._warn(f"logger {self.label} failed ({one_line(exc)}); it is off for the rest of this run")
            return False


class LoggerListener(SessionListener):
    """Feeds the session's records and events to each logger, each on its own thread; `warn`
    (the session's, callable from any thread) logs a warning event for a logger that failed,
    or that did not start within `start_timeout` seconds, which is then off for the rest of
    the run. `loggers` are started already; `starting` are (name, start it) to call on
    their threads. At the session's end, it waits up to `close_timeout` seconds for them to
    write out what they hold."""

    def __init__(self, loggers: Iterable[Logger], warn: Callable[[str], None], steps_per_update: int, *,
                 starting: Iterable[tuple[str, Callable[[], Logger]]] = (), start_timeout: float = START_TIMEOUT,
                 close_timeout: float = CLOSE_TIMEOUT, clock: Callable[[], float] = time.monotonic):
        self._warn = warn
        self._steps_per_update = steps_per_update
        self._clock = clock
        self._start_timeout = start_timeout
        self._close_timeout = close_timeout
        deadline = clock() + start_timeout
        openers = [(logger.label, lambda logger=logger: logger) for logger in loggers] + list(starting)
        self._workers = [_Worker(label, opener, warn, deadline) for label, opener in openers]

    @property
    def active(self) -> tuple[str, ...]:
        return tuple(worker.label for worker in self._workers if worker.state != "off")

    def on_metrics(self, snapshot: MetricsSnapshot) -> None:
        self._check_starts()
        if not snapshot.new_records or not self._workers:
            return
        records = [record.to_json() for record in snapshot.new_records]
        for worker in self._workers:
            worker.submit("write_records", records)
            worker.submit("flush")

    def on_event(self, event: SessionEvent) -> None:
        step = int(event.data.get("env_steps", event.update * self._steps_per_update))
        kind = event_kind(event.kind, event.data)
        for worker in self._workers:
            worker.submit("write_event", step, kind, event.message)

    def on_state(self, state: SessionState, message: str | None) -> None:
        if state.is_final:
            self.close()

    def _check_starts(self) -> None:
        now = self._clock()
        for worker in self._workers:
            if worker.state == "starting" and now >= worker.deadline and worker.give_up():
                self._warn(f"logger {worker.label} did not start within {self._start_timeout:g} s; "
                           "the run goes on without it")

    def close(self) -> None:
        """Bounded: a logger that has not written out by then is left to its (daemon) thread."""
        workers, self._workers = self._workers, []
        for worker in workers:
            worker.end()
        deadline = self._clock() + self._close_timeout
        for worker in workers:
            if worker.state != "off":  # one given up on may never return from its start
                worker.thread.join(max(0.0, deadline - self._clock()))


def _close_quietly(logger: Logger) -> None:
    try:
        logger.close()
    except Exception:  # noqa: BLE001 - already reported, or the run is ending: nothing left to tell
        pass


def open_loggers(names: Iterable[str], run_dir: Path, config: Mapping[str, Any], steps_per_update: int,
                 warn: Callable[[str], None]) -> LoggerListener | None:
    """A listener for the loggers `names` (None when there are none besides jsonl). Each
    starts on its own thread, beside training; one that cannot start is reported with
    `warn` and left out."""
    starting = [(name, lambda name=name: _open(name, Path(run_dir), config)) for name in names if name != ALWAYS]
    if not starting:
        return None
    timeouts = [start_timeout(name) for name, _ in starting]
    return LoggerListener((), warn, steps_per_update, starting=starting, start_timeout=max(timeouts))


def start_timeout(name: str) -> float:
    """How long logger `name` may take to start: its library's own bound where the user set
    one (W&B's)."""
    variable = LOGGERS[name].start_timeout_variable
    if variable is not None:
        try:
            return float(os.environ.get(variable, ""))
        except ValueError:
            pass
    return START_TIMEOUT


def _open(name: str, run_dir: Path, config: Mapping[str, Any]) -> Logger:
    """Logger `name`, started: its writer is imported here, on the logger's own thread."""
    if name not in LOGGERS:
        raise ValueError(f"unknown logger {name!r}")
    writer = importlib.import_module(f"rltui.loggers.{LOGGERS[name].writer}")
    return writer.open_logger(run_dir, config)
