"""Run the dashboard in the foreground, then let go of the session: stop an owned one
(bounded wait), or detach from an attached one, which goes on."""

from __future__ import annotations

import asyncio
import shlex
import signal
import sys
import threading
from pathlib import Path

from rich.console import Console
from rich.text import Text

from rltui.config.build import RunConfig
from rltui.errors import ExitCode
from rltui.headless import GuardedOutput
from rltui.runfiles import names
from rltui.runfiles.checkpoints import CheckpointStore
from rltui.runfiles.summary import checkpoint_failure_line, continue_line, return_text, summary_line
from rltui.session import MetricsSnapshot, SessionState
from rltui.session.interface import SessionClient
from rltui.ui.app import STOP_TIMEOUT, DashboardApp
from rltui.ui.run_status import LIVE


def run_dashboard(
    session: SessionClient, config: RunConfig, run_dir: Path, theme: str | None = None, *, device_source=None
) -> ExitCode:
    """Run the dashboard until the user quits, then let go of the session: stop an owned
    one and wait for it (bounded), or detach from an attached one, which goes on. OK, or
    ERROR if training, the UI or the final checkpoint failed. Raises ValueError for an
    unknown theme, before anything starts.

    SIGHUP (the terminal closed, an SSH connection dropped) is a quit with nobody left to
    ask, whatever is on screen: an owned run stops at the next chunk boundary and writes its
    final checkpoint (the wait is not bounded then), an attached one is left running. A
    terminal that fails a read or a write hangs up the same way (rltui.ui.terminal)."""
    app = DashboardApp(session, config, Path(run_dir), theme=theme, device_source=device_source)
    hung_up = threading.Event()

    def hang_up() -> None:
        if not session.outlives_client:
            session.stop()
        app.exit()

    def on_hangup(signum, frame):
        hung_up.set()
        try:
            loop = asyncio.get_running_loop()  # the app's, on this (the main) thread
        except RuntimeError:
            # The app has not started (it ends as soon as it does), or has ended. Either
            # way run_dashboard goes on to let go, stopping an owned session there: not
            # here, where this handler may have cut into that very call.
            app.exit()
            return
        # In the loop, not here: this handler may have cut into the app's own call to the
        # session, whose locks are not reentrant.
        loop.call_soon_threadsafe(hang_up)

    previous = signal.signal(signal.SIGHUP, on_hangup)
    try:
        try:
            app.run()
        except OSError:
            if not hung_up.is_set():
                raise  # the terminal is gone after a hang-up: the run still ends as it should
        finally:
            ended = _let_go(session, None if hung_up.is_set() else STOP_TIMEOUT)
    finally:
        signal.signal(signal.SIGHUP, previous)
    # The terminal may be gone (a hang-up): the last words must not fail the exit.
    console = Console(file=GuardedOutput(sys.stderr), soft_wrap=True, highlight=False)
    snapshot = app.latest
    failure = None if session.outlives_client else getattr(session, "checkpoint_failure", None)
    if snapshot is not None:
        if failure is not None and session.state is SessionState.FINISHED:
            console.print(Text(_failure_summary(snapshot, failure), style="bold red"))
        else:
            console.print(_summary(session.state, snapshot))
    if not ended:
        console.print(Text(f"The session did not stop within {STOP_TIMEOUT:.0f} s; leaving it.", style="yellow"))
    if session.state is SessionState.ERROR:
        console.print(Text(f"Training failed: {app.state_message or f'see {names.EVENTS}'}", style="bold red"))
    elif session.outlives_client and session.state in LIVE:
        console.print(
            Text(f"Detached; the run goes on ({session.state.value}). Attach again with: "
                 f"rltui attach {shlex.quote(str(run_dir))}")
        )
    console.print(Text(f"Run files: {run_dir}"))
    diverged = bool(getattr(session, "nonfinite", False))  # an owned session's; an attached run says its own
    go_on = _go_on(session.state, snapshot, failure, Path(run_dir), config.env, diverged=diverged,
                   lr=float(session.hparams.lr) if diverged else None)
    if go_on is not None:
        console.print(Text(go_on, style="dim"))
    failed = session.state is SessionState.ERROR or bool(app.return_code) or failure is not None
    return ExitCode.ERROR if failed else ExitCode.OK


def _failure_summary(snapshot: MetricsSnapshot, failure) -> str:
    verb = "Finished" if snapshot.update >= snapshot.total_updates else "Stopped"
    return checkpoint_failure_line(verb, snapshot.update, failure)


def _summary(state: SessionState, snapshot: MetricsSnapshot) -> str:
    """The words `--no-ui` ends with, for a run that ended; where it is, otherwise."""
    if state is SessionState.FINISHED:
        verb = "Finished" if snapshot.update >= snapshot.total_updates else "Stopped"
        return summary_line(verb, snapshot.update, snapshot.env_steps, return_text(snapshot))
    return f"At update {snapshot.update:,} ({snapshot.env_steps:,} env steps)."


def _go_on(state: SessionState, snapshot: MetricsSnapshot | None, failure, run_dir: Path, env: str, *,
           diverged: bool = False, lr: float | None = None) -> str | None:
    """How to train on from a run that ended, as `--no-ui` says it: only once it has ended
    without an error or a failed final checkpoint, and with a checkpoint to resume from (or,
    diverged, a way to start again)."""
    if state is not SessionState.FINISHED or failure is not None or snapshot is None:
        return None
    if CheckpointStore.for_run(run_dir).latest() is None and not diverged:
        return None  # quit before the first checkpoint: nothing to go on from
    return continue_line(run_dir, snapshot.env_steps, snapshot.update >= snapshot.total_updates, env,
                         diverged=diverged, lr=lr, total_env_steps=snapshot.total_env_steps)


def _let_go(session: SessionClient, timeout: float | None = STOP_TIMEOUT) -> bool:
    """False if an owned session did not stop within `timeout` (None: no bound)."""
    if session.outlives_client:
        session.close()  # detach: the job is not ours to stop
        return True
    if session.state is SessionState.IDLE:
        return True
    session.stop()  # a no-op for a session that has already ended
    return session.join(timeout=timeout)
