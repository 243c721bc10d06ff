"""The `rltui` command. Parses and validates everything before JAX is imported, so bad
input costs milliseconds and gives one line and exit code 2, never a traceback."""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import signal
import sys

from rltui import __version__
from rltui.errors import ExitCode, as_rltui_error, report
from rltui.infra import deferred_imports

# The commands in the order `rltui --help` lists them; each module owns its parser
# (`add_parser(sub)`, which sets `run`) and keeps its heavy imports inside functions.
COMMANDS = ("launch", "info", "watch", "envs", "check_env", "attach", "serve", "export", "compare", "runs")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rltui",
        description="Train reinforcement-learning agents in JAX, and watch and steer them from the terminal.",
    )
    parser.add_argument("--version", action="version", version=f"rltui {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"rltui.commands.{name}").add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; an error for the user is reported here, as one line with its exit
    code (`rltui.errors`), whichever command raised it."""
    deferred_imports.install()  # every command that makes an env skips gymnax's plotting imports
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    if getattr(args, "run", None) is None:
        parser.print_help()
        return ExitCode.USAGE
    args.argv = argv  # launch starts this same command line in each process of a multi-process run
    try:
        return int(args.run(args))
    except Exception as err:
        user_error = as_rltui_error(err)
        if user_error is None:
            raise
        return report(user_error)


def entry() -> None:
    """The `rltui` command (console script and `python -m rltui`).

    Once `main` has returned the run is over and its files are written; a Ctrl+C during the
    interpreter's teardown must not turn that clean end into "killed by SIGINT" (exit 130),
    so the teardown ignores it. Output piped into a reader that stops early (`rltui info
    RUN | head`) ends quietly, as other command-line tools do, not with a traceback. A
    Ctrl+C before training starts (imports, the compile) ends with one line and exit code
    130, and removes the run directory it made, which holds no training yet, so that the
    same --run-dir can be given again."""
    try:
        code = main()
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's last flush
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = ExitCode.BROKEN_PIPE
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl+C must not cut the cleanup short
        code = ExitCode.INTERRUPTED
        from rltui.runfiles.rundir import discard_unstarted_runs

        removed = discard_unstarted_runs()
        note = f"; nothing was trained, so {', '.join(map(str, removed))} was removed" if removed else ""
        try:
            print(f"rltui: interrupted{note}", file=sys.stderr)
        except (OSError, ValueError):
            pass
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The interpreter's teardown collects garbage several times over every object JAX and
    # its libraries made, which is most of its time. The command's files are closed by now:
    # one collection finalises what is already garbage, and the survivors are left out of
    # the teardown's walks. (Python does not promise finalisers of objects still alive at
    # exit in any case; an env's code that must flush at exit registers with `atexit`.)
    gc.collect()
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    entry()
