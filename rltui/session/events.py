"""Session states and the events a session reports to its listeners."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any


class SessionState(str, enum.Enum):
    IDLE = "idle"
    COMPILING = "compiling"
    RUNNING = "running"
    PAUSED = "paused"
    STOPPING = "stopping"
    FINISHED = "finished"
    ERROR = "error"

    @property
    def is_final(self) -> bool:
        return self in (SessionState.FINISHED, SessionState.ERROR)


@dataclasses.dataclass(frozen=True)
class SessionEvent:
    """Something worth a line in the events log: an edit, a pause, an error..."""

    kind: str  # compiled, hparams, paused, resumed, stopping, finished, aborted, error, nonfinite, warning
    update: int  # updates completed when it happened
    message: str
    wall_time: float  # seconds since the session started
    data: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "data", MappingProxyType(dict(self.data)))

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "update": self.update,
            "wall_time": round(self.wall_time, 4),
            "message": self.message,
            **({"data": dict(self.data)} if self.data else {}),
        }


# A population's records of what another event already says: the session reports a member
# edit, a resume and a rollback twice, as the event every run has ("hparams": the chart's
# marks, exports; "resumed", "rolled back") and as a "population" event with the member
# table after it (population.jsonl's lineage). Logs for people show the first.
_REPEATED_ACTIONS = ("edit", "resumed", "rolled_back")


def repeats_another_event(event: SessionEvent) -> bool:
    """Whether `event` is a population's record of an edit, resume or rollback that another
    event already reports (see _REPEATED_ACTIONS)."""
    return event.kind == "population" and event.data.get("action") in _REPEATED_ACTIONS
