"""Pick the chart's metric from a list (`m`), rather than cycling to it with `c`."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList
from textual.widgets.option_list import Option


class MetricPicker(ModalScreen[str | None]):
    """Dismissed with the chosen metric's name, or None (escape)."""

    BINDINGS = [Binding("escape,q", "dismiss_none", "Close")]
    DEFAULT_CSS = """
    MetricPicker { align: center middle; }
    MetricPicker > Vertical {
        width: auto; min-width: 30; max-width: 100%; height: auto; border: round $primary; padding: 0 1;
    }
    MetricPicker OptionList { height: auto; max-height: 20; border: none; }
    """

    def __init__(self, metrics: list[tuple[str, str]], current: str):
        super().__init__()
        self.metrics = metrics
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical() as box:
            box.border_title = "chart metric"
            yield OptionList(*(Option(title, id=name) for name, title in self.metrics))

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        names = [name for name, _ in self.metrics]
        if self.current in names:
            options.highlighted = names.index(self.current)
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
