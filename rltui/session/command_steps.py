"""Commands at chunk boundaries (`TrainingSession`'s share of them): taking the queued
commands and the next chunk's size, waiting while paused, and applying each command in
order; and the check of a hyperparameter edit that the session's clients share.

A mixin of `TrainingSession`: it runs on the session thread.
"""

from __future__ import annotations

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
from rltui.session.events import SessionState
from trainers.hparams import HParamError, check_changes, show_hparam


def validate_changes(changes: dict[str, object]) -> dict[str, float]:
    """Check a hyperparameter edit; raise HParamError naming the first bad field."""
    return check_changes(changes)


class CommandSteps:
    def _apply_commands(self) -> bool:
        """Apply queued commands in order; block while paused. False means stop. Also
        takes the next chunk's size (in a multi-process run, process 0's)."""
        while True:
            boundary = self._sync.boundary(self._commands, self.state is SessionState.PAUSED, self._chunk_size)
            self._chunk_size = boundary.chunk_size
            for command in boundary.commands:
                if not self._apply_command(command):
                    return False
            self._serve_params()
            if not boundary.commands and self.state is not SessionState.PAUSED:
                return True

    def _apply_command(self, command: Command) -> bool:
        """False means stop."""
        paused = self.state is SessionState.PAUSED
        if isinstance(command, Stop):
            self._set_state(SessionState.STOPPING)
            self._event("stopping", f"stop requested at update {self._updates_done}")
            return False
        if isinstance(command, Pause) and not paused:
            self._set_state(SessionState.PAUSED)
            self._event("paused", f"paused at update {self._updates_done}")
        elif isinstance(command, Resume) and paused:
            self.nonfinite = False
            self._set_state(SessionState.RUNNING)
            self._event("resumed", f"resumed at update {self._updates_done}")
        elif isinstance(command, SetHParams):
            if self.population is not None:
                self._apply_member_hparams(dict(command.changes), command.members)
            elif command.members is not None:
                self._event("warning", "edit refused: this run is not a population; send the edit without members")
            else:
                self._apply_hparams(dict(command.changes))
        elif isinstance(command, (FreezeMembers, CloneMember)):
            self._apply_member_command(command)
        elif isinstance(command, SaveCheckpoint):
            self._save("requested")
        elif isinstance(command, Rollback):
            self._rollback()
        return True

    def _apply_hparams(self, changes: dict[str, object]) -> None:
        try:
            values = validate_changes(changes)
        except HParamError as err:
            self._event("warning", f"edit refused: {err}")
            return
        old = self._hparams.as_floats()
        self._hparams = self._hparams.with_updates(values)
        text = ", ".join(f"{k} {show_hparam(k, old[k])} -> {show_hparam(k, v)}" for k, v in values.items())
        self._edits.append({"update": self._updates_done, "changes": values})
        self._event("hparams", f"set {text}", changes=values, previous={k: old[k] for k in values})
