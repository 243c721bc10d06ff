"""The training session: one thread running a trainer, driven by commands, reporting
immutable snapshots. Never imports textual."""

from rltui.session.boundary_commands import validate_changes
from rltui.session.commands import Pause, Resume, Rollback, SaveCheckpoint, SetHParams, Stop
from rltui.session.controller import SessionListener, TrainingSession
from rltui.session.events import SessionEvent, SessionState
from rltui.session.metrics import MetricsSnapshot, UpdateRecord

__all__ = [
    "MetricsSnapshot",
    "Pause",
    "Resume",
    "Rollback",
    "SaveCheckpoint",
    "SessionEvent",
    "SessionListener",
    "SessionState",
    "SetHParams",
    "Stop",
    "TrainingSession",
    "UpdateRecord",
    "validate_changes",
]
