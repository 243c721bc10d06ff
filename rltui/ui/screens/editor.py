"""The hyperparameter editor: pick a field, type a value, Enter applies.

Validation happens here, with the session's own rules (`validate_changes`), so an invalid
value is refused with the reason and never reaches the trainer. The screen returns the
validated change (`{name: value}`) or None when cancelled; the app submits it.
"""

from __future__ import annotations

from collections.abc import Mapping

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, OptionList
from textual.widgets.option_list import Option

from rltui.formatting import SWITCHES, fmt_hparam
from rltui.session import validate_changes
from rltui.ui.widgets.hparams import annealed, learned_instead
from trainers.hparams import EDITABLE_HPARAMS, HParamError, hparam_rule


def edit_rule(name: str) -> str:
    """What `name` takes, as typed in the editor: a switch true or false (or 1, 0)."""
    return "true or false" if name in SWITCHES else hparam_rule(name)


def parse_edit(name: str, text: str) -> dict[str, float]:
    """`{name: value}` for a typed value, or HParamError saying why not."""
    text = text.strip()
    if not text:
        raise HParamError(f"{name}: type a value ({edit_rule(name)})")
    if name in SWITCHES and text.lower() in ("true", "false"):
        return validate_changes({name: 1.0 if text.lower() == "true" else 0.0})
    if name in SWITCHES and text not in ("0", "1"):
        raise HParamError(f"{name}: {text!r}: expected {edit_rule(name)}")
    try:
        number = float(text)
    except ValueError:
        raise HParamError(f"{name}: not a number: {text!r}; expected {edit_rule(name)}") from None
    return validate_changes({name: number})


class HParamEditor(ModalScreen[dict[str, float] | None]):
    """The value input has the focus from the start; up/down (which an Input ignores)
    move through the fields, so "e, down, 0.99, Enter" edits gamma.

    The app installs one editor and reuses it (`prepare` before each opening): building
    the dialog costs more than a frame, and the editor should open at once."""

    # Up and down take priority: checked as each key arrives, before any key after them
    # reaches the value input. Otherwise they would move the field only once the input had
    # passed them up, after the keys typed behind them, and clear those keys.
    BINDINGS = [
        Binding("escape", "cancel", "Cancel"),
        Binding("up", "move_field(-1)", "Previous field", show=False, priority=True),
        Binding("down", "move_field(1)", "Next field", show=False, priority=True),
    ]

    def __init__(self, values: Mapping[str, float], fields: tuple[str, ...] = EDITABLE_HPARAMS):
        super().__init__()
        self.fields = tuple(fields)  # the live-editable keys of the run's algorithm
        self.values = dict(values)
        self.field = self.fields[0]
        self.target: str | None = None  # a population: whom the edit applies to ("members 1, 3")

    def compose(self) -> ComposeResult:
        with Vertical(id="editor-dialog"):
            yield Label(self._title(), id="editor-title")
            fields = OptionList(*(self._option(name) for name in self.fields), id="editor-fields")
            fields.can_focus = False  # typing goes to the value; up/down move the field
            yield fields
            yield Label("", id="editor-rule", markup=False)
            yield Input(id="editor-value", select_on_focus=True)
            yield Label("", id="editor-error", markup=False)
            yield Label("↑↓ field · type a value · Enter apply · Esc cancel", id="editor-hint")

    def _option(self, name: str) -> Option:
        # One column of values, after the longest name (bootstrap_truncated).
        width = max(len(field) for field in self.fields)
        return Option(f"{name:<{width}} {fmt_hparam(name, self.values.get(name))}", id=name)

    def prepare(self, values: Mapping[str, float], target: str | None = None) -> None:
        """Fresh values and a clean input for the next opening, on the first field: users
        count their down presses from it, whatever they edited last time. `target`: in a
        population, the members the edit applies to, for the title."""
        self.values = dict(values)
        self.field = self.fields[0]
        self.target = target
        if self.is_mounted:
            self._reset()

    def _title(self) -> str:
        to = f" to {self.target}" if self.target else ""
        return f"Applied{to} at the next chunk boundary, without recompiling."

    def on_mount(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.query_one("#editor-dialog").border_title = "hyperparameters" + (f": {self.target}" if self.target else "")
        self.query_one("#editor-title", Label).update(self._title())
        fields = self.query_one("#editor-fields", OptionList)
        for name in self.fields:
            fields.replace_option_prompt(name, self._option(name).prompt)
        fields.highlighted = self.fields.index(self.field)
        self._show_field()
        self.query_one("#editor-value", Input).focus()

    def _select_field(self, name: str) -> None:
        if name != self.field:
            self.field = name
            self._show_field()

    def _show_field(self) -> None:
        """The rule, the current value and an empty input for `self.field`: text typed
        (or refused) for another field must not carry over into this one."""
        current = fmt_hparam(self.field, self.values.get(self.field))
        now = f"now {current}"
        if annealed(self.field, self.values):
            now = f"configured {current}: annealing starts there"
        elif learned_instead(self.field, self.values):
            now = f"now {current}: set aside while autotune learns it"
        self.query_one("#editor-rule", Label).update(f"{self.field}: {edit_rule(self.field)} ({now})")
        value = self.query_one("#editor-value", Input)
        value.value = ""
        value.placeholder = f"new {self.field}, e.g. {current}"
        self._set_error(None)

    def _set_error(self, message: str | None) -> None:
        error = self.query_one("#editor-error", Label)
        error.update(message or "")
        error.display = bool(message)

    @on(OptionList.OptionHighlighted, "#editor-fields")
    def _field_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        # A click selects the field here; keys have selected it already (`action_move_field`,
        # `_reset`). A report of a highlight the list has since moved past arrives after
        # keys typed for the field now shown: acting on it would clear them and go back.
        if event.option.id and event.option_index == event.option_list.highlighted:
            self._select_field(event.option.id)

    @on(OptionList.OptionSelected, "#editor-fields")
    def _field_clicked(self, event: OptionList.OptionSelected) -> None:
        self.query_one("#editor-value", Input).focus()

    def action_move_field(self, step: int) -> None:
        index = (self.fields.index(self.field) + step) % len(self.fields)
        # Selected here rather than on the list's OptionHighlighted message: keys typed
        # right after the arrow (a paste, a fast typist) must land in the cleared input.
        self._select_field(self.fields[index])
        self.query_one("#editor-fields", OptionList).highlighted = index

    @on(Input.Submitted, "#editor-value")
    def _value_submitted(self, event: Input.Submitted) -> None:
        try:
            change = parse_edit(self.field, event.value)
        except HParamError as err:
            self._set_error(str(err))
            return
        self.dismiss(change)

    @property
    def error_text(self) -> str:
        label = self.query_one("#editor-error", Label)
        return str(label.content) if label.display else ""

    def action_cancel(self) -> None:
        self.dismiss(None)
