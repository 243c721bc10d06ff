"""`rltui launch --no-ui`: a progress bar (or plain lines when not on a terminal) as a
listener of the session. Never imports textual."""

from __future__ import annotations

import contextlib
import errno
import math
import os
import select
import shlex
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn
from rich.text import Text

from rltui.errors import ExitCode
from rltui.runfiles.summary import (
    _fmt_eta,
    checkpoint_failure_line,
    continue_line,
    latest_checkpoint_text,
    population_lines,
    return_text,
    summary_line,
)
from rltui.session import (
    MetricsSnapshot,
    SessionEvent,
    SessionListener,
    SessionState,
    TrainingSession,
)
from rltui.session.events import repeats_another_event
from rltui.session.recorder import record_abort
from trainers.metrics_spec import EVAL_RETURN, METRIC_SPECS

# Signals that stop a run at the next chunk boundary, with a final checkpoint. SIGHUP (the
# terminal closed, an SSH connection dropped) is one: nobody is left to watch the run.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
OUTPUT_CLOSED = "output closed; training goes on"


class GuardedOutput:
    """The display's stream (stderr), for a reader that may go away: a pipe whose reader
    exits (`| head -1`), a terminal that hangs up. The first write that fails because the
    reader is gone (`reader_gone`) points the stream's file descriptor (and standard output,
    when it is the same pipe) at the null device, so that no later write anywhere in the
    process fails, and calls `on_closed` once; the run itself goes on. A write that would
    block (a terminal another process made non-blocking) or was interrupted waits for room
    and goes on, as a blocking write would; any other failure loses that write only. Any
    other attribute is the stream's."""

    def __init__(self, stream: TextIO, on_closed: Callable[[], None] = lambda: None):
        self._stream = stream
        self._on_closed = on_closed
        self._lock = threading.Lock()
        self.closed_output = False

    def write(self, text: str) -> int:
        while not self.closed_output:
            try:
                return self._stream.write(text)
            except (BlockingIOError, InterruptedError):
                self._wait_for_room()
            except (OSError, ValueError) as err:  # ValueError: the stream itself was closed
                if reader_gone(err):
                    self._lost()
                break
        return len(text)

    def flush(self) -> None:
        while not self.closed_output:
            try:
                self._stream.flush()
                return
            except (BlockingIOError, InterruptedError):
                self._wait_for_room()
            except (OSError, ValueError) as err:
                if reader_gone(err):
                    self._lost()
                return

    def _wait_for_room(self) -> None:
        try:
            fd = self._stream.fileno()
        except (OSError, ValueError):
            return  # no descriptor to wait on: try again at once
        with contextlib.suppress(OSError, ValueError):  # a descriptor gone bad fails the retry instead
            select.select([], [fd], [])

    def _lost(self) -> None:
        with self._lock:
            if self.closed_output:
                return
            self.closed_output = True
        try:
            fd = self._stream.fileno()
            targets = [fd, 1] if fd != 1 and _same_file(fd, 1) else [fd]
            devnull = os.open(os.devnull, os.O_WRONLY)
            for target in targets:
                os.dup2(devnull, target)
            os.close(devnull)
        except (OSError, ValueError):
            pass
        self._on_closed()

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


# What a write fails with once its reader has gone for good: a terminal hung up (EIO,
# ENXIO), a pipe's reader exited (EPIPE), the descriptor closed (EBADF).
_READER_GONE = frozenset({errno.EIO, errno.EPIPE, errno.ENXIO, errno.EBADF})


def reader_gone(err: OSError | ValueError) -> bool:
    """Whether `err`, from writing or reading a stream, says its other end is gone for good
    (a ValueError: the stream itself was closed)."""
    return not isinstance(err, OSError) or err.errno in _READER_GONE


def _same_file(a: int, b: int) -> bool:
    try:
        sa, sb = os.fstat(a), os.fstat(b)
    except OSError:
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


class InterruptedBeforeTraining(KeyboardInterrupt):
    """Ctrl+C stopped the run before its first update (during the compile): the run ends
    as a Ctrl+C during start-up does, quietly with exit code 130 (`rltui.cli.entry`), and
    its run directory, holding no training, is removed."""


class ProgressListener(SessionListener):
    """Shows env steps, SPS, latest mean return and ETA. The ETA is the session's (from the
    latest chunk's speed), shown from the second chunk on: the first is a single update that
    also pays one-off start costs, and its speed would put the ETA several times too far."""

    def __init__(self, console: Console, total_env_steps: int, plain_interval: float = 5.0):
        self.console = console
        self.interactive = console.is_terminal
        self.plain_interval = plain_interval
        self._last_plain = 0.0
        self.latest_return = "—"  # as return_text gives it
        self.latest_eval: float | None = None  # the latest evaluation's return (eval_every_updates)
        self.population = None  # a population's latest PopulationView
        self._chunks = 0
        self._stopping = False
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.completed:,.0f}/{task.total:,.0f} steps"),
            TextColumn("{task.fields[sps]} SPS"),
            TextColumn("return {task.fields[ret]}"),
            TextColumn("ETA {task.fields[eta]}"),
            console=console,
            transient=False,
            disable=not self.interactive,
        )
        self.task = self.progress.add_task("compiling", total=total_env_steps, sps="—", ret="—", eta="—")

    def __enter__(self):
        self.progress.start()
        return self

    def __exit__(self, *exc):
        self.progress.stop()

    def abort(self) -> None:
        """A second Ctrl+C: the bar's last frame says so, and stops before the final words."""
        self.progress.update(self.task, description="aborted", eta="—")
        self.progress.stop()

    def on_state(self, state: SessionState, message: str | None) -> None:
        self._stopping = self._stopping or state is SessionState.STOPPING
        description = "stopped" if state is SessionState.FINISHED and self._stopping else state.value
        cut_short = state is SessionState.ERROR or description == "stopped"
        self.progress.update(self.task, description=description, **({"eta": "—"} if cut_short else {}))

    def on_metrics(self, snapshot: MetricsSnapshot) -> None:
        self.population = snapshot.population
        self.latest_return = ret = return_text(snapshot)
        for record in snapshot.new_records:
            value = record.values.get(EVAL_RETURN)
            if value is not None and math.isfinite(value):
                self.latest_eval = value
        if self.latest_eval is not None:  # shown once a run evaluates (eval_every_updates)
            ret = f"{ret} · eval {METRIC_SPECS[EVAL_RETURN].format(self.latest_eval)}"
        self._chunks += 1
        done = snapshot.update >= snapshot.total_updates
        eta = None if self._chunks < 2 and not done else snapshot.eta_seconds
        self.progress.update(
            self.task, completed=snapshot.env_steps, sps=f"{snapshot.sps:,.0f}", ret=ret, eta=_fmt_eta(eta)
        )
        now = time.monotonic()
        if not self.interactive and (done or now - self._last_plain >= self.plain_interval):
            self._last_plain = now
            self.console.print(
                f"update {snapshot.update}/{snapshot.total_updates}  steps {snapshot.env_steps:,}  "
                f"sps {snapshot.sps:,.0f}  return {ret}  eta {'—' if eta is None else f'{eta:.0f}s'}",
                highlight=False,
            )

    def on_event(self, event: SessionEvent) -> None:
        if repeats_another_event(event):
            return
        if event.kind in ("compiled", "hparams", "paused", "resumed", "stopping", "warning", "error", "nonfinite",
                          "checkpoint", "rolled back", "population"):
            style = {"error": "bold red", "nonfinite": "bold red", "warning": "yellow"}.get(event.kind, "dim")
            self.console.print(Text(f"[update {event.update}] {event.message}", style=style), highlight=False)


class StopOnNonFinite(SessionListener):
    """Headless has nobody to lower the learning rate: stop instead of waiting paused."""

    def __init__(self, session: TrainingSession):
        self.session = session

    def on_event(self, event: SessionEvent) -> None:
        if event.kind == "nonfinite":
            self.session.stop()


def run_headless(
    session: TrainingSession,
    run_dir: Path | None,
    console: Console | None = None,
    *,
    attachable: bool = False,
    peer_label: str | None = None,
    on_abort: Callable[[], None] | None = None,
    second_interrupt_quits: bool = True,
) -> int:
    """Run `session` to the end with a progress display. Ctrl+C or SIGTERM stop it at the
    next chunk boundary; a second Ctrl+C quits at once. Returns the process exit code.
    `attachable`: the run listens on its control socket; say how to attach.
    `peer_label` ("process I of N"): one process of a multi-process run; it ends by printing
    the digest of its parameters, equal on every process. `run_dir` None: process 0 writes
    the run files, this process none. `on_abort`: what must still happen when a second Ctrl+C
    quits at once (remove the control socket). `second_interrupt_quits` False (the Python API,
    whose process may be a notebook's kernel): a second Ctrl+C waits for the boundary too.

    A closed output does not end the run: the display goes quiet, a warning event says so,
    and the run goes on to its end and final checkpoint, as under nohup. A run whose last
    checkpoint failed exits 1, saying what is on disk."""
    if console is None:
        output = GuardedOutput(sys.stderr, lambda: session.warn(OUTPUT_CLOSED))
        console = Console(file=output, soft_wrap=True)
    if attachable:
        console.print(Text(f"Dashboard from another terminal: rltui attach {shlex.quote(str(run_dir))}"), style="dim")
    total = session.total_updates * session.backend.steps_per_update
    listener = ProgressListener(console, total)
    session.add_listener(listener)
    session.add_listener(StopOnNonFinite(session))
    interrupts = []
    after_the_end = []  # signals once the run's files are complete (its loggers may still be closing)

    def on_signal(signum, frame):
        if session.wound_up:
            # Nothing is left to save: no stop, and no abort to record. A second signal quits
            # at once (a logger's upload, say, can take long), with the run's own exit code.
            if not after_the_end and (signum != signal.SIGINT or second_interrupt_quits):
                after_the_end.append(signum)
                again = " (Ctrl+C again to quit now)" if signum == signal.SIGINT else ""
                console.print(Text(f"The run has ended and its files are complete; closing…{again}", style="dim"))
                return
            if signum == signal.SIGINT and not second_interrupt_quits:
                return
            if on_abort is not None:
                on_abort()
            console.print(Text(f"Quit; the run's files are complete.{f' Run files: {run_dir}' if run_dir else ''}"),
                          style="dim")
            os._exit(exit_code_of(session))
        if signum == signal.SIGINT and interrupts and not second_interrupt_quits:
            console.print(Text("Still stopping at the next chunk boundary…", style="yellow"))
            return
        if signum == signal.SIGINT and interrupts:
            listener.abort()
            if on_abort is not None:
                on_abort()
            if run_dir:
                kept = latest_checkpoint_text(run_dir)
                record_abort(run_dir, session.event_now(
                    "aborted", f"aborted by a second Ctrl+C, without a final checkpoint; {kept}"))
                console.print(Text(f"Aborted without a final checkpoint; {kept}. Run files: {run_dir}", style="red"))
            else:
                console.print(Text("Aborted.", style="red"))
            os._exit(ExitCode.INTERRUPTED)  # run files are flushed at every chunk boundary
        interrupts.append(signum)
        if signum == signal.SIGINT:
            again = " (Ctrl+C again to quit at once)" if second_interrupt_quits else ""
            console.print(Text(f"Stopping at the next chunk boundary…{again}", style="yellow"))
        session.stop()

    # Signals reach the main thread only (the Python API may train from another): there the
    # process's own handlers stay.
    in_main = threading.current_thread() is threading.main_thread()
    previous = {sig: signal.signal(sig, on_signal) for sig in STOP_SIGNALS} if in_main else {}
    try:
        with listener:
            session.start()
            while not session.join(timeout=0.2):
                pass
    finally:
        if not session.join(0):
            # Leaving early (an exception on this thread): the session still stops at a chunk
            # boundary and writes its final checkpoint before the process goes.
            session.stop()
            session.join()
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    if interrupts and interrupts[0] == signal.SIGINT and session.state is SessionState.FINISHED \
            and session.updates_done == session.start_update:
        raise InterruptedBeforeTraining

    def finish(message: Text, code: int) -> int:
        console.print(message)
        if listener.population is not None:
            console.print(Text("Members, best latest return first:"))
            for line in population_lines(listener.population):
                console.print(Text(line), highlight=False)
        if peer_label and code == ExitCode.OK:
            console.print(Text(f"{peer_label}: parameters sha256 {session.backend.params_digest()}"))
        console.print(Text(f"Run files: {run_dir}" if run_dir else f"{peer_label}: run files are written by process 0"))
        if run_dir and code in (ExitCode.OK, ExitCode.DIVERGED) and session.updates_done > session.start_update:
            reached = session.updates_done >= session.total_updates
            go_on = continue_line(run_dir, session.env_steps, reached, str(session.describe().get("env", "")),
                                  diverged=session.nonfinite, lr=float(session.hparams.lr),
                                  total_env_steps=session.total_updates * session.backend.steps_per_update)
            console.print(Text(go_on, style="dim"))
        return code

    failure, code = session.checkpoint_failure, exit_code_of(session)
    if session.state is SessionState.ERROR:
        if session.error_checkpoint:
            console.print(Text(f"Checkpoint after the error: {session.error_checkpoint}.", style="dim"))
        return finish(Text(f"Training failed: {session.error}", style="bold red"), code)
    if session.nonfinite:
        return finish(Text("Training diverged (non-finite loss or gradient); stopped.", style="bold red"), code)
    verb = "Stopped" if session.stopped_early else "Finished"
    if failure is not None:
        return finish(Text(checkpoint_failure_line(verb, session.updates_done, failure), style="bold red"), code)
    return finish(Text(summary_line(verb, session.updates_done, session.env_steps, listener.latest_return)), code)


def exit_code_of(session: TrainingSession) -> ExitCode:
    """The exit code of a run that has ended, as its summary line goes with it."""
    if session.state is SessionState.ERROR:
        return ExitCode.ERROR
    if session.nonfinite:
        return ExitCode.DIVERGED
    return ExitCode.ERROR if session.checkpoint_failure is not None else ExitCode.OK
