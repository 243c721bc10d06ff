"""Asks before stopping a run: quitting an in-process run stops it (`QuitConfirm`); an
attached dashboard stops the job only on its own key (`StopRunConfirm`); and before a
rollback, which undoes the updates since the latest checkpoint (`RollbackConfirm`)."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label

from rltui.session import SessionState

# What training is doing, by the session's state, or by the user's request that the
# session has not confirmed yet (the status line's "pausing..." and "resuming...").
_DOING = {
    SessionState.IDLE: "starting",
    SessionState.COMPILING: "compiling",
    SessionState.RUNNING: "running",
    SessionState.PAUSED: "paused",
    "pausing": "pausing",
    "resuming": "resuming",
}
# What happens before the run stops: nothing runs while paused; a compile cannot be cut short.
_BEFORE_STOPPING = {
    SessionState.COMPILING: "Run files are kept; the compile finishes first.",
    SessionState.PAUSED: "Run files are kept.",
}


class QuitConfirm(ModalScreen[bool]):
    """Worded by what training is doing: a paused run is not "running"."""

    BINDINGS = [
        Binding("y", "answer(True)", "Stop and quit"),
        Binding("n,escape", "answer(False)", "Cancel"),
    ]
    TITLE = "quit"
    YES = "Stop and quit (y)"

    def __init__(self, state: SessionState = SessionState.RUNNING, pending: str | None = None):
        super().__init__()
        self.state = state
        self.pending = pending  # "pausing" or "resuming": asked, not confirmed yet

    @property
    def question(self) -> str:
        doing = _DOING.get(self.pending) or _DOING.get(self.state, self.state.value)
        return f"Training is {doing}. Stop it and quit?"

    @property
    def detail(self) -> str:
        if self.pending is None and self.state in _BEFORE_STOPPING:
            return _BEFORE_STOPPING[self.state]
        return "Run files are kept; the chunk in flight finishes first."

    @property
    def no(self) -> str:
        """The button that leaves the run as it is: a paused run is not kept training."""
        paused = self.pending == "pausing" or (self.state is SessionState.PAUSED and self.pending != "resuming")
        return "Keep it paused (n)" if paused else "Keep training (n)"

    def compose(self) -> ComposeResult:
        with Vertical(id="quit-dialog"):
            yield Label(self.question, id="quit-question", markup=False)
            yield Label(self.detail, id="quit-detail", markup=False)
            with Horizontal(id="quit-buttons"):
                yield Button(self.YES, id="quit-yes", variant="error")
                yield Button(self.no, id="quit-no", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#quit-dialog").border_title = self.TITLE
        self.query_one("#quit-no", Button).focus()

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "quit-yes")

    def action_answer(self, stop: bool) -> None:
        self.dismiss(stop)


class StopRunConfirm(QuitConfirm):
    """Stopping an attached job ends it for every client watching it."""

    BINDINGS = [
        Binding("y", "answer(True)", "Stop the run"),
        Binding("n,escape", "answer(False)", "Cancel"),
    ]
    TITLE = "stop the run"
    YES = "Stop the run (y)"

    @property
    def question(self) -> str:
        return "Stop the run? Training ends for every client watching it."

    @property
    def detail(self) -> str:
        return "A final checkpoint is written; this dashboard stays open."


class RollbackConfirm(QuitConfirm):
    """A rollback undoes every update since the latest checkpoint: one key press is not
    enough for that (it is offered only while paused)."""

    BINDINGS = [
        Binding("y", "answer(True)", "Roll back"),
        Binding("n,escape", "answer(False)", "Cancel"),
    ]
    TITLE = "roll back"
    YES = "Roll back (y)"

    def __init__(self, *, population: bool = False):
        super().__init__(SessionState.PAUSED)
        self.population = population

    @property
    def question(self) -> str:
        return "Roll back to the latest checkpoint? The updates since it are undone."

    @property
    def detail(self) -> str:
        if self.population:
            return "Each member goes back to its parameters and values as the checkpoint holds them."
        return "The parameters go back to the checkpoint's; the hyperparameters are kept as they are now."
