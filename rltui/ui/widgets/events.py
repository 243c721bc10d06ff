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

    def compose(self):
        yield Static("", id="events-text")

    def on_mount(self) -> None:
        self.border_title = "events"

    def add(self, event: SessionEvent) -> None:
        if repeats_another_event(event):
            return
        follow = self.is_vertical_scroll_end or not self.lines
        self.events.append(event)
        self.lines.append(format_event(event))
        self.query_one("#events-text", Static).update(Content("\n").join(self.lines))
        if follow:
            self.call_after_refresh(self.scroll_end, animate=False)

    @property
    def text(self) -> str:
        return "\n".join(line.plain for line in self.lines)
