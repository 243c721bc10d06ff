"""`rltui attach RUN_DIR` (the dashboard, over a running job's control socket) and
`rltui serve RUN_DIR` (that dashboard in a browser, through textual-serve)."""

from __future__ import annotations

import os
import shlex
import socket
import sys
from pathlib import Path

EXIT_USAGE = 2
LOOPBACK = ("127.0.0.1", "localhost", "::1")
SERVE_HINT = 'rltui serve needs textual-serve: pip install "rltui[serve]" (or: pip install textual-serve)'


def _error(message: str) -> int:
    print(f"rltui: error: {message}", file=sys.stderr)
    return EXIT_USAGE


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
        return _error(str(err))
    try:
        config = build_config(remote.config, use_preset=False)
    except ConfigError as err:
        remote.close()
        return _error(f"{args.run_dir}: the run's configuration is not one this rltui knows ({err})")
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
        RemoteSession.connect(args.run_dir).close()  # a job must be listening now
    except (AttachError, ValueError) as err:
        return _error(str(err))
    if args.host not in LOOPBACK:
        print(f"rltui: warning: serving on {args.host}: anyone who can reach it can steer the run", file=sys.stderr)
    try:
        # Bound once before textual-serve starts: it prints "Serving ... on" before binding,
        # and a taken port would read as served, then fail.
        socket.create_server((args.host, args.port)).close()
        make_server(Path(args.run_dir), args.host, args.port, args.theme).serve()
    except OSError as err:  # the address is taken, or not this machine's
        return _error(f"cannot listen on {args.host}:{args.port}: {err.strerror or err}")
    return 0
