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
    # A population: the members the edit applies to; None, every member.
    members: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "changes", MappingProxyType(dict(self.changes)))
        if self.members is not None:
            object.__setattr__(self, "members", tuple(self.members))


@dataclasses.dataclass(frozen=True)
class FreezeMembers:
    """A population: stop (or, with `frozen` False, restart) updating these members; a
    frozen member's parameters are kept as they are."""

    members: tuple[int, ...]
    frozen: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "members", tuple(self.members))


@dataclasses.dataclass(frozen=True)
class CloneMember:
    """A population: copy member `source`'s parameters and optimizer state into each of
    `targets`, whose hyperparameters become the source's, each perturbed key multiplied by
    `factor` (1.0: an exact copy)."""

    source: int
    targets: tuple[int, ...]
    factor: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "targets", tuple(self.targets))


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


Command = Pause | Resume | SetHParams | SaveCheckpoint | Rollback | Stop | FreezeMembers | CloneMember
