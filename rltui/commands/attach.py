"""`rltui attach RUN_DIR`: the dashboard, over a running job's control socket (also what
`rltui serve` runs for each browser tab)."""

from __future__ import annotations

import contextlib
import io
import os
import shlex
import sys
from pathlib import Path

from rltui.errors import ExitCode, report


def add_parser(sub) -> None:
    attach = sub.add_parser(
        "attach", help="open the dashboard on a running job",
        description="Open the dashboard on a job that is running (headless or not), through the control socket in "
        "its run directory. q detaches and leaves the job running; k stops the job (asks first). Several clients "
        "may watch and steer one job at once.",
    )
    attach.add_argument("run_dir", metavar="RUN_DIR", help="the running job's run directory")
    attach.add_argument("--theme", metavar="NAME", help="dashboard theme (default rltui-dark)")
    attach.set_defaults(run=cmd_attach)



def _error(message: str) -> int:
    return report(message)


def _in_a_browser() -> bool:
    """Run by `rltui serve` for a browser tab: textual-serve names its web driver."""
    return "web_driver" in os.environ.get("TEXTUAL_DRIVER", "")


def _unavailable(message: str, run_dir: Path | str, ended: bool = False) -> int:
    """The error line, and in a browser tab the same words on the page: the tab would
    otherwise wait on its splash screen for a dashboard that never comes. A tab on a run
    that has ended says it on the page only: serve has said it once on its terminal."""
    if not _in_a_browser():
        return _error(message)
    code = int(ExitCode.USAGE) if ended else _error(message)
    show_unavailable(message, f"Its files stay in {os.path.abspath(run_dir)}. Press q to close.")
    return code


def ended_reason(run_dir: Path | str, message: str) -> str:
    """For a run with no control socket to answer: that it has ended, how, and where its
    curves are, where its events say so (or, in a browser tab, where serve saw it live:
    its process is gone). Otherwise `message` (the run has not started, or is no run)."""
    from rltui.runfiles.discovery import socket_answers, state_of
    from rltui.runfiles.names import EVENTS
    from rltui.runfiles.reader import is_run_dir, read_jsonl

    path = Path(run_dir)
    if not path.is_dir() or socket_answers(path):
        return message
    state = state_of(read_jsonl(path / EVENTS, []), live=False)
    if state.name == "crashed" and not state.detail.startswith("error"):  # no final event
        if not (_in_a_browser() and is_run_dir(path)):
            return message
        how = "its process is gone, without a final event"
    else:
        how = f"{state.name}: {state.detail}" if state.detail else state.name
    return f"{run_dir}: the run has ended ({how}); its curves: rltui runs {shlex.quote(str(run_dir))}"


def show_unavailable(reason: str, hint: str) -> None:
    from rltui.ui.screens.unavailable import AttachUnavailableApp

    AttachUnavailableApp(reason, hint).run()


def cmd_attach(args) -> int:
    from rltui.config.build import build_config
    from rltui.config.keys import ConfigError
    from rltui.control.remote import AttachError, RemoteSession
    from rltui.session import SessionState
    from rltui.ui import can_show_dashboard
    from rltui.ui.themes import check_theme

    try:
        theme = check_theme(args.theme)
    except ValueError as err:
        return _error(str(err))
    try:
        remote = RemoteSession.connect(args.run_dir)
    except AttachError as err:
        message = ended_reason(args.run_dir, str(err))
        return _unavailable(message, args.run_dir, ended=message != str(err))
    try:
        config = build_config(remote.config, use_preset=False)
    except ConfigError as err:
        remote.close()
        message = f"{args.run_dir}: the run's configuration is not one this rltui knows ({err})"
        return _unavailable(message, args.run_dir)
    if not can_show_dashboard():
        remote.close()
        return _error(
            "the dashboard needs a terminal (standard input or output is redirected); "
            f"from a browser: rltui serve {shlex.quote(str(args.run_dir))}"
        )

    from rltui.session.devices import DeviceSampler
    from rltui.ui.runner import run_dashboard

    # The devices panel shows the job's process (memory), not this client's.
    sampler = DeviceSampler(pid=remote.pid or None)
    if not _in_a_browser():
        return run_dashboard(remote, config, Path(args.run_dir), theme=theme, device_source=sampler)
    # A browser tab's last words would land on serve's terminal, once per tab: kept only if
    # the dashboard itself failed (serve says it once when the run ends).
    words = io.StringIO()
    with contextlib.redirect_stderr(words):
        code = run_dashboard(remote, config, Path(args.run_dir), theme=theme, device_source=sampler)
    if code and remote.state is not SessionState.ERROR:
        sys.stderr.write(words.getvalue())
    return code
