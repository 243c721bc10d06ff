"""Checkpoint files on disk: atomic writes, keep-last-N, stale temp cleanup, lookup.

A checkpoint is written to a temp file in the same directory, fsynced, then moved over
its final name with `os.replace` (atomic on POSIX) and the directory fsynced, so a crash
or kill at any moment leaves either the old set of checkpoints or the new one.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import re
import tempfile
from pathlib import Path

from rltui.infra.owner_only import mkdir_private

CHECKPOINT_DIR = "checkpoints"
DISCARDED_DIR = "discarded"  # checkpoints/discarded/: those of histories a resume branched away from
BEST_NAME = "best.msgpack"  # the policy of the best evaluation so far (eval_every_updates)
_NAME = re.compile(r"^checkpoint-(\d{9})\.msgpack$")
_TEMP_PREFIX = ".tmp-checkpoint-"


@dataclasses.dataclass(frozen=True)
class SetAside:
    folder: Path  # where the checkpoints went
    updates: tuple[int, ...]  # theirs, oldest first


# A session's first checkpoint by time comes this soon, so that a run killed early on has
# one to resume from.
FIRST_CHECKPOINT_SECONDS = 10.0
# The time trigger waits at least this many times the last write's duration, so that writing
# checkpoints takes at most 1% of the run whatever their size or the disk's speed.
WRITE_SHARE_FACTOR = 100.0


@dataclasses.dataclass(frozen=True)
class CheckpointPolicy:
    every_updates: int = 0  # 0: no update-count trigger
    every_minutes: float = 1.0  # 0: no time trigger
    keep: int = 3
    first_seconds: float = FIRST_CHECKPOINT_SECONDS

    def seconds_between(self, saved: bool, write_seconds: float) -> float | None:
        """Seconds from the last checkpoint (or the session's start, before its first) to the
        next one by time; None: never by time. `saved`: whether this session has saved one;
        `write_seconds`: how long the last save took."""
        if self.every_minutes <= 0:
            return None
        interval = self.every_minutes * 60
        if not saved:
            return min(self.first_seconds, interval)
        return max(interval, write_seconds * WRITE_SHARE_FACTOR)


class CheckpointStore:
    def __init__(self, directory: Path, keep: int = 3):
        self.directory = Path(directory)
        self.keep = max(1, keep)

    @classmethod
    def for_run(cls, run_dir: Path, keep: int = 3) -> CheckpointStore:
        return cls(Path(run_dir) / CHECKPOINT_DIR, keep)

    def prepare(self) -> None:
        """Create the directory and remove temp files left by an interrupted save."""
        mkdir_private(self.directory)
        for path in self.directory.glob(_TEMP_PREFIX + "*"):
            path.unlink(missing_ok=True)

    def paths(self) -> list[Path]:
        """Checkpoints, oldest first."""
        if not self.directory.is_dir():
            return []
        found = [(int(m.group(1)), p) for p in self.directory.iterdir() if (m := _NAME.match(p.name))]
        return [p for _, p in sorted(found)]

    def latest(self) -> Path | None:
        paths = self.paths()
        return paths[-1] if paths else None

    def save(self, data: bytes, update: int) -> Path:
        """Write atomically; on any error the previous checkpoints are untouched and the
        temp file is removed. Then prune to the newest `keep`."""
        final = self.directory / f"checkpoint-{update:09d}.msgpack"
        self._write_atomically(data, final)
        try:
            for old in self.paths()[: -self.keep]:
                old.unlink(missing_ok=True)
        except OSError:
            pass  # the new checkpoint is saved; an old one left over does no harm
        return final

    @property
    def best_path(self) -> Path:
        return self.directory / BEST_NAME

    def best_score(self) -> float | None:
        """The evaluation return of best.msgpack; None when there is none. ValueError when
        it cannot be read as a best checkpoint (a damaged file is then replaced)."""
        from rltui.infra.read_limits import ReadLimitError, read_checkpoint
        from trainers.checkpoint import CheckpointError, read_metadata

        try:
            data = read_checkpoint(self.best_path)
        except FileNotFoundError:
            return None
        except ReadLimitError as err:
            raise ValueError(f"{BEST_NAME} cannot be read ({err.strerror})") from None
        try:
            score = read_metadata(data).get("eval_return")
        except CheckpointError as err:
            raise ValueError(f"{BEST_NAME} cannot be read ({err})") from None
        if isinstance(score, bool) or not isinstance(score, (int, float)):
            raise ValueError(f"{BEST_NAME} holds no evaluation return")
        return float(score)

    def save_best(self, data: bytes, score: float) -> Path | None:
        """Write `data` as best.msgpack (atomically) if `score` beats the one there; None,
        writing nothing, when it does not: a best checkpoint is never replaced by a worse one."""
        try:
            held = self.best_score()
        except ValueError:
            held = None
        if held is not None and not score > held:
            return None
        self._write_atomically(data, self.best_path)
        return self.best_path

    def _write_atomically(self, data: bytes, final: Path) -> None:
        mkdir_private(self.directory)
        fd, tmp = tempfile.mkstemp(prefix=_TEMP_PREFIX, dir=self.directory)
        try:
            with os.fdopen(fd, "wb") as f:
                write_all(f, data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, final)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        _fsync_dir(self.directory)

    def set_aside_after(self, update: int) -> SetAside | None:
        """Move the checkpoints after `update` into a folder of their own under discarded/
        (one per branch), leaving this store the history that goes on from `update`. Newest
        first, so an interruption leaves a store whose latest is still one history's end."""
        later = [(int(_NAME.match(p.name).group(1)), p) for p in self.paths()]
        later = [(u, p) for u, p in later if u > update]
        if not later:
            return None
        base = self.directory / DISCARDED_DIR / f"after-update-{update:09d}"
        folder, n = base, 1
        while folder.exists():
            n += 1
            folder = base.with_name(f"{base.name}-{n}")
        mkdir_private(folder)
        for _, path in reversed(later):
            os.replace(path, folder / path.name)
        _fsync_dir(folder)
        _fsync_dir(self.directory)
        return SetAside(folder, tuple(u for u, _ in later))


def checkpoint_update(path: Path) -> int | None:
    """The update a checkpoint file's name says it holds; None for another name."""
    match = _NAME.match(Path(path).name)
    return int(match.group(1)) if match else None


def library_versions() -> dict[str, str]:
    from importlib import metadata

    out = {}
    for name in ("jax", "jaxlib", "flax", "optax", "gymnax", "rltui"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "unknown"
    return out


def checkpoint_metadata(*, run, backend, hparams, update, env_steps, elapsed, edits, reason) -> dict:
    """Readable facts stored beside the arrays (`rltui info` prints them)."""
    return {
        "trainer": backend.get("algo", "ppo"),
        "config": run.get("config", {}),
        "static": backend.get("static", {}),
        "hparams": hparams,
        "update": update,
        "env_steps": env_steps,
        "elapsed": round(elapsed, 3),
        "edits": list(edits),
        "reason": reason,
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "versions": library_versions(),
        "device_kind": backend.get("device_kind", "unknown"),
        "device_count": len(backend.get("devices", [])),
        **({"actions": backend["actions"]} if backend.get("actions") else {}),
        # what presets.toml set for the run, where it set anything (`rltui.config.presets.applied`)
        **({"preset": run["preset"]} if run.get("preset") else {}),
    }


def write_all(f, data: bytes) -> None:
    # A seam for tests that simulate a full disk.
    f.write(data)


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def resolve_checkpoint(path: Path) -> Path:
    """A checkpoint file, or a run directory meaning its latest checkpoint. Raises
    FileNotFoundError with a message for the user."""
    path = Path(path)
    if path.is_file():
        return path
    if path.is_dir():
        for store in (CheckpointStore.for_run(path), CheckpointStore(path)):
            latest = store.latest()
            if latest is not None:
                return latest
        raise FileNotFoundError(f"{path} holds no checkpoints")
    if path.exists():  # a device, a pipe...: there, but not a file to read a checkpoint from
        raise FileNotFoundError(f"{path} is not a checkpoint file or a run directory")
    raise FileNotFoundError(f"no such file or directory: {path}")
