"""Run the dashboard in the foreground, then let go of the session: stop an owned one
(bounded wait), or detach from an attached one, which goes on."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.text import Text

from rltui.config import RunConfig
from rltui.headless import return_text, summary_line
from rltui.session import MetricsSnapshot, SessionState
from rltui.session.interface import SessionClient
from rltui.ui.app import LIVE, STOP_TIMEOUT, DashboardApp


def run_dashboard(
    session: SessionClient, config: RunConfig, run_dir: Path, theme: str | None = None, *, device_source=None
) -> int:
    """Run the dashboard until the user quits, then let go of the session: stop an owned
    one and wait for it (bounded), or detach from an attached one, which goes on. 0, or 1
    if training or the UI failed. Raises ValueError for an unknown theme, before anything
    starts."""
    app = DashboardApp(session, config, Path(run_dir), theme=theme, device_source=device_source)
    try:
        app.run()
    finally:
        ended = _let_go(session)
    console = Console(stderr=True, soft_wrap=True, highlight=False)
    snapshot = app.latest
    if snapshot is not None:
        console.print(_summary(session.state, snapshot))
    if not ended:
        console.print(Text(f"The session did not stop within {STOP_TIMEOUT:.0f} s; leaving it.", style="yellow"))
    if session.state is SessionState.ERROR:
        console.print(Text(f"Training failed: {app.state_message or 'see events.jsonl'}", style="bold red"))
    elif session.outlives_client and session.state in LIVE:
        console.print(Text(f"Detached; the run goes on ({session.state.value}). Attach again with: rltui attach {run_dir}"))
    console.print(Text(f"Run files: {run_dir}"))
    failed = session.state is SessionState.ERROR or (app.return_code or 0) != 0
    return 1 if failed else 0


def _summary(state: SessionState, snapshot: MetricsSnapshot) -> str:
    """The words `--no-ui` ends with, for a run that ended; where it is, otherwise."""
    if state is SessionState.FINISHED:
        verb = "Finished" if snapshot.update >= snapshot.total_updates else "Stopped"
        return summary_line(verb, snapshot.update, snapshot.env_steps, return_text(snapshot))
    return f"At update {snapshot.update:,} ({snapshot.env_steps:,} env steps)."


def _let_go(session: SessionClient) -> bool:
    """False if an owned session did not stop in time."""
    if session.outlives_client:
        session.close()  # detach: the job is not ours to stop
        return True
    if session.state is SessionState.IDLE:
        return True
    session.stop()  # a no-op for a session that has already ended
    return session.join(timeout=STOP_TIMEOUT)
