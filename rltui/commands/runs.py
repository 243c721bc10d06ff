"""`rltui runs [DIR]`: its parser, and the loop that shows the runs view and attaches to the
live run picked in it, coming back to the list after a detach."""

from __future__ import annotations

import sys
from pathlib import Path

from rltui.errors import ExitCode, UsageError
from rltui.runfiles.discovery import check_root, scan_runs
from rltui.runfiles.loading import RunCache
from rltui.runfiles.names import CONFIG, METRICS
from rltui.runs_view.rows import AttachRequest


def cmd_runs(args) -> int:
    root = Path(args.dir)
    check_root(root)
    if not scan_runs(root):
        print(f"no runs in {root} (a run directory holds {METRICS} or {CONFIG})")
        return ExitCode.OK
    from rltui.ui import can_show_dashboard
    from rltui.ui.themes import check_theme

    try:
        theme = check_theme(getattr(args, "theme", None))
    except ValueError as err:
        raise UsageError(str(err)) from None

    if not can_show_dashboard():
        raise UsageError("rltui runs needs a terminal (standard input or output is redirected); "
                         f"for a table: rltui compare {root}/*")
    from rltui.ui.screens.runs import RunsApp

    cache, state = RunCache(), None
    while True:
        app = RunsApp(root, cache=cache, theme=theme, state=state)
        result = app.run()
        if not isinstance(result, AttachRequest):
            return app.return_code or ExitCode.OK
        state = app.runs_screen.list_state()  # the list comes back as it was left
        from argparse import Namespace

        from rltui.commands.attach import cmd_attach

        # The dashboard in this terminal; detaching from it comes back to the list.
        code = cmd_attach(Namespace(run_dir=str(result.run_dir), theme=theme))
        if code:
            print("rltui: back to the runs list", file=sys.stderr)


def add_parser(sub) -> None:
    runs = sub.add_parser(
        "runs", help="list runs and overlay their curves",
        description="List every run in DIR (default runs/) with its state, env steps, latest and best return and "
                    "wall time; select runs (space) to overlay their curves or group them by a config key into a "
                    "mean (t band) or IQM (bootstrap band); Enter attaches to a live run or opens a finished run's "
                    "curves. Run directories are only read.",
    )
    runs.add_argument("dir", metavar="DIR", nargs="?", default="runs", help="a directory of runs (default runs)")
    runs.add_argument("--theme", metavar="NAME", help="theme (default rltui-dark)")
    runs.set_defaults(run=cmd_runs)
