"""Commands a client sends to a `TrainingSession`; applied in order at chunk boundaries."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType


@dataclasses.dataclass(frozen=True)
class Pause:
    pass


@dataclasses.dataclass(frozen=True)
class Resume:
    pass


@dataclasses.dataclass(frozen=True)
class SetHParams:
    changes: Mapping[str, float]

    def __post_init__(self) -> None:
        object.__setattr__(self, "changes", MappingProxyType(dict(self.changes)))


@dataclasses.dataclass(frozen=True)
class SaveCheckpoint:
    pass


@dataclasses.dataclass(frozen=True)
class Rollback:
    """Restore the latest checkpoint (keeping the current hyperparameters), e.g. after
    training diverged and the learning rate was lowered."""


@dataclasses.dataclass(frozen=True)
class Stop:
    pass


Command = Pause | Resume | SetHParams | SaveCheckpoint | Rollback | Stop
