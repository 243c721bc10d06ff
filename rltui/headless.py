"""`rltui launch --no-ui`: a progress bar (or plain lines when not on a terminal) as a
listener of the session. Never imports textual."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from rltui.session import MetricsSnapshot, SessionEvent, SessionListener, SessionState, TrainingSession

EXIT_OK, EXIT_ERROR, EXIT_NONFINITE = 0, 1, 3


def _fmt_return(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


class ProgressListener(SessionListener):
    """Shows env steps, SPS, latest mean return and ETA."""

    def __init__(self, console: Console, total_env_steps: int, plain_interval: float = 5.0):
        self.console = console
        self.interactive = console.is_terminal
        self.plain_interval = plain_interval
        self._last_plain = 0.0
        self.latest_return: float | None = None
        self._lock = threading.Lock()
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.completed:,.0f}/{task.total:,.0f} steps"),
            TextColumn("{task.fields[sps]} SPS"),
            TextColumn("return {task.fields[ret]}"),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=console,
            transient=False,
            disable=not self.interactive,
        )
        self.task = self.progress.add_task("compiling", total=total_env_steps, sps="—", ret="—")

    def __enter__(self):
        self.progress.start()
        return self

    def __exit__(self, *exc):
        self.progress.stop()

    def on_state(self, state: SessionState, message: str | None) -> None:
        self.progress.update(self.task, description=state.value)

    def on_metrics(self, snapshot: MetricsSnapshot) -> None:
        self.latest_return = snapshot.latest_return
        ret = _fmt_return(snapshot.latest_return)
        self.progress.update(self.task, completed=snapshot.env_steps, sps=f"{snapshot.sps:,.0f}", ret=ret)
        now = time.monotonic()
        done = snapshot.update >= snapshot.total_updates
        if not self.interactive and (done or now - self._last_plain >= self.plain_interval):
            self._last_plain = now
            eta = snapshot.eta_seconds
            self.console.print(
                f"update {snapshot.update}/{snapshot.total_updates}  steps {snapshot.env_steps:,}  "
                f"sps {snapshot.sps:,.0f}  return {ret}  eta {'—' if eta is None else f'{eta:.0f}s'}",
                highlight=False,
            )

    def on_event(self, event: SessionEvent) -> None:
        if event.kind in ("compiled", "hparams", "paused", "resumed", "stopping", "warning", "error", "nonfinite"):
            style = {"error": "bold red", "nonfinite": "bold red", "warning": "yellow"}.get(event.kind, "dim")
            self.console.print(f"[{style}][update {event.update}] {event.message}[/]", highlight=False)


class _StopOnNonFinite(SessionListener):
    """Headless has nobody to lower the learning rate: stop instead of waiting paused."""

    def __init__(self, session: TrainingSession):
        self.session = session

    def on_event(self, event: SessionEvent) -> None:
        if event.kind == "nonfinite":
            self.session.stop()


def run_headless(session: TrainingSession, run_dir: Path, console: Console | None = None) -> int:
    """Run `session` to the end with a progress display; Ctrl+C or SIGTERM stop it at the
    next chunk boundary. Returns the process exit code."""
    console = console or Console(stderr=True)
    total = session.total_updates * session.backend.steps_per_update
    listener = ProgressListener(console, total)
    session.add_listener(listener)
    session.add_listener(_StopOnNonFinite(session))

    def on_sigterm(signum, frame):
        session.stop()

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    interrupted = False
    try:
        with listener:
            session.start()
            try:
                while not session.join(timeout=0.2):
                    pass
            except KeyboardInterrupt:
                interrupted = True
                console.print("[yellow]Stopping at the next chunk boundary… (Ctrl+C again to quit at once)[/]")
                session.stop()
                try:
                    while not session.join(timeout=0.2):
                        pass
                except KeyboardInterrupt:
                    console.print(f"[red]Aborted.[/] Run files: {run_dir}")
                    return 130
    finally:
        signal.signal(signal.SIGTERM, previous)

    last = session.updates_done
    if session.state is SessionState.ERROR:
        console.print(f"[bold red]Training failed:[/] {session.error}")
        console.print(f"Run files: {run_dir}")
        return EXIT_ERROR
    if session.nonfinite:
        console.print("[bold red]Training diverged (non-finite loss or gradient); stopped.[/]")
        console.print(f"Run files: {run_dir}")
        return EXIT_NONFINITE
    verb = "Stopped" if (interrupted or session.stopped_early) else "Finished"
    final = listener.latest_return
    console.print(
        f"{verb} after {last} updates ({session.env_steps:,} env steps), latest mean return {_fmt_return(final)}. "
        f"Run files: {run_dir}"
    )
    return EXIT_OK
