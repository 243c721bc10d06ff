"""What a browser tab of `rltui serve` shows when there is no run to attach to (it has
ended, or its process went away): the reason, in the tab, not only in the terminal
that serves it. A tab can only show a Textual app, so this is one, with nothing to do
but say why and close."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Label


class AttachUnavailableApp(App[None]):
    CSS = """
    Screen { align: center middle; }
    #unavailable { width: 80; max-width: 100%; height: auto; border: thick $error; padding: 0 1; }
    #unavailable Label { width: 100%; }
    #unavailable-title { text-style: bold; color: $text-error; }
    #unavailable-hint { color: $text-muted; margin-top: 1; }
    """
    TITLE = "rltui"
    BINDINGS = [Binding("q,escape,enter", "quit", "Close")]

    def __init__(self, reason: str, hint: str):
        super().__init__()
        self.reason = reason
        self.hint = hint

    def compose(self) -> ComposeResult:
        with Vertical(id="unavailable"):
            yield Label("No run to show", id="unavailable-title")
            yield Label(self.reason, id="unavailable-reason", markup=False)
            yield Label(self.hint, id="unavailable-hint", markup=False)
