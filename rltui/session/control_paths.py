"""Where a run's control socket lives: `RUN_DIR/control.sock`, unless that path is too
long for a Unix socket address (about 107 bytes on Linux, 103 on macOS). Then the socket
goes into a private directory of the user's (`$XDG_RUNTIME_DIR/rltui`, or
`<tmp>/rltui-<uid>`, mode 0700) and `RUN_DIR/control.path` holds its path."""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from pathlib import Path

SOCKET_NAME = "control.sock"
POINTER_NAME = "control.path"
# Below every platform's limit, with no room to spare needed: the temporary name the
# server binds first (see ControlServer) is never longer than the final one.
MAX_SOCKET_PATH = 100


class ControlPathError(OSError):
    """No usable place for the socket; the message is one line for the user."""


def _too_long(path: Path) -> bool:
    return len(os.fsencode(str(path))) > MAX_SOCKET_PATH


def runtime_dir() -> Path:
    """The user's private directory for sockets, created 0700 if missing; refused if
    someone else owns it or others may enter it."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    root = Path(base) / "rltui" if base and os.path.isdir(base) else Path(tempfile.gettempdir()) / f"rltui-{os.getuid()}"
    try:
        root.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(root)
    except OSError as err:
        raise ControlPathError(f"cannot create {root}: {err.strerror or err}") from None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise ControlPathError(f"{root} is not a private directory of this user (expected mode 0700)")
    return root


def socket_location(run_dir: Path) -> tuple[Path, bool]:
    """(path to bind, whether a pointer file must say where it is)."""
    path = Path(os.path.abspath(run_dir)) / SOCKET_NAME
    if not _too_long(path):
        return path, False
    digest = hashlib.sha256(str(path).encode("utf-8", "surrogateescape")).hexdigest()[:20]
    fallback = runtime_dir() / f"{digest}.sock"
    if _too_long(fallback):
        raise ControlPathError(f"no socket path short enough for {run_dir} (tried {fallback})")
    return fallback, True


def find_socket(run_dir: Path) -> Path | None:
    """The control socket of the run in `run_dir` (None if there is none)."""
    run_dir = Path(os.path.abspath(run_dir))
    pointer = run_dir / POINTER_NAME
    if pointer.is_file():
        try:
            return Path(pointer.read_text(encoding="utf-8").strip())
        except OSError:
            return None
    path = run_dir / SOCKET_NAME
    return path if path.exists() else None
