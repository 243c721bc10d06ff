"""Where a run's control socket lives, and how its file is made safely.

The socket is `RUN_DIR/control.sock`, unless that path is too long for a Unix socket
address (about 107 bytes on Linux, 103 on macOS). Then it goes into a private directory of
the user's (`$XDG_RUNTIME_DIR/rltui`, or `<tmp>/rltui-<uid>`, mode 0700) and
`RUN_DIR/control.path` holds its path. Finding it again is reading the run directory
(`rltui.runfiles.discovery.find_socket`)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import stat
import struct
import tempfile
from pathlib import Path

from rltui.infra.owner_only import open_private
from rltui.runfiles.names import SOCKET, SOCKET_POINTER, TEMPORARY_SUFFIX

# Below every platform's limit, with no room to spare needed: the temporary name
# `bind_owner_only` binds first is never longer than the final one.
MAX_SOCKET_PATH = 100
# Connections waiting to be accepted. Room for many clients attaching at once (and for the
# server taking its time under load), and no more: the control server drains a whole
# backlog a second, so a longer one would cost more under a storm of connects. The OS caps
# it at its own limit (somaxconn).
LISTEN_BACKLOG = 256


class ControlPathError(OSError):
    """No usable place for the socket; the message is one line for the user."""


def _too_long(path: Path) -> bool:
    return len(os.fsencode(str(path))) > MAX_SOCKET_PATH


def runtime_dir() -> Path:
    """The user's private directory for sockets, created 0700 if missing; refused if
    someone else owns it or others may enter it."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    root = (
        Path(base) / "rltui" if base and os.path.isdir(base) else Path(tempfile.gettempdir()) / f"rltui-{os.getuid()}"
    )
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
    path = Path(os.path.abspath(run_dir)) / SOCKET
    if not _too_long(path):
        return path, False
    digest = hashlib.sha256(str(path).encode("utf-8", "surrogateescape")).hexdigest()[:20]
    fallback = runtime_dir() / f"{digest}.sock"
    if _too_long(fallback):
        raise ControlPathError(f"no socket path short enough for {run_dir} (tried {fallback})")
    return fallback, True


def accepts(path: Path) -> bool:
    """Whether a run listens on the socket at `path` (one left over by a run that ended
    refuses). The probe connects and closes at once."""
    if not path.exists():
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True


def refuse_if_live(path: Path) -> None:
    """A socket that accepts belongs to a live run: never take it over. One that refuses
    is left over from a run that crashed: `bind_owner_only` replaces it."""
    if accepts(path):
        raise ControlPathError(f"{path}: another run is listening there")


def bind_owner_only(path: Path) -> socket.socket:
    """A non-blocking listening socket at `path`, mode 0600. Bound under a temporary name,
    made owner-only, then renamed into place: nobody can connect before the mode is set,
    and a stale socket is replaced atomically."""
    tmp = path.with_name(f".c{os.getpid()}")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        sock.bind(str(tmp))
        os.chmod(tmp, 0o600)
        sock.listen(LISTEN_BACKLOG)
        os.replace(tmp, path)
    except OSError as err:
        sock.close()
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise ControlPathError(f"cannot listen on {path}: {err.strerror or err}") from None
    sock.setblocking(False)
    return sock


def write_pointer(run_dir: Path, path: Path) -> Path:
    """Write `RUN_DIR/control.path` (atomically) naming the socket; returns the pointer."""
    pointer = Path(run_dir) / SOCKET_POINTER
    tmp = Path(run_dir) / f".{SOCKET_POINTER}{TEMPORARY_SUFFIX}"
    try:
        with open_private(tmp, "w", encoding="utf-8") as out:
            out.write(f"{path}\n")
        os.replace(tmp, pointer)
    except OSError as err:
        raise ControlPathError(f"cannot write {pointer}: {err.strerror or err}") from None
    return pointer


def same_user(conn: socket.socket) -> bool:
    """Where the OS says who connected, only this user may; elsewhere the socket's 0600
    mode keeps others out."""
    if not hasattr(socket, "SO_PEERCRED"):
        return True
    size = struct.calcsize("3i")
    _pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, size))
    return uid == os.geteuid()
