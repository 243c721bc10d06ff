"""Asks before stopping a run: quitting an in-process run stops it (`QuitConfirm`); an
attached dashboard stops the job only on its own key (`StopRunConfirm`)."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label


class QuitConfirm(ModalScreen[bool]):
    BINDINGS = [
        Binding("y", "answer(True)", "Stop and quit"),
        Binding("n,escape", "answer(False)", "Keep training"),
    ]
    TITLE = "quit"
    QUESTION = "Training is running. Stop it and quit?"
    DETAIL = "Run files are kept; the chunk in flight finishes first."
    YES = "Stop and quit (y)"

    def compose(self) -> ComposeResult:
        with Vertical(id="quit-dialog"):
            yield Label(self.QUESTION, id="quit-question")
            yield Label(self.DETAIL, id="quit-detail")
            with Horizontal(id="quit-buttons"):
                yield Button(self.YES, id="quit-yes", variant="error")
                yield Button("Keep training (n)", id="quit-no", variant="primary")

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
        Binding("n,escape", "answer(False)", "Keep training"),
    ]
    TITLE = "stop the run"
    QUESTION = "Stop the run? Training ends for every client watching it."
    DETAIL = "A final checkpoint is written; this dashboard stays open."
    YES = "Stop the run (y)"
