"""The events log: edits, pauses, checkpoints, warnings and errors, each with its update."""

from __future__ import annotations

import collections

from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Static

from rltui.session import SessionEvent
from rltui.session.events import repeats_another_event

# Content styles by event kind; theme variables, so a theme change recolours the log.
_KIND_STYLES = {
    "error": "bold $error",
    "nonfinite": "bold $error",
    "warning": "$warning",
    "hparams": "$accent",
    "checkpoint": "$success",
    "rolled back": "$warning",
    "paused": "$secondary",
    "resumed": "$secondary",
    "note": "dim",
}


def without_kind(kind: str, message: str) -> str:
    """`message` without a leading repeat of `kind`, which the log shows beside it:
    "compiled in 3.8 s" of kind compiled reads "compiled  in 3.8 s", not "compiled  compiled in 3.8 s"."""
    if message.lower().startswith(kind.lower() + " "):
        return message[len(kind) + 1 :]
    return message


def format_event(event: SessionEvent) -> Content:
    return Content.assemble(
        (f"[{event.update:>5}] ", "dim"),
        (f"{event.kind:<9} ", _KIND_STYLES.get(event.kind, "")),
        # Messages may hold user text (paths, env ids): never parse them as markup.
        Content(without_kind(event.kind, event.message)),
    )


class EventsLog(VerticalScroll):
    """Keeps the last `max_lines` events in one Static: events are rare (a handful a
    minute), so re-rendering the text on each is cheaper than a widget per line."""

    def __init__(self, max_lines: int = 500, **kwargs):
        super().__init__(**kwargs)
        self.lines: collections.deque[Content] = collections.deque(maxlen=max_lines)
        self.events: collections.deque[SessionEvent] = collections.deque(maxlen=max_lines)
        self.following = True

    def compose(self):
        yield Static("", id="events-text")

    def on_mount(self) -> None:
        self.border_title = "events"

    # The log follows new events until the user scrolls up, and again once they scroll back
    # to the end. Said by what the user does, not by where the log stands: behind another
    # screen (the watch view) nothing is laid out, and the end is not where it was.
    def _on_mouse_scroll_up(self, event) -> None:
        self.following = False

    def _on_mouse_scroll_down(self, event) -> None:
        self.call_after_refresh(self._follow_if_at_end)

    def action_scroll_up(self) -> None:
        self.following = False
        super().action_scroll_up()

    def action_page_up(self) -> None:
        self.following = False
        super().action_page_up()

    def action_scroll_home(self) -> None:
        self.following = False
        super().action_scroll_home()

    def action_scroll_down(self) -> None:
        super().action_scroll_down()
        self.call_after_refresh(self._follow_if_at_end)

    def action_page_down(self) -> None:
        super().action_page_down()
        self.call_after_refresh(self._follow_if_at_end)

    def action_scroll_end(self) -> None:
        self.following = True
        super().action_scroll_end()

    def _follow_if_at_end(self) -> None:
        if self.is_vertical_scroll_end:
            self.following = True

    def catch_up(self) -> None:
        """To the newest event, if the log follows them (its screen is shown again)."""
        if self.following:
            self.call_after_refresh(self.scroll_end, animate=False)

    def add(self, event: SessionEvent) -> None:
        if repeats_another_event(event):
            return
        self.events.append(event)
        self.lines.append(format_event(event))
        self.query_one("#events-text", Static).update(Content("\n").join(self.lines))
        self.catch_up()

    @property
    def text(self) -> str:
        return "\n".join(line.plain for line in self.lines)
