"""A run directory is its owner's alone, as its control socket already is: a directory rltui
creates for a run is 0700, so no other user can list it or open anything in it, whatever a
file's own mode (the files a library writes there included), and every file and folder rltui
writes in it is created 0600 / 0700 whatever the umask, so a copy that keeps modes (cp -p,
rsync -a, tar) stays private. A run that starts or resumes tightens what it names as its own
(rltui.runfiles.rundir); what else a folder holds is the user's, and keeps its modes."""

from __future__ import annotations

import errno
import fnmatch
import os
import stat
from collections.abc import Iterable
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600

_FLAGS = {
    "w": os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
    "a": os.O_WRONLY | os.O_CREAT | os.O_APPEND,
}


def open_private(path: str | os.PathLike, mode: str = "w", encoding: str | None = None):
    """`open(path, mode)` for "w", "a", "wb" or "ab", a file it creates being 0600 (the mode
    is given to the system call that creates it: no moment when others could open it).
    OSError, one line naming the file, for a path that is not a regular file: opening never
    waits on a pipe, nor writes into a device."""
    # O_NONBLOCK: opening a pipe for writing would otherwise wait for a reader forever
    try:
        fd = os.open(path, _FLAGS[mode.replace("b", "")] | os.O_CLOEXEC | os.O_NONBLOCK, FILE_MODE)
    except OSError as err:
        if err.errno == errno.ENXIO:  # a pipe that no process reads
            raise NotRegularFileError(path) from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularFileError(path)
        os.set_blocking(fd, True)
        return os.fdopen(fd, mode, encoding=encoding)
    except BaseException:
        os.close(fd)
        raise


class NotRegularFileError(OSError):
    """A path rltui would write that is a pipe, a device or a socket."""

    def __init__(self, path: str | os.PathLike):
        super().__init__(errno.EINVAL, "is not a regular file", str(path))

    def __str__(self) -> str:
        return f"{self.filename} {self.strerror}"


def mkdir_private(path: str | os.PathLike) -> None:
    """`path` and any missing folder above it, each created 0700; one that exists is left
    as it is."""
    path = Path(path)
    if path.is_dir():
        return
    if not path.parent.is_dir():
        mkdir_private(path.parent)
    try:
        path.mkdir(mode=DIR_MODE)
    except FileExistsError:
        if not path.is_dir():
            raise


def make_private(run_dir: str | os.PathLike, own: Iterable[str], *, folder: bool) -> None:
    """Take every permission of group and others off the entries of `run_dir` whose names
    match a pattern of `own` (what lies in such a folder too: a run's files from before this
    rule, a library's files) and, with `folder`, off `run_dir` itself. Its other entries are
    not rltui's, and stay as they are. The owner's and the special bits (setgid) are kept.
    Symbolic links are not followed: what they point to is not the run's. OSError if the
    directory itself cannot be changed (another user's); an entry that cannot is left."""
    run_dir = Path(run_dir)
    if folder:
        mode = os.stat(run_dir).st_mode
        _restrict(run_dir, mode, stat.S_IMODE(mode) & ~0o077 | DIR_MODE, strict=True)
    patterns = tuple(own)
    for name in os.listdir(run_dir):
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns):
            path = os.path.join(run_dir, name)
            if _tighten(path) and os.path.isdir(path):
                for inside, names, files in os.walk(path):
                    for entry in names + files:
                        _tighten(os.path.join(inside, entry))


def _tighten(path: str) -> bool:
    """Group and others off `path`; False for a link (left, with what it points to) or an
    entry gone."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    if stat.S_ISLNK(info.st_mode):
        return False
    _restrict(path, info.st_mode, stat.S_IMODE(info.st_mode) & ~0o077, strict=False)
    return True


def _restrict(path, mode: int, wanted: int, *, strict: bool) -> None:
    if stat.S_IMODE(mode) == wanted:
        return
    try:
        os.chmod(path, wanted)
    except OSError:
        if strict:
            raise
