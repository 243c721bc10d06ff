"""`rltui launch --resume` and `rltui.train(resume=...)`: the checkpoint read and verified,
where the resumed run writes, whether the checkpoint fits the configured trainer, the new
history that an older checkpoint starts, and what the resume changes against the checkpoint,
recorded as events (`prepare_resume` and `apply_resume`, which both callers share).

The checkpoint is read and verified by `rltui.runfiles.checkpoints`, which never imports
the run's env module. Only `check_checkpoint_fits` builds the trainer, and the launch calls
it after its preflight has imported an env named by import path and said so."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from rltui.config.build import RunConfig, resume_config
from rltui.config.keys import ConfigError
from rltui.errors import LaunchError
from rltui.runfiles.checkpoints import CheckpointStore, VerifiedCheckpoint, portable_template, state_shapes
from rltui.runfiles.names import (
    CHECKPOINTS,
    CONFIG,
    DISCARDED_CHECKPOINTS,
    METRICS_DISCARDED,
    ORIGINAL_CONFIG,
    TEMPORARY_SUFFIX,
)


class ResumeTarget(NamedTuple):
    run_dir: Path  # where the resumed run writes
    new: bool  # a directory of its own (--run-dir elsewhere), not the checkpoint's run


def resume_target(args, checkpoint_path: Path) -> ResumeTarget:
    """Where a resume writes: the checkpoint's run directory, or --run-dir when it names
    another. A checkpoint that a branch set aside is not part of its run's history any
    more, so it may only go on in a directory of its own."""
    parent = checkpoint_path.parent
    discarded = parent.parent.name == DISCARDED_CHECKPOINTS and parent.parent.parent.name == CHECKPOINTS
    if discarded:
        own = parent.parent.parent.parent
    else:
        own = parent.parent if parent.name == CHECKPOINTS else parent
    if args.run_dir and Path(args.run_dir).resolve() != own.resolve():
        return ResumeTarget(Path(args.run_dir), new=True)
    if discarded:
        raise LaunchError(
            f"--resume: {checkpoint_path} was set aside when a resume of {own} branched from an earlier "
            "checkpoint, so it is no longer that run's history; resume it into a new directory with --run-dir DIR"
        )
    return ResumeTarget(own, new=False)


def resumed_config(resume: VerifiedCheckpoint, overrides: Mapping[str, Any]) -> RunConfig:
    """The config a resume of `resume` trains under (`resume_config`); LaunchError unless its
    total goes beyond the checkpoint."""
    metadata = resume.metadata
    config = resume_config(metadata.get("config", {}), metadata.get("hparams", {}), overrides)
    done = int(metadata.get("update", 0))
    if config.total_updates <= done:
        rounded = (
            "" if config.total_timesteps == config.total_updates * config.steps_per_update
            else f" (rounded down to whole updates of {config.steps_per_update:,} env steps: {config.total_updates:,})"
        )
        raise LaunchError(
            f"total_timesteps: the checkpoint is at update {done:,} ({done * config.steps_per_update:,} env steps), "
            f"which {config.total_timesteps:,}{rounded} does not go beyond; set a larger one to train on, "
            f"e.g. --set total_timesteps={2 * done * config.steps_per_update}"
        )
    return config


def check_checkpoint_fits(config: RunConfig, data: bytes) -> None:
    """LaunchError unless the checkpoint's arrays have exactly the shapes that `config`'s
    trainer holds, found from shapes alone (nothing is initialised or compiled), so that a
    checkpoint of another network is refused before anything is written."""
    import jax

    from trainers import checkpoint
    from trainers.parallel import build

    template = portable_template(state_shapes(config, build(config.static_config(), jax.local_devices()[:1])))
    try:
        checkpoint.decode(data, template)
    except checkpoint.CheckpointError as err:
        raise LaunchError(f"--resume: {err}") from None


def branch(run_dir: Path, resume: VerifiedCheckpoint):
    """Resuming from a checkpoint older than the run's latest starts a new history from it:
    the run's checkpoints after it move aside (before the metrics after it do, so that a
    crash in between still leaves checkpoints and metrics that agree), and `--resume RUN_DIR`
    and `rltui info RUN_DIR` then mean the latest of the history that goes on. Returns the
    event that says what moved, or None if nothing did."""
    from rltui.session.events import SessionEvent

    update = int(resume.metadata["update"])
    store = CheckpointStore.for_run(run_dir)
    try:
        moved = store.set_aside_after(update)
    except OSError as err:
        raise LaunchError(
            f"--resume: cannot set aside the checkpoints after update {update} in {store.directory}: "
            f"{err.strerror or err}"
        ) from None
    if moved is None:
        return None
    names = ", ".join(str(u) for u in moved.updates)
    noun = "checkpoint" if len(moved.updates) == 1 else "checkpoints"
    message = (
        f"branched at update {update}: {noun} {names} moved to {moved.folder.relative_to(run_dir)}/, "
        f"and the metrics after update {update} to {METRICS_DISCARDED}"
    )
    print(f"rltui: {run_dir}: {message}", file=sys.stderr)
    return SessionEvent(
        "branched", update, message, _elapsed(resume.metadata),
        {"checkpoints": list(moved.updates), "moved_to": str(moved.folder), "metrics_moved_to": METRICS_DISCARDED},
    )


class PreparedResume(NamedTuple):
    run_dir: Path  # where the resumed run writes, ready
    branched: Any  # the "branched" event to record, or None
    changes: ResumeChanges
    set_aside: int = 0  # metrics records after the checkpoint, moved to metrics.discarded.jsonl

    def notices(self, metadata: dict) -> list[str]:
        """What the resume does that the user may not expect, one line each: a population's
        members lose their own values of a key the resume sets for all of them."""
        from rltui.config.build import hparams_as_config
        from rltui.config.toml_text import show_setting

        def shown(name: str, value: float) -> str:
            return show_setting(hparams_as_config({name: value}).get(name, value))

        members = _member_values(metadata)
        lines = []
        for name, value in self.changes.live.items():
            own = sorted({float(v[name]) for v in members if name in v})
            if len(own) > 1:
                lines.append(f"{name} = {shown(name, value)} now applies to all {len(members)} members, in place of "
                             f"their own values ({', '.join(shown(name, v) for v in own)}); the dashboard's "
                             f"leaderboard edits one member's")
        from trainers.lr_schedule import epsilon_notice, schedule_notice

        before = self.changes.hparams_before
        now = {**(before.as_floats() if before is not None else {}), **self.changes.live}
        schedules = (notice(metadata, now, self.changes.update, members=bool(members))
                     for notice in (schedule_notice, epsilon_notice))
        if self.set_aside and self.branched is None:  # a branch says so in its own event
            noun = "record" if self.set_aside == 1 else "records"
            lines.append(f"{self.set_aside:,} metrics {noun} after the checkpoint's update {self.changes.update:,} "
                         f"(written before the run stopped) moved to {METRICS_DISCARDED}")
        return [*lines, *(line for line in schedules if line)]


def prepare_resume(config: RunConfig, resume: VerifiedCheckpoint, target: ResumeTarget,
                   given: Iterable[str] = ()) -> PreparedResume:
    """Ready the run directory for a resume under `config`, after the env's preflight: the
    checkpoint must fit the trainer; the checkpoint's own run is locked, branched, keeps its
    original config and gets the new one (another directory is made as for a new run); the
    metrics after the checkpoint are cut. `given`: the keys the user set (`--set`, a config
    file, the API's keywords). LaunchError, ConfigError or OSError, one line."""
    from rltui.runfiles.rundir import lock_run_dir, prepare_run_dir, write_config
    from rltui.session.recorder import truncate_metrics, truncate_population

    check_checkpoint_fits(config, resume.data)
    changes = resume_changes(config, resume.metadata, given)
    branched = None
    if target.new:
        run_dir = prepare_run_dir(config, target.run_dir)  # as for a new run
    else:
        run_dir = target.run_dir
        lock_run_dir(run_dir, own_folder=True)  # before anything is written there
        branched = branch(run_dir, resume)
        if config_text_differs(run_dir, config):  # a changed key, or live edits the config now holds
            keep_original_config(run_dir)
            write_config(run_dir, config)
    set_aside = truncate_metrics(run_dir, int(resume.metadata["update"]))
    population = resume.metadata.get("population")
    changes_seen = population.get("changes") if isinstance(population, dict) else None
    truncate_population(run_dir, changes_seen if isinstance(changes_seen, int) else None,
                        int(resume.metadata["update"]))
    return PreparedResume(run_dir, branched, changes, set_aside)


def apply_resume(session, recorder, prepared: PreparedResume, metadata: dict) -> None:
    """What a resume records and changes on the session built from its checkpoint (with
    `prepared.changes.hparams_before`), before it starts."""
    if prepared.branched is not None:
        recorder.on_event(prepared.branched)
    changes = prepared.changes
    if changes.other:
        session.add_listener(AfterResumed(recorder, changes.event(metadata)))
    if changes.live:
        from rltui.session import SetHParams

        # Applied before the first chunk, as an edit: logged as an hparams event and
        # kept in the checkpoints' edit log, like a change made from the dashboard.
        session.submit(SetHParams(changes.live))


def config_text_differs(run_dir: Path, config: RunConfig) -> bool:
    """Whether config.toml would change: left as it is otherwise, it keeps its time (which
    the runs view reads as the run's start)."""
    from rltui.config.toml_text import dump_toml
    from rltui.infra.read_limits import TEXT_FILE_BYTES, read_text

    try:
        return read_text(run_dir / CONFIG, TEXT_FILE_BYTES, "a config file") != dump_toml(config)
    except (OSError, UnicodeDecodeError):
        return True


def keep_original_config(run_dir: Path) -> None:
    """A resume rewrites config.toml with its own values: the configuration the run started
    with is kept once, beside it, as config.original.toml. Each resume's changes are events."""
    import os

    from rltui.infra.owner_only import open_private
    from rltui.infra.read_limits import TEXT_FILE_BYTES, read_bytes

    current, original = run_dir / CONFIG, run_dir / ORIGINAL_CONFIG
    if not current.exists() or original.exists():
        return
    # Read as every config is (a regular file, bounded), and written as every run file is
    # (0600, whole or not at all); its times are the original's, which the runs view reads
    # as the run's start.
    try:
        text = read_bytes(current, TEXT_FILE_BYTES, "a config file")
        times = current.stat()
    except OSError as err:
        raise LaunchError(f"--resume: cannot read {current}: {err.strerror or err}") from None
    tmp = original.with_name(original.name + TEMPORARY_SUFFIX)
    try:
        with open_private(tmp, "wb") as out:
            out.write(text)
        os.utime(tmp, ns=(times.st_atime_ns, times.st_mtime_ns))
        os.replace(tmp, original)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise LaunchError(f"--resume: cannot write {original}: {err.strerror or err}") from None


class AfterResumed:
    """A SessionListener that records `event` once the resumed session has said so and
    compiled (after the recorder has written both): the resume's changes follow the resume,
    and come before the first chunk's events."""

    def __init__(self, recorder, event):
        self.recorder, self.event = recorder, event

    def on_state(self, state, message) -> None:
        pass

    def on_metrics(self, snapshot) -> None:
        pass

    def on_event(self, event) -> None:
        if event.kind == "compiled" and self.event is not None:
            import dataclasses

            pending, self.event = self.event, None
            self.recorder.on_event(dataclasses.replace(pending, wall_time=event.wall_time))  # the run's clock, now


def _shown(value):
    """A key's value as the run holds it: a list-valued key (`loggers`, `pbt_keys`) is a tuple."""
    return tuple(value) if isinstance(value, list) else value


class ResumeChanges(NamedTuple):
    """What a resume changes against the checkpoint it goes on from."""

    live: dict  # live hyperparameters set to new values: applied as an edit
    hparams_before: object  # the DynamicHParams to start from: the checkpoint's live values
    other: dict  # config key -> (before, after), for the other keys
    update: int

    def event(self, metadata: dict):
        from rltui.session.events import SessionEvent

        text = ", ".join(f"{key} {_shown(before)!r} -> {_shown(after)!r}"
                         for key, (before, after) in self.other.items())
        return SessionEvent(
            "config", self.update, f"resumed with {text}", _elapsed(metadata),
            {"changes": {k: after for k, (_, after) in self.other.items()},
             "previous": {k: before for k, (before, _) in self.other.items()}},
        )


def resume_changes(config: RunConfig, metadata: dict, given: Iterable[str] = ()) -> ResumeChanges:
    """A live key changes when its new value differs from the checkpoint's; for a population,
    also when the user set it (`given`) and a member holds another value of its own: setting
    the run's base value again still sets it for every member."""
    import math

    from rltui.config.build import hparams_as_config
    from trainers.hparams import ALGO_HPARAMS

    def differs(a: float, b: float) -> bool:
        return not math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-12)

    given = frozenset(given)
    saved = {k: float(v) for k, v in (metadata.get("hparams") or {}).items() if isinstance(v, (int, float))}
    members = _member_values(metadata)
    start = config.dynamic_hparams()
    now = start.as_floats()
    live = {
        name: now[name] for name in ALGO_HPARAMS.get(config.algo, ())
        if name in saved and name in now and (
            differs(saved[name], now[name])
            or (name in given and any(differs(float(m[name]), now[name]) for m in members if name in m)))
    }
    if live:
        start = start.with_updates({name: saved[name] for name in live})
    try:
        previous = resume_config(metadata.get("config", {}), metadata.get("hparams", {}), {}).to_toml_dict()
    except ConfigError:
        previous = {}
    recorded = set(hparams_as_config(live))
    other = {
        key: (previous[key], value) for key, value in config.to_toml_dict().items()
        if key in previous and previous[key] != value and key not in recorded
    }
    return ResumeChanges(live, start, other, int(metadata.get("update", 0)))


def _member_values(metadata: dict) -> list[dict[str, float]]:
    """A population checkpoint's members' numeric values (empty for one configuration)."""
    population = metadata.get("population")
    members = population.get("members") if isinstance(population, dict) else None
    return [{k: v for k, v in m["values"].items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
            for m in members or () if isinstance(m, dict) and isinstance(m.get("values"), dict)]


def _elapsed(metadata: dict) -> float:
    try:
        return float(metadata.get("elapsed", 0.0))
    except (TypeError, ValueError):
        return 0.0
