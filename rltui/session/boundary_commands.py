"""Commands at chunk boundaries (`BoundaryCommands`, which the session holds): taking the
queued commands and the next chunk's size, waiting while paused, and applying each command
in order; and the check of a hyperparameter edit that the session's clients share.

Everything here but `validate_changes` runs on the session thread.
"""

from __future__ import annotations

import queue
from typing import NamedTuple

from rltui.session.checkpointing import SessionCheckpoints
from rltui.session.commands import (
    CloneMember,
    Command,
    FreezeMembers,
    Pause,
    Resume,
    Rollback,
    SaveCheckpoint,
    SetHParams,
    Stop,
)
from rltui.session.distributed import BoundarySync
from rltui.session.events import SessionState
from rltui.session.params_service import ParamsService
from rltui.session.population_steering import PopulationSteering
from rltui.session.progress import TrainingProgress
from rltui.session.reporter import SessionReporter
from trainers.hparams import HParamError, check_changes, show_hparam


def validate_changes(changes: dict[str, object]) -> dict[str, float]:
    """Check a hyperparameter edit; raise HParamError naming the first bad field."""
    return check_changes(changes)


class Applied(NamedTuple):
    """What a chunk boundary's commands left: whether training goes on, and the next
    chunk's size (in a multi-process run, process 0's)."""

    go_on: bool
    chunk_size: int


class BoundaryCommands:
    def __init__(
        self,
        commands: queue.Queue[Command],
        *,
        sync: BoundarySync,
        progress: TrainingProgress,
        reporter: SessionReporter,
        checkpoints: SessionCheckpoints,
        params: ParamsService,
        steering: PopulationSteering | None,
    ):
        self._commands = commands  # the session's queue: clients put, this takes
        self._sync = sync
        self._progress = progress
        self._reporter = reporter
        self._checkpoints = checkpoints
        self._params = params  # parameters requests are answered at each boundary, paused or not
        self._steering = steering  # None: the run is not a population

    def apply(self, chunk_size: int) -> Applied:
        """Apply queued commands in order; block while paused."""
        while True:
            boundary = self._sync.boundary(self._commands, self._reporter.state is SessionState.PAUSED, chunk_size)
            chunk_size = boundary.chunk_size
            for command in boundary.commands:
                if not self._apply(command):
                    return Applied(False, chunk_size)
            self._params.serve()
            if not boundary.commands and self._reporter.state is not SessionState.PAUSED:
                return Applied(True, chunk_size)

    def _apply(self, command: Command) -> bool:
        """False means stop."""
        reporter, progress = self._reporter, self._progress
        paused = reporter.state is SessionState.PAUSED
        if isinstance(command, Stop):
            reporter.set_state(SessionState.STOPPING)
            reporter.event("stopping", f"stop requested at update {progress.updates_done}")
            return False
        if isinstance(command, Pause) and not paused:
            reporter.set_state(SessionState.PAUSED)
            reporter.event("paused", f"paused at update {progress.updates_done}")
        elif isinstance(command, Resume) and paused:
            progress.nonfinite = False
            reporter.set_state(SessionState.RUNNING)
            reporter.event("resumed", f"resumed at update {progress.updates_done}")
        elif isinstance(command, SetHParams):
            if self._steering is not None:
                self._steering.apply_hparams(dict(command.changes), command.members)
            elif command.members is not None:
                reporter.event("warning", "edit refused: this run is not a population; send the edit without members")
            else:
                self._apply_hparams(dict(command.changes))
        elif isinstance(command, (FreezeMembers, CloneMember)):
            if self._steering is None:
                reporter.event("warning", f"{type(command).__name__}: this run is not a population")
            else:
                self._steering.apply_command(command)
        elif isinstance(command, SaveCheckpoint):
            self._checkpoints.save("requested")
        elif isinstance(command, Rollback):
            self._checkpoints.rollback()
        return True

    def _apply_hparams(self, changes: dict[str, object]) -> None:
        progress = self._progress
        try:
            values = validate_changes(changes)
        except HParamError as err:
            self._reporter.event("warning", f"edit refused: {err}")
            return
        old = progress.hparams.as_floats()
        progress.hparams = progress.hparams.with_updates(values)
        text = ", ".join(f"{k} {show_hparam(k, old[k])} -> {show_hparam(k, v)}" for k, v in values.items())
        progress.edits.append({"update": progress.updates_done, "changes": values})
        self._reporter.event("hparams", f"set {text}", changes=values, previous={k: old[k] for k in values})
