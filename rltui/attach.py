"""`rltui attach RUN_DIR` (the dashboard, over a running job's control socket) and
`rltui serve RUN_DIR` (that dashboard in a browser, through textual-serve)."""

from __future__ import annotations

import os
import shlex
import socket
import sys
from pathlib import Path

from rltui.errors import report

LOOPBACK = ("127.0.0.1", "localhost", "::1")
SERVE_HINT = 'rltui serve needs textual-serve: pip install "rltui[serve]" (or: pip install textual-serve)'


def _error(message: str) -> int:
    return report(message)


def _in_a_browser() -> bool:
    """Run by `rltui serve` for a browser tab: textual-serve names its web driver."""
    return "web_driver" in os.environ.get("TEXTUAL_DRIVER", "")


def _unavailable(message: str, run_dir: Path | str) -> int:
    """The error line, and in a browser tab the same words on the page: the tab would
    otherwise wait on its splash screen for a dashboard that never comes."""
    code = _error(message)
    if _in_a_browser():
        show_unavailable(message, f"Its files stay in {os.path.abspath(run_dir)}. Press q to close.")
    return code


def show_unavailable(reason: str, hint: str) -> None:
    from rltui.ui.screens.unavailable import AttachUnavailableApp

    AttachUnavailableApp(reason, hint).run()


def cmd_attach(args) -> int:
    from rltui.config import ConfigError, build_config
    from rltui.session.remote import AttachError, RemoteSession
    from rltui.ui import can_show_dashboard
    from rltui.ui.themes import check_theme

    try:
        theme = check_theme(args.theme)
    except ValueError as err:
        return _error(str(err))
    try:
        remote = RemoteSession.connect(args.run_dir)
    except AttachError as err:
        return _unavailable(str(err), args.run_dir)
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
    return run_dashboard(remote, config, Path(args.run_dir), theme=theme, device_source=sampler)


def attach_command(run_dir: Path, theme: str | None = None) -> str:
    """The shell command textual-serve runs for each browser: this interpreter, attaching."""
    argv = [sys.executable, "-m", "rltui", "attach", os.path.abspath(run_dir)]
    if theme:
        argv += ["--theme", theme]
    return shlex.join(argv)


def _child_can_import_rltui() -> None:
    # A source checkout is importable here but not necessarily from the child's sys.path.
    root = str(Path(__file__).resolve().parents[1])
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if root not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [root, *paths]))


def make_server(run_dir: Path, host: str, port: int, theme: str | None = None):
    from textual_serve.server import Server

    _child_can_import_rltui()
    return Server(attach_command(run_dir, theme), host=host, port=port, title=f"rltui · {Path(run_dir).name}")


def cmd_serve(args) -> int:
    try:
        import textual_serve.server  # noqa: F401 - only to say what is missing, before anything else
    except ImportError:
        return _error(SERVE_HINT)
    from rltui.session.remote import AttachError, RemoteSession
    from rltui.ui.themes import check_theme

    if not 0 < args.port < 65536:
        return _error(f"--port: expected 1-65535, got {args.port}")
    try:
        check_theme(args.theme)
        remote = RemoteSession.connect(args.run_dir)  # a job must be listening now
    except (AttachError, ValueError) as err:
        return _error(str(err))
    # serve goes on after the run ends: open tabs keep its last state on screen, new ones
    # say it has ended. This terminal is told once, when it happens.
    remote.add_listener(RunEndWatcher(Path(args.run_dir)))
    if args.host not in LOOPBACK:
        print(f"rltui: warning: serving on {args.host}: anyone who can reach it can steer the run", file=sys.stderr)
    try:
        # Bound once before textual-serve starts: it prints "Serving ... on" before binding,
        # and a taken port would read as served, then fail.
        socket.create_server((args.host, args.port)).close()
        make_server(Path(args.run_dir), args.host, args.port, args.theme).serve()
    except OSError as err:  # the address is taken, or not this machine's
        return _error(f"cannot listen on {args.host}:{args.port}: {err.strerror or err}")
    finally:
        remote.close()
    return 0


class RunEndWatcher:
    """A SessionListener for `rltui serve`: one line on its terminal when the run ends
    (finished, failed, or its process gone)."""

    def __init__(self, run_dir: Path, out=None):
        self.run_dir = run_dir
        self.out = out
        self.said = False

    def on_state(self, state, message: str | None) -> None:
        if not state.is_final or self.said:
            return
        self.said = True
        why = f"{state.value}: {message}" if message else state.value
        print(
            f"rltui: {self.run_dir}: the run has ended ({why}); still serving: open tabs keep its last state, "
            "new tabs say it has ended (Ctrl+C stops serving)",
            file=self.out or sys.stderr, flush=True,
        )

    def on_metrics(self, snapshot) -> None:
        pass

    def on_event(self, event) -> None:
        pass
