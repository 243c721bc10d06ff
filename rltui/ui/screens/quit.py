"""Asks before quitting while training runs: quitting stops the run."""

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

    def compose(self) -> ComposeResult:
        with Vertical(id="quit-dialog"):
            yield Label("Training is running. Stop it and quit?", id="quit-question")
            yield Label("Run files are kept; the chunk in flight finishes first.", id="quit-detail")
            with Horizontal(id="quit-buttons"):
                yield Button("Stop and quit (y)", id="quit-yes", variant="error")
                yield Button("Keep training (n)", id="quit-no", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#quit-dialog").border_title = "quit"
        self.query_one("#quit-no", Button).focus()

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "quit-yes")

    def action_answer(self, stop: bool) -> None:
        self.dismiss(stop)
