"""The run directory: runs/<name>/ with config.toml, metrics.jsonl, events.jsonl, its
owner's only (rltui.infra.owner_only).

A run directory has one writer at a time: the process that trains into it holds an
exclusive `flock` on RUN_DIR/rltui.lock for the rest of its life. The operating system
releases it when the process ends, however it ends (kill -9 included), so a stale lock
never has to be cleaned up, and a second launch or resume into a directory whose run is
alive is refused before it writes anything there."""

from __future__ import annotations

import datetime
import fcntl
import os
import re
import shlex
from pathlib import Path

from rltui.config.build import RunConfig
from rltui.config.keys import ConfigError
from rltui.config.toml_text import dump_toml
from rltui.errors import warn
from rltui.infra.owner_only import DIR_MODE, FILE_MODE, make_private, open_private
from rltui.runfiles import names

# Characters a directory name keeps from an env id; any other run of characters (an import
# path's ':', an API object's '#', a space) becomes one '-', so that the name is safe to type
# in a shell and valid on every file system.
_UNSAFE_IN_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def default_run_name(config: RunConfig) -> str:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    env = _UNSAFE_IN_NAME.sub("-", config.env).strip("-.") or "env"
    return f"{env}-{config.algo}-{stamp}"


def prepare_run_dir(config: RunConfig, run_dir: str | None, runs_root: str = "runs", name: str | None = None) -> Path:
    """Create the run directory and write the effective config; ConfigError if impossible."""
    if run_dir:
        path = Path(run_dir)
        flag = "--run-dir"
        check_not_in_use(path)
        if (path / names.METRICS).exists():
            raise ConfigError(f"{flag}: {path} already holds a run; choose another directory")
        runs = _runs_in(path)
        if runs:
            named = ", ".join(runs[:3]) + (", ..." if len(runs) > 3 else "")
            raise ConfigError(f"{flag}: {path} is a folder of runs ({named}); give a run its own directory, "
                              f"e.g. {path / 'NAME'}")
        # A folder that already holds something is the user's: it keeps its mode, and only
        # what rltui writes in it is private.
        own_folder = not _holds_anything(path)
        try:
            path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        except OSError as err:
            raise ConfigError(f"{flag}: cannot create {path}: {err.strerror or err}") from None
    else:
        flag = "--name" if name else "run directory"
        path = _claim_new_dir(Path(runs_root) / (name or default_run_name(config)), flag)
        own_folder = True
    lock_run_dir(path, own_folder=own_folder)
    if (path / names.METRICS).exists():  # another launch got there between the check and the lock
        raise ConfigError(f"{flag}: {path} already holds a run; choose another directory")
    write_config(path, config, flag)
    return path


def _holds_anything(path: Path) -> bool:
    try:
        with os.scandir(path) as entries:
            return any(True for _ in entries)
    except OSError:  # none there yet, or not a folder it may list
        return False


def _runs_in(path: Path) -> list[str]:
    """The names of the run directories directly inside `path`, sorted; a run written there
    would mix its files with theirs, and the runs view would list the folder as a run."""
    try:
        return sorted(child.name for child in path.iterdir() if not child.name.startswith(".")
                      and child.is_dir() and (child / names.CONFIG).is_file())
    except OSError:  # a folder it may not read: a run is not written into it either way
        return []


def _claim_new_dir(base: Path, flag: str) -> Path:
    """`base`, or `base-2`, `base-3`...: the first that this process creates itself, so two
    launches with the same name at the same moment never share a directory."""
    try:
        base.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError(f"{flag}: cannot create {base.parent}: {err.strerror or err}") from None
    path, n = base, 1
    while True:
        try:
            path.mkdir(mode=DIR_MODE)
            return path
        except FileExistsError:
            n += 1
            path = base.with_name(f"{base.name}-{n}")
        except OSError as err:
            raise ConfigError(f"{flag}: cannot create {path}: {err.strerror or err}") from None


def own_entries() -> tuple[str, ...]:
    """The names (glob patterns) of what rltui writes directly in a run directory, with the
    temporary files that become them; a folder among them is rltui's whole. Anything else
    there is the user's."""
    files = (names.CONFIG, names.ORIGINAL_CONFIG, names.METRICS, names.METRICS_DISCARDED, names.EVENTS,
             names.POPULATION, names.POPULATION_DISCARDED, names.LOCK, names.SOCKET, names.SOCKET_POINTER,
             names.WANDB_RUN_ID)
    temporary = [f"{dot}{name}{names.TEMPORARY_SUFFIX}" for dot in ("", ".") for name in files]
    return (*files, *temporary, names.CHECKPOINTS, names.TENSORBOARD, names.TENSORBOARD_EVENTS,
            f"{names.MEMBER_RUN_PREFIX}[0-9]*", names.WANDB, f"{names.SCREENSHOT_PREFIX}*.svg")


# Run directory (resolved) -> the open lock file. Open for the process's life: closing the
# descriptor would release the lock while the run's files may still be written.
_held: dict[Path, int] = {}


def _in_use_message(path: Path, fd: int) -> str:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        text = ""
    who = f"a running rltui (pid {text})" if text.isdigit() else "a running rltui"
    return (
        f"{path} is in use by {who}; wait for it to end or stop it (rltui attach {shlex.quote(str(path))}, then k), "
        "or give this run another directory"
    )


def lock_run_dir(path: Path, *, own_folder: bool) -> None:
    """Make this process the run directory's one writer for the rest of its life, before it
    writes anything else there; ConfigError (one line) if a live process already is. A
    filesystem without locks gets a warning, and the run goes on unguarded. What rltui has
    written there is made private, and with `own_folder` (a folder made for the run, or one
    that holds a run) the folder itself."""
    key = Path(os.path.abspath(path))
    if key in _held:
        return
    try:
        fd = os.open(key / names.LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
    except OSError as err:
        raise ConfigError(f"cannot write to {path}: {err.strerror or err}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        message = _in_use_message(path, fd)
        os.close(fd)
        raise ConfigError(message) from None
    except OSError as err:
        warn(f"cannot lock {path} ({err.strerror or err}); nothing stops a second rltui "
             "from writing to it while this run does")
    _held[key] = fd
    try:
        # Its writer makes the run's files its owner's before writing the run there (those
        # of a run written before this rule, or copied in, included).
        make_private(key, own_entries(), folder=own_folder)
    except OSError as err:
        warn(f"cannot make {path} private to you ({err.strerror or err}); other users may read the run's files")
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
    except OSError:
        pass  # the pid is for the message of a refused second writer only


def check_not_in_use(path: Path) -> None:
    """ConfigError if a live process holds the directory's lock; writes nothing."""
    key = Path(os.path.abspath(path))
    if key in _held:
        return
    try:
        # O_NONBLOCK: a lock file that is a pipe would wait for a writer that never comes
        fd = os.open(key / names.LOCK, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return  # no lock file: no rltui has written there, or none that locks
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        raise ConfigError(_in_use_message(path, fd)) from None
    except OSError:
        pass
    finally:
        os.close(fd)


def write_config(path: Path, config: RunConfig, flag: str = "run directory") -> None:
    """Write the effective config atomically; ConfigError if the directory is not writable."""
    try:
        tmp = path / (names.CONFIG + names.TEMPORARY_SUFFIX)
        with open_private(tmp, "w", encoding="utf-8") as out:
            out.write(dump_toml(config))
        os.replace(tmp, path / names.CONFIG)
    except OSError as err:
        raise ConfigError(f"{flag}: cannot write to {path}: {err.strerror or err}") from None


def discard_unstarted_runs() -> list[Path]:
    """After a Ctrl+C before training started: remove what rltui wrote into the run
    directories this process locked that hold no training yet (no metrics record, no
    checkpoint), and each directory once empty, so that the same --run-dir is free again.
    Anything else in a directory stays. Returns the directories removed."""
    removed = []
    for path in list(_held):
        checkpoints = path / names.CHECKPOINTS
        try:
            trained = (path / names.METRICS).stat().st_size > 0
        except OSError:
            trained = False
        if trained or (checkpoints.is_dir() and any(checkpoints.iterdir())):
            continue
        for name in (names.METRICS, names.EVENTS, names.CONFIG, names.CONFIG + names.TEMPORARY_SUFFIX, names.LOCK):
            try:
                (path / name).unlink(missing_ok=True)
            except OSError:
                pass
        try:
            if checkpoints.is_dir():
                checkpoints.rmdir()
            path.rmdir()
        except OSError:
            continue  # something else is there: the directory stays
        removed.append(path)
    return removed
