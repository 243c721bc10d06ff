"""Where a session's training stands (`TrainingProgress`): the update it has reached, its
hyperparameters and their edit log, its clock, and whether it has diverged.

The session and each of its parts are given the same one: they read and change it on the
session thread; other threads only read it (each field is replaced whole).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from trainers.hparams import DynamicHParams


@dataclasses.dataclass(eq=False)
class TrainingProgress:
    hparams: DynamicHParams  # the run's own values (a population's members have their own)
    clock: Callable[[], float]
    started_at: float  # on `clock`: where the run's elapsed time counts from (a resume's goes on)
    updates_done: int = 0
    edits: list[dict] = dataclasses.field(default_factory=list)  # the edit log, carried in checkpoints
    # Losses or gradients went non-finite: training paused, and no checkpoint is written
    # until a resume, a rollback or a thawed member clears it.
    nonfinite: bool = False

    def elapsed(self) -> float:
        return self.clock() - self.started_at
