"""The clone dialog: which members take over a member's parameters, and by what factor
its hyperparameters are perturbed. Checked here (indices in range, not the source, a
positive factor), so a bad entry is a one-line note in the dialog and never a command."""

from __future__ import annotations

import dataclasses
import math
import re

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label


@dataclasses.dataclass(frozen=True)
class CloneChoice:
    targets: tuple[int, ...]
    factor: float


class CloneError(ValueError):
    pass


def parse_targets(text: str, source: int, num_members: int) -> tuple[int, ...]:
    """Member indices typed as "1 4" or "1, 4"."""
    words = [w for w in re.split(r"[\s,]+", text.strip()) if w]
    if not words:
        raise CloneError("type the members to clone into, e.g. 1 4")
    targets = []
    for word in words:
        if not word.isdigit() or not 0 <= int(word) < num_members:
            raise CloneError(f"member {word!r}: expected a member index from 0 to {num_members - 1}")
        if int(word) == source:
            raise CloneError(f"member {source} is the one cloned: pick others")
        targets.append(int(word))
    return tuple(dict.fromkeys(targets))


def parse_factor(text: str) -> float:
    text = text.strip()
    if not text:  # cleared by accident: never a silent exact copy
        raise CloneError("factor: empty; type a positive number, 1.0 for an exact copy")
    try:
        factor = float(text)
    except ValueError:
        raise CloneError(f"factor: not a number: {text!r}; expected a positive number, 1.0 = an exact copy") from None
    if not (math.isfinite(factor) and factor > 0):
        raise CloneError(f"factor: {text}: expected a positive number, 1.0 = an exact copy")
    return factor


class CloneDialog(ModalScreen[CloneChoice | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, source: int, targets: tuple[int, ...], num_members: int, keys: tuple[str, ...] = ()):
        super().__init__()
        self.source = source
        self.targets = tuple(targets)  # empty: typed in the dialog
        self.num_members = num_members
        self.keys = keys  # the hyperparameters the factor multiplies

    def compose(self) -> ComposeResult:
        with Vertical(id="clone-dialog"):
            into = ", ".join(map(str, self.targets)) if self.targets else "the members typed below"
            yield Label(f"Member {self.source}'s parameters and optimizer state go into {into}, at the next "
                        "chunk boundary.", id="clone-text", markup=False)
            if not self.targets:
                yield Input(placeholder="into members, e.g. 1 4", id="clone-targets")
            keys = ", ".join(self.keys) or "the swept hyperparameters"
            yield Label(f"factor: {keys} are multiplied by it (1.0 = an exact copy)", classes="clone-rule",
                        markup=False)
            yield Input("1.0", id="clone-factor", select_on_focus=True)
            yield Label("", id="clone-error", markup=False)
            yield Label("Tab next field · Enter clone · Esc cancel", classes="clone-rule")

    def on_mount(self) -> None:
        self.query_one("#clone-dialog").border_title = f"clone member {self.source}"
        self._set_error(None)
        self.query_one("#clone-targets" if not self.targets else "#clone-factor", Input).focus()

    def _set_error(self, message: str | None) -> None:
        error = self.query_one("#clone-error", Label)
        error.update(message or "")
        error.display = bool(message)

    @property
    def error_text(self) -> str:
        label = self.query_one("#clone-error", Label)
        return str(label.content) if label.display else ""

    @on(Input.Submitted)
    def _submitted(self) -> None:
        try:
            targets = self.targets
            if not targets:
                targets = parse_targets(self.query_one("#clone-targets", Input).value, self.source, self.num_members)
            factor = parse_factor(self.query_one("#clone-factor", Input).value)
        except CloneError as err:
            self._set_error(str(err))
            return
        self.dismiss(CloneChoice(targets, factor))

    def action_cancel(self) -> None:
        self.dismiss(None)
