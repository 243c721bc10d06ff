"""The help screen (`?`): every key, from the same bindings the footer shows."""

from __future__ import annotations

from typing import Iterable

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

_NOTES = """\
Pause, edits, checkpoints and stop take effect at the next chunk boundary (a fraction of a
second): the status line says "pausing..." until the session confirms. Edits to dynamic
hyperparameters do not recompile; static keys (dimmed) need a new run. An edit is marked
on the chart (│) and logged with its update index. Ctrl+P opens the command palette:
every action is there, and "Theme" switches the colours. Theme files: themes/*.toml,
and your own in ~/.config/rltui/themes/ (or $XDG_CONFIG_HOME/rltui/themes/)."""


def _key_name(binding: Binding, app) -> str:
    return ", ".join(app.get_key_display(Binding(key.strip(), "")) for key in binding.key.split(","))


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "Close")]

    def __init__(self, bindings: Iterable[Binding]):
        super().__init__()
        self.bindings = [b for b in bindings if b.description]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-dialog"):
            yield Static(id="help-keys", markup=False)
            yield Static(_NOTES, id="help-notes", markup=False)

    def on_mount(self) -> None:
        self.query_one("#help-dialog").border_title = "help: Esc closes"
        keys = [(_key_name(b, self.app), b.tooltip or b.description) for b in self.bindings]
        keys.append(("ctrl+p", "command palette (all actions, theme)"))
        width = max(len(k) for k, _ in keys)
        self.query_one("#help-keys", Static).update("\n".join(f"{k:>{width}}  {text}" for k, text in keys))
