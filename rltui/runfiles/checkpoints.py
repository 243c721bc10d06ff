"""A run's checkpoint files: their store (written atomically, the newest few kept, stale
temp files cleaned up, those after a branch set aside, the best evaluation's beside them),
finding the one a path means, and reading one verified (`load_verified_checkpoint`: what
`rltui info`, `rltui eval`, `rltui watch` and a resume read), with the zeros of the right
shapes its arrays decode into (`portable_template`).

A checkpoint is written to a temp file in the same directory, fsynced, then moved over
its final name with `os.replace` (atomic on POSIX) and the directory fsynced, so a crash
or kill at any moment leaves either the old set of checkpoints or the new one. Reading one
never imports the run's env module.
"""

from __future__ import annotations

import dataclasses
import os
import re
import tempfile
from pathlib import Path
from typing import NamedTuple

from rltui.errors import LaunchError, warn
from rltui.infra.owner_only import mkdir_private
from rltui.runfiles.names import BEST_CHECKPOINT, CHECKPOINTS, DISCARDED_CHECKPOINTS
from rltui.runfiles.reader import is_run_dir
from trainers.metrics_spec import EVAL_RETURN

_NAME = re.compile(r"^checkpoint-(\d{9})\.msgpack$")
_TEMP_PREFIX = ".tmp-checkpoint-"


@dataclasses.dataclass(frozen=True)
class SetAside:
    folder: Path  # where the checkpoints went
    updates: tuple[int, ...]  # theirs, oldest first


class CheckpointStore:
    def __init__(self, directory: Path, keep: int = 3):
        self.directory = Path(directory)
        self.keep = max(1, keep)

    @classmethod
    def for_run(cls, run_dir: Path, keep: int = 3) -> CheckpointStore:
        return cls(Path(run_dir) / CHECKPOINTS, keep)

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
        return self.directory / BEST_CHECKPOINT

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
            raise ValueError(f"{BEST_CHECKPOINT} cannot be read ({err.strerror})") from None
        try:
            score = read_metadata(data).get(EVAL_RETURN)
        except CheckpointError as err:
            raise ValueError(f"{BEST_CHECKPOINT} cannot be read ({err})") from None
        if isinstance(score, bool) or not isinstance(score, (int, float)):
            raise ValueError(f"{BEST_CHECKPOINT} holds no evaluation return")
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
        base = self.directory / DISCARDED_CHECKPOINTS / f"after-update-{update:09d}"
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


def folder_of_runs_hint(path: Path, command: str | None, shown: int = 3, flag: str = "checkpoint") -> str | None:
    """For a directory that is no run and holds no checkpoints but holds runs (runs/, say):
    one line saying so and naming a few, those with checkpoints first; None for anything
    else. `command` ("info", "launch --resume"): what the line says to type."""
    if not path.is_dir() or is_run_dir(path) or CheckpointStore(path).paths() or CheckpointStore.for_run(path).paths():
        return None
    try:
        runs = sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith(".") and is_run_dir(p))
    except OSError:
        return None
    if not runs:
        return None
    runs.sort(key=lambda p: CheckpointStore.for_run(p).latest() is None)  # stable: by name within each
    names = ", ".join(p.name for p in runs[:shown]) + (", ..." if len(runs) > shown else "")
    pick = f"rltui {command} {path / 'NAME'}" if command else str(path / "NAME")
    return f"{flag}: {path} is a folder of runs; pick one: {pick} ({names})"


class VerifiedCheckpoint(NamedTuple):
    path: Path
    data: bytes
    metadata: dict


def load_verified_checkpoint(path: Path, flag: str, command: str | None = None) -> VerifiedCheckpoint:
    """Read and verify (format, version, checksum) a checkpoint file, or the newest valid
    checkpoint of a run directory, skipping damaged ones with a warning. A folder of runs
    is named as one, with what to type (`command`, "launch --resume" say) for one of them."""
    from rltui.infra.read_limits import ReadLimitError, read_checkpoint
    from trainers.checkpoint import CheckpointError, verify

    try:
        candidates = [resolve_checkpoint(path)]
    except OSError as err:
        raise LaunchError(folder_of_runs_hint(path, command, flag=flag) or f"{flag}: {err}") from None
    if path.is_dir():
        stores = (CheckpointStore.for_run(path), CheckpointStore(path))
        candidates = next((s.paths()[::-1] for s in stores if s.paths()), candidates)
    problems = []
    for candidate in candidates:
        try:
            data = read_checkpoint(candidate)
            metadata = verify(data)
        except (OSError, CheckpointError) as err:
            # the name once: a ReadLimitError's text names the file's whole path
            reason = err.strerror if isinstance(err, ReadLimitError) else err
            problems.append(f"{candidate.name}: {reason}")
            continue
        for problem in problems:
            warn(f"skipped damaged checkpoint {problem}")
        return VerifiedCheckpoint(candidate, data, metadata)
    raise LaunchError(f"{flag}: {'; '.join(problems)}")


def state_shapes(config, parallel):
    """The shapes and dtypes of `parallel`'s training state for `config` (a RunConfig), traced by
    `jax.eval_shape`: nothing is allocated, initialised or compiled."""
    import jax

    return jax.eval_shape(parallel.init, parallel.seed_keys(config.seed), config.dynamic_hparams())


def portable_template(shapes):
    """A portable state of `shapes` (`state_shapes`), zeros, to decode a checkpoint into.
    Callers check first that a state of these shapes fits in memory
    (`rltui.config.memory`): a checkpoint's config may name any size."""
    import jax
    import numpy as np

    from trainers import checkpoint

    return checkpoint.to_portable(jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), shapes))
