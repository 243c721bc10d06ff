"""`rltui serve RUN_DIR`: `rltui attach RUN_DIR` in web browsers, through textual-serve, behind a
token."""

from __future__ import annotations

import os
import shlex
import socket
import sys
from pathlib import Path
from urllib.parse import urlsplit

from rltui.commands.attach import ended_reason
from rltui.errors import ExitCode, report, warn

LOOPBACK = ("127.0.0.1", "localhost", "::1")
SERVE_HINT = 'rltui serve needs textual-serve: pip install "rltui[serve]" (or: pip install textual-serve)'


def _error(message: str) -> int:
    return report(message)


def add_parser(sub) -> None:
    serve = sub.add_parser(
        "serve", help="serve a running job's dashboard to a web browser",
        description="Serve `rltui attach RUN_DIR` to web browsers with textual-serve: each browser tab watches and "
        "steers the existing job. Needs the serve extra: pip install \"rltui[serve]\".",
    )
    serve.add_argument("run_dir", metavar="RUN_DIR", help="the running job's run directory")
    serve.add_argument(
        "--host", default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: this machine only; on another, the token crosses the "
        "network in plain HTTP unless HTTPS is put in front)",
    )
    serve.add_argument("--port", type=int, default=8000, help="TCP port to listen on (default 8000)")
    serve.add_argument(
        "--public-url", metavar="URL",
        help="the address browsers open, for every page to point at (behind a proxy or tunnel that changes it; "
        "default: the address each browser used)",
    )
    access = serve.add_mutually_exclusive_group()
    access.add_argument(
        "--token", metavar="TOKEN",
        help="the token every request must carry (default: a random one, printed in the address to open; "
        "other users see a command line: set RLTUI_SERVE_TOKEN instead to keep it from them)",
    )
    access.add_argument(
        "--no-token", action="store_true",
        help="serve without a token: anyone who can reach the address, every user of this machine included, "
        "can steer the run",
    )
    serve.add_argument("--theme", metavar="NAME", help="dashboard theme (default rltui-dark)")
    serve.add_argument("--verbose", action="store_true", help="log every HTTP request")
    serve.set_defaults(run=cmd_serve)


def attach_command(run_dir: Path, theme: str | None = None) -> str:
    """The shell command textual-serve runs for each browser: this interpreter, attaching."""
    argv = [sys.executable, "-m", "rltui", "attach", os.path.abspath(run_dir)]
    if theme:
        argv += ["--theme", theme]
    return shlex.join(argv)


def _child_can_import_rltui() -> None:
    # A source checkout is importable here but not necessarily from the child's sys.path.
    root = str(Path(__file__).resolve().parents[2])
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if root not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [root, *paths]))


def make_server(run_dir: Path, host: str, port: int, theme: str | None = None, *,
                public_url: str | None = None, verbose: bool = False, out=None, token: str | None = None):
    from rltui.ui.web_server import DashboardServer

    _child_can_import_rltui()
    return DashboardServer(attach_command(run_dir, theme), host=host, port=port, title=f"rltui · {Path(run_dir).name}",
                           run_dir=str(run_dir), public_url=public_url, verbose=verbose, out=out, token=token)


TOKEN_VARIABLE = "RLTUI_SERVE_TOKEN"


def serve_token(args) -> str | None:
    """The token serve requires: --token's, else $RLTUI_SERVE_TOKEN's (which other users
    cannot read, as they can a command line), else a random one; None with --no-token.
    ValueError for an empty one."""
    if args.no_token:
        return None
    given, where = args.token, "--token"
    if given is None:
        given, where = os.environ.get(TOKEN_VARIABLE), TOKEN_VARIABLE
    if given is None:
        import secrets

        return secrets.token_urlsafe(32)
    if not given.strip() or given != given.strip():
        raise ValueError(f"{where}: expected a token without spaces around it, got {given!r} "
                         "(--no-token serves without one)")
    return given


def check_public_url(url: str | None) -> None:
    """ValueError unless `url` (given) is an http(s) address with a host."""
    if url is None:
        return
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise ValueError(f"--public-url: expected an address such as http://HOST:PORT, got {url!r}")


def cmd_serve(args) -> int:
    try:
        import textual_serve.server  # noqa: F401 - only to say what is missing, before anything else
    except ImportError:
        return _error(SERVE_HINT)
    from rltui.control.remote import AttachError, RemoteSession
    from rltui.ui.themes import check_theme

    if not 0 < args.port < 65536:
        return _error(f"--port: expected 1-65535, got {args.port}")
    try:
        check_theme(args.theme)
        check_public_url(args.public_url)
        token = serve_token(args)
        remote = RemoteSession.connect(args.run_dir)  # a job must be listening now
    except AttachError as err:
        return _error(ended_reason(args.run_dir, str(err)))
    except ValueError as err:
        return _error(str(err))
    # serve goes on after the run ends: open tabs keep its last state on screen, new ones
    # say it has ended. This terminal is told once, when it happens.
    remote.add_listener(RunEndWatcher(Path(args.run_dir)))
    if token is None:
        warn(f"serving without a token: anyone who can reach {args.host}:{args.port} "
             "(every user of this machine included) can steer the run")
    elif args.host not in LOOPBACK and not (args.public_url or "").startswith("https:"):
        warn(f"serving on {args.host} over plain HTTP: whoever sees the traffic can read the token "
             "and steer the run; tunnel (ssh -L) or put HTTPS in front (--public-url)")
    try:
        # Bound once before textual-serve starts: it prints "Serving ... on" before binding,
        # and a taken port would read as served, then fail.
        socket.create_server((args.host, args.port)).close()
        make_server(Path(args.run_dir), args.host, args.port, args.theme, public_url=args.public_url,
                    verbose=args.verbose, token=token).serve()
    except OSError as err:  # the address is taken, or not this machine's
        return _error(f"cannot listen on {args.host}:{args.port}: {err.strerror or err}")
    finally:
        remote.close()
    return ExitCode.OK


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
