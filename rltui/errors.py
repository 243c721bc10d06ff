"""The exit codes of `rltui`, and the one error type the command line reports.

Every error the user can act on is an `RltuiError` that carries its exit code; `report`
prints it as one line (`rltui: error: ...`) and is the only place that does, as `warn` is
for a warning (`rltui: warning: ...`) on the way to going on. The trainers
(which know nothing of the command line) raise plain `ValueError` subclasses for bad
input; `as_rltui_error` turns those into usage errors at the boundary.
"""

from __future__ import annotations

import enum
import signal
import sys


class ExitCode(enum.IntEnum):
    OK = 0  # finished, or stopped by the user
    ERROR = 1  # training failed (or its final checkpoint did)
    USAGE = 2  # bad input, found before anything started
    DIVERGED = 3  # a non-finite loss or gradient
    PEER_LOST = 4  # a multi-process run lost a peer
    INTERRUPTED = 128 + signal.SIGINT  # what a shell reports for a tool Ctrl+C ended
    BROKEN_PIPE = 128 + signal.SIGPIPE  # what a shell reports for a tool SIGPIPE ended


class RltuiError(Exception):
    """An error for the user: one line of message, and the exit code it ends with."""

    exit_code: ExitCode = ExitCode.ERROR

    def __init__(self, message: str, exit_code: ExitCode | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class UsageError(RltuiError, ValueError):
    """Bad input (a key, a value, a path, a flag), found before anything starts: exit 2."""

    exit_code = ExitCode.USAGE


class LaunchError(UsageError):
    """Bad input found before training starts: one line for the user, exit code 2."""


def _trainer_input_errors() -> tuple[type[Exception], ...]:
    from trainers.checkpoint import CheckpointError
    from trainers.env_import import EnvImportError
    from trainers.keys import HParamError

    return (CheckpointError, EnvImportError, HParamError)


def as_rltui_error(err: BaseException) -> RltuiError | None:
    """`err` as the command line reports it, or None when it is not an error for the user
    (a bug, which must keep its traceback)."""
    if isinstance(err, RltuiError):
        return err
    if isinstance(err, _trainer_input_errors()):
        return UsageError(str(err))
    from trainers.env_source import callback_failure

    called_back = callback_failure(err)  # the env's own code failed, while it ran (eval, watch)
    return RltuiError(called_back) if called_back else None


def report(err: RltuiError | str, exit_code: ExitCode = ExitCode.USAGE) -> int:
    """Print `err` as one line on stderr; its exit code. A plain message is a usage error
    unless `exit_code` says otherwise."""
    if isinstance(err, str):
        err = RltuiError(err, exit_code)
    print(f"rltui: error: {err}", file=sys.stderr)
    return int(err.exit_code)


def warn(text: str) -> None:
    """Print `text` as one warning line on stderr: something the user should know, on the way
    to going on."""
    print(f"rltui: warning: {text}", file=sys.stderr)
