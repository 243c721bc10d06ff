"""The most rltui reads of each kind of file, declared once, and the readers that hold to
them: a file's size is checked before anything is read, and only regular files are read,
so that a path naming a device or a pipe (/dev/zero), a huge or sparse file, or one line
that never ends is refused in one line that names the file and the bound, rather than read
into memory or waited on. A refusal is an `OSError` (`ReadLimitError`), so every reader
reports it where it reports a file it cannot read."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

# Settings, never data: a --config file, a run's config.toml, a theme.
TEXT_FILE_BYTES = 1 << 20
# One line of metrics.jsonl, events.jsonl or population.jsonl (a population's record holds
# every member's and seed's values); the files themselves are streamed line by line.
JSONL_LINE_BYTES = 16 << 20
# One record of a TensorBoard event file rltui wrote (one update's values, or a text); the
# files are streamed a record at a time, whatever their length.
EVENT_RECORD_BYTES = 16 << 20
# A line rltui wrote for itself: a control socket's path, a W&B run id.
NOTE_BYTES = 4096

_CHUNK = 1 << 20


class ReadLimitError(OSError):
    """A file rltui does not read: not a regular file, or larger than its bound. `strerror`
    says which, in words that follow the file's name; the error's text is both, so that
    wherever it is shown (a logger's warning, a refused resume) it names the file."""

    def __init__(self, path: Path | str, reason: str):
        super().__init__(errno.EFBIG, reason, str(path))

    def __str__(self) -> str:
        return f"{self.filename} {self.strerror}"


def size_text(size: float, *, steady: bool = False) -> str:
    """A number of bytes as every message and panel writes it: 1536 -> "1.5 KiB", 2 << 30 ->
    "2 GiB"; `steady` keeps the ".0" ("2.0 GiB"), so that a figure shown as it changes keeps
    its width."""
    value, unit = float(size), "bytes"
    for larger in ("KiB", "MiB", "GiB", "TiB"):
        if value < 1024:
            break
        value, unit = value / 1024, larger
    if unit == "bytes":
        return f"{value:.0f} bytes"
    text = f"{value:.1f}"
    return f"{text if steady else text.removesuffix('.0')} {unit}"


def too_large(size: int, limit: int, what: str) -> str:
    return f"is {size_text(size)}, more than the {size_text(limit)} rltui reads of {what}"


def open_bounded(path: Path | str, limit: int | None, what: str) -> BinaryIO:
    """`path` opened for reading as bytes: a regular file (after symlinks) no larger than
    `limit` (None: any size, for a file read a bounded piece at a time). Raises OSError,
    ReadLimitError for a file refused. Opening never waits, even on a pipe."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ReadLimitError(path, "is not a regular file")
        if limit is not None and info.st_size > limit:
            raise ReadLimitError(path, too_large(info.st_size, limit, what))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: Path | str, limit: int, what: str) -> bytes:
    """The whole of `path` (see `open_bounded`); a file that grows past `limit` while it is
    read is refused too."""
    with open_bounded(path, limit, what) as file:
        size = os.fstat(file.fileno()).st_size
        data = file.read(size + 1)
        if len(data) > size:  # it grew since, or its size is not said (a /proc file)
            data += file.read(limit + 1 - len(data))
    if len(data) > limit:
        raise ReadLimitError(path, too_large(len(data), limit, what))
    return data


def read_checkpoint(path: Path | str) -> bytes:
    """A checkpoint (the policy, optimizer and env states of every agent), read whole: at
    most the largest file rltui writes, so every checkpoint it wrote can be read back."""
    from trainers.checkpoint import MAX_BYTES

    return read_bytes(path, MAX_BYTES, "a checkpoint")


def read_text(path: Path | str, limit: int, what: str) -> str:
    """`read_bytes` as UTF-8 text (UnicodeDecodeError if it is not)."""
    return read_bytes(path, limit, what).decode("utf-8")


def read_lines(path: Path | str, limit: int | None = None) -> Iterator[bytes | None]:
    """The lines of `path`, streamed, each without its newline; a line longer than `limit`
    (default JSONL_LINE_BYTES) is None (its bytes are passed over, never held). A last line
    without its newline (one being written, or cut by a crash) is left out."""
    limit = JSONL_LINE_BYTES if limit is None else limit
    with open_bounded(path, None, "a line") as file:
        pending, skipping = b"", False  # the line so far; whether it is already too long
        while chunk := file.read(_CHUNK):
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop()
            for line in lines:
                yield None if skipping or len(line) > limit else line
                skipping = False
            if len(pending) > limit:
                pending, skipping = b"", True
