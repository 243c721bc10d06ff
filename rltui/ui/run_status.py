"""The run as the dashboard knows it: its state as the session last said, what the user
asked of it and has not seen done yet (a pause, an edit...), whether the dashboard is
quitting, how the run ended; and which keys can act on it now.

No Textual here: the App holds one `RunStatus`, tells it the session's states and events
and the user's requests, and asks it what to show and which keys apply. A key that cannot
act now is hidden from the footer; pressing it, or its palette command, says why
(`rltui.ui.availability`).
"""

from __future__ import annotations

from rltui.runfiles.discovery import RunState, state_of
from rltui.session import SessionEvent, SessionState
from rltui.ui import availability

# A live run's states: neither stopping nor ended (finished or failed).
LIVE = (SessionState.IDLE, SessionState.COMPILING, SessionState.RUNNING, SessionState.PAUSED)
# The events that say how a session ended, as `rltui runs` reads them (state_of): a run
# in the FINISHED state was stopped, finished its total, or diverged.
ENDING_EVENTS = ("compiled", "resumed", "nonfinite", "rolled back", "target_reached", "finished", "error")


class RunStatus:
    def __init__(self, state: SessionState, *, attached: bool, num_seeds: int):
        self.state = state
        self.message: str | None = None  # what the session said with its state
        self.pending: str | None = None  # "pausing", "resuming", "stopping": asked, not yet confirmed
        self.pending_edits: dict[str, float] = {}  # the run's own values, sent and not yet applied
        self.quitting = False  # Stop sent; the app exits when the session has ended
        self.attached = attached  # the run goes on without this dashboard
        self._num_seeds = num_seeds
        self._ending_events: list[dict] = []  # those of ENDING_EVENTS since the session (re)started

    @property
    def is_live(self) -> bool:
        return self.state in LIVE and not self.quitting and self.pending != "stopping"

    @property
    def wants_paused(self) -> bool:
        """Paused, or asked to pause: what the next press of p should undo."""
        return self.pending == "pausing" or (self.state is SessionState.PAUSED and self.pending != "resuming")

    @property
    def ended_as(self) -> RunState | None:
        """How a FINISHED run ended, as `rltui runs` names it (finished, stopped or
        diverged) from the same events; None while it runs, or if its last event has not
        come (yet)."""
        if self.state is not SessionState.FINISHED:
            return None
        ending = state_of(self._ending_events, live=False)
        return None if ending.name == "crashed" else ending

    def changed(self, state: SessionState, message: str | None) -> None:
        """The session's new state; a request it confirms, or any once the run is no
        longer live, is pending no more."""
        confirmed = (self.pending == "pausing" and state is SessionState.PAUSED) or (
            self.pending == "resuming" and state is SessionState.RUNNING
        )
        self.state, self.message = state, message
        if confirmed or state not in LIVE:
            self.pending = None

    def keep_if_ending(self, event: SessionEvent) -> bool:
        """Keep `event` if it is one that says how the run ends; whether it is."""
        if event.kind not in ENDING_EVENTS:
            return False
        if event.kind in ("compiled", "resumed"):
            self._ending_events.clear()  # a new session: what ended the last one no longer counts
        self._ending_events.append(event.to_json())
        return True

    # --- keys ------------------------------------------------------------------------
    def applies(self, action: str) -> bool:
        return availability.applies(action, attached=self.attached)

    def unavailable_reason(self, action: str, *, population: bool) -> str | None:
        """Why `action` cannot act now (`population`: the run is one); None if it can."""
        if action in availability.VIEW_ACTIONS:
            return availability.view_unavailable_reason(action, num_seeds=self._num_seeds, population=population)
        return availability.unavailable_reason(action, state=self.state, pending=self.pending, quitting=self.quitting)

    def shows(self, action: str, parameters: tuple[object, ...], *, population: bool) -> bool:
        """Whether the footer shows `action`'s key now (Textual's `check_action`)."""
        if action == "explain":  # the fallback binding of a key whose action cannot act now
            (name,) = parameters
            return self.applies(str(name)) and self.unavailable_reason(str(name), population=population) is not None
        if not self.applies(action):
            return False
        if action in availability.RUN_ACTIONS and self.unavailable_reason(action, population=population) is not None:
            return False  # hidden from the footer; its key's explain binding says why
        if action == "pause":
            return not self.wants_paused
        if action == "resume":
            return self.wants_paused
        return True
