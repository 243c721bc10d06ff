"""The help screen (`?`): every key, from the same bindings the footer shows."""

from __future__ import annotations

from collections.abc import Iterable

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

DASHBOARD_NOTES = (
    "Pause, edits, checkpoints and stop take effect at the next chunk boundary (a fraction "
    'of a second): the status line says "pausing..." until the session confirms. Edits to '
    "dynamic hyperparameters do not recompile; static keys (dimmed) need a new run. An edit "
    "is marked on the chart (│) and logged with its update index.\n\n"
    "Ctrl+P opens the command palette: every action is there, and Theme switches the "
    "colours. Themes are TOML files: the bundled ones, and your own in "
    "$XDG_CONFIG_HOME/rltui/themes/ (default ~/.config/rltui/themes/)."
)
RUNS_NOTES = (
    "Typing a letter no key uses starts the filter; / goes to it, Esc back to the list. A run is "
    "shown when every word of the filter is in its name, env, algo, state or a key=value of its "
    "configuration (lr=0.001).\n\n"
    "Space selects runs: their curves are drawn below, and each run's configuration is listed "
    "as its differences from the first one selected. Enter attaches to a live run, or opens a "
    "run's curves full screen."
)


def key_help(bindings: Iterable[Binding], key_display) -> list[tuple[str, str]]:
    """(keys, what they do), one row per distinct help text: p and space share a row."""
    rows: dict[str, list[str]] = {}
    for binding in bindings:
        text = binding.tooltip or binding.description
        if not text:
            continue
        keys = rows.setdefault(text, [])
        for key in binding.key.split(","):
            shown = key_display(Binding(key.strip(), ""))
            if shown not in keys:
                keys.append(shown)
    return [(", ".join(keys), text) for text, keys in rows.items()]


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "Close")]

    def __init__(self, bindings: Iterable[Binding], notes: str = DASHBOARD_NOTES):
        super().__init__()
        self.bindings = list(bindings)
        self.notes = notes

    def compose(self) -> ComposeResult:
        rows = key_help(self.bindings, self.app.get_key_display)
        rows.append(("ctrl+p", "command palette: every action, and the theme"))
        with VerticalScroll(id="help-dialog"):
            # A grid, so that a description that wraps goes on under itself, not under the keys.
            with Grid(id="help-keys"):
                for keys, text in rows:
                    yield Static(keys, classes="help-key", markup=False)
                    yield Static(text, classes="help-text", markup=False)
            yield Static(self.notes, id="help-notes", markup=False)

    def on_mount(self) -> None:
        self.query_one("#help-dialog").border_title = "help (Esc closes)"

    @property
    def rows(self) -> list[tuple[str, str]]:
        """(keys, description) as shown."""
        keys = [str(s.content) for s in self.query(".help-key").results(Static)]
        texts = [str(s.content) for s in self.query(".help-text").results(Static)]
        return list(zip(keys, texts))

    @property
    def text(self) -> str:
        return "\n".join(f"{keys}  {text}" for keys, text in self.rows)
