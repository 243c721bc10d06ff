"""Notifications (Textual's toasts) that leave no trace on the terminal.

Where a toast leaves while the panels under it change (an event logged, the events log
scrolled) and nothing else redraws (a paused run), the terminal can keep the toast's
cells: a panel without its border, stray letters among the events. Once each toast has
gone, the whole screen is drawn again.
"""

from __future__ import annotations

from textual.app import App
from textual.notifications import SeverityLevel

TOAST_GONE_SECONDS = 0.5  # after a toast's timeout: it has left the screen by then


class RepaintsAfterToasts(App):
    """A mixin for the app, before `App` in its bases."""

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = True) -> None:
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)
        shown = self.NOTIFICATION_TIMEOUT if timeout is None else timeout
        self.set_timer(shown + TOAST_GONE_SECONDS, self._repaint_after_toast)

    def _repaint_after_toast(self) -> None:
        if self.is_running:
            self.screen.refresh()
