"""The hyperparameter editor: pick a field, type a value, Enter applies.

Validation happens here, with the session's own rules (`validate_changes`), so an invalid
value is refused with the reason and never reaches the trainer. The screen returns the
validated change (`{name: value}`) or None when cancelled; the app submits it.
"""

from __future__ import annotations

from typing import Mapping

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, OptionList
from textual.widgets.option_list import Option

from rltui.session import validate_changes
from rltui.ui.format import fmt_value
from trainers.hparams import EDITABLE_HPARAMS, HParamError, hparam_rule


def parse_edit(name: str, text: str) -> dict[str, float]:
    """`{name: value}` for a typed value, or HParamError saying why not."""
    text = text.strip()
    if not text:
        raise HParamError(f"{name}: type a value ({hparam_rule(name)})")
    try:
        number = float(text)
    except ValueError:
        raise HParamError(f"{name}: not a number: {text!r}; expected {hparam_rule(name)}") from None
    return validate_changes({name: number})


class HParamEditor(ModalScreen[dict[str, float] | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, values: Mapping[str, float], field: str = "lr"):
        super().__init__()
        self.values = dict(values)
        self.field = field if field in EDITABLE_HPARAMS else EDITABLE_HPARAMS[0]

    def compose(self) -> ComposeResult:
        with Vertical(id="editor-dialog"):
            yield Label("Edit a hyperparameter: applied at the next chunk, no recompile", id="editor-title")
            yield OptionList(*(self._option(name) for name in EDITABLE_HPARAMS), id="editor-fields")
            yield Label("", id="editor-rule", markup=False)
            yield Input(id="editor-value", select_on_focus=True)
            yield Label("", id="editor-error", markup=False)
            yield Label("↑↓ field · Enter: to value / apply · Esc cancel", id="editor-hint")

    def _option(self, name: str) -> Option:
        return Option(f"{name:<14} {fmt_value(self.values.get(name))}", id=name)

    def on_mount(self) -> None:
        self.query_one("#editor-dialog").border_title = "hyperparameters"
        fields = self.query_one("#editor-fields", OptionList)
        fields.highlighted = EDITABLE_HPARAMS.index(self.field)
        self._show_field()
        fields.focus()

    def _show_field(self) -> None:
        current = fmt_value(self.values.get(self.field))
        self.query_one("#editor-rule", Label).update(f"{self.field}: {hparam_rule(self.field)} (now {current})")
        value = self.query_one("#editor-value", Input)
        value.placeholder = f"new {self.field}, e.g. {current}"
        self._set_error(None)

    def _set_error(self, message: str | None) -> None:
        error = self.query_one("#editor-error", Label)
        error.update(message or "")
        error.display = bool(message)

    @on(OptionList.OptionHighlighted, "#editor-fields")
    def _field_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if event.option.id and event.option.id != self.field:
            self.field = event.option.id
            self._show_field()

    @on(OptionList.OptionSelected, "#editor-fields")
    def _field_chosen(self, event: OptionList.OptionSelected) -> None:
        self.query_one("#editor-value", Input).focus()

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
