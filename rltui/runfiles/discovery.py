"""Finding the runs under a directory, and each one's state (live, finished, stopped,
diverged, crashed) from its events and whether its control socket answers: the socket is
found where the run's directory says (`find_socket`), and a probe connects to it and
closes it, sending nothing. A folder of runs named where one run was expected is named as
such (`folder_of_runs_hint`)."""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from rltui.errors import UsageError
from rltui.infra.read_limits import NOTE_BYTES, read_text
from rltui.runfiles.names import EVENTS, SOCKET, SOCKET_POINTER
from rltui.runfiles.reader import is_run_dir

STATES = ("live", "finished", "stopped", "diverged", "aborted", "crashed")
PROBE_TIMEOUT = 0.3  # seconds a control socket has to accept before the run counts as gone


def check_root(root: Path) -> None:
    """UsageError (one line) unless `root` is a directory this user can list."""
    if not root.exists():
        raise UsageError(f"{root}: no such directory")
    if not root.is_dir():
        raise UsageError(f"{root}: not a directory")
    if not os.access(root, os.R_OK | os.X_OK):
        raise UsageError(f"{root}: cannot read this directory (permission denied)")


def scan_runs(root: Path) -> list[Path]:
    """The run directories in `root` (its subdirectories holding metrics.jsonl or
    config.toml), and `root` itself if it is one."""
    root = Path(root)
    try:
        children = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError as err:
        raise UsageError(f"{root}: cannot read this directory ({err.strerror or err})") from None
    found = [p for p in children if is_run_dir(p)]
    return ([root] if is_run_dir(root) else []) + found


def find_socket(run_dir: Path) -> Path | None:
    """The control socket of the run in `run_dir` (None if there is none)."""
    run_dir = Path(os.path.abspath(run_dir))
    pointer = run_dir / SOCKET_POINTER
    if pointer.is_file():
        try:
            return Path(read_text(pointer, NOTE_BYTES, "a socket's path").strip())
        except (OSError, UnicodeDecodeError):
            return None
    path = run_dir / SOCKET
    return path if path.exists() else None


def socket_answers(path: Path, timeout: float = PROBE_TIMEOUT) -> bool:
    """Whether a run's control socket accepts a connection (its process is alive)."""
    where = find_socket(path)
    if where is None:
        return False
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(timeout)
    try:
        probe.connect(str(where))
    except OSError:
        return False
    finally:
        probe.close()
    return True


def has_socket(path: Path) -> bool:
    return find_socket(path) is not None


class RunState(NamedTuple):
    name: str  # one of STATES
    detail: str  # the words behind it, for the status line


def state_of(events: Sequence[dict[str, Any]], live: bool, socket_left: bool = False) -> RunState:
    """A run's state from its events (the last start, then how that session ended) and
    whether its control socket answers now."""
    if live:
        return RunState("live", "its control socket answers")
    end: dict[str, Any] | None = None
    diverged = target = False
    for event in events:
        kind = event.get("kind")
        if kind in ("compiled", "resumed"):  # a new session: what ended the last one no longer counts
            end, diverged, target = None, False, False
        elif kind == "nonfinite":
            diverged = True
        elif kind == "rolled back":  # back to a checkpoint from before the divergence
            diverged = False
        elif kind == "target_reached":
            target = True
        elif kind in ("finished", "aborted", "error"):
            end = event
    if end is None:
        why = "its control socket no longer answers" if socket_left else f"no final event in {EVENTS}"
        return RunState("crashed", why)
    message = str(end.get("message", ""))
    if end.get("kind") == "error":
        return RunState("crashed", f"error: {message}")
    if end.get("kind") == "aborted":
        return RunState("aborted", message)
    if diverged:
        return RunState("diverged", "stopped after a non-finite loss or gradient")
    if message.startswith("stopped") and not target:
        return RunState("stopped", message)
    return RunState("finished", message)
