"""Textual's terminal driver, for a terminal that may go away under the app: a closed
window, a killed tmux session, a dropped SSH connection.

However it goes (the kernel's SIGHUP, a read or a write that fails for good:
`rltui.headless.reader_gone`), it is a hang-up: the
process gets SIGHUP once, and whoever handles a hang-up (`rltui.ui.runner` for the
dashboard) ends the app. Until the app has ended, its writes go nowhere rather than fail,
so no thread dies on them and nothing waits on one that has.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading

from textual.driver import Driver
from textual.drivers.linux_driver import LinuxDriver

from rltui.headless import GuardedOutput, reader_gone


class TerminalDriver(LinuxDriver):
    def __init__(self, app, **kwargs):
        super().__init__(app, **kwargs)
        self._file = GuardedOutput(sys.__stderr__, on_closed=self._terminal_gone)
        self._suspended = False
        self._gone = False
        self._gone_lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None

    def start_application_mode(self):
        self._loop = asyncio.get_running_loop()
        super().start_application_mode()

    def _sigtstp_application(self, *args) -> None:
        self._suspended = True
        super()._sigtstp_application(*args)

    def _sigcont_application(self, *args) -> None:
        # A hang-up brings SIGCONT with its SIGHUP: only a process that was suspended, and
        # that still has its terminal, takes the screen back.
        if not self._suspended:
            return
        self._suspended = False
        if self.input_tty and not os.isatty(self.fileno):
            self._terminal_gone()
            return
        super()._sigcont_application(*args)

    def _run_input_thread(self) -> None:
        try:
            while True:
                try:
                    self.run_input_thread()
                    return
                except (BlockingIOError, InterruptedError):
                    continue  # nothing to read after all (another process took it): read on
                except OSError as err:
                    if not reader_gone(err):
                        raise
                    self._terminal_gone()  # the terminal went: reading it fails for good
                    return
        except BaseException:  # noqa: BLE001 - anything else is a bug: Textual's own panic shows it
            import rich.traceback

            self._app.call_later(self._app.panic, rich.traceback.Traceback())

    def _terminal_gone(self) -> None:
        """Once, from any thread: say the terminal hung up, as the kernel would."""
        with self._gone_lock:
            if self._gone:
                return
            self._gone = True
        if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:
            os.kill(os.getpid(), signal.SIGHUP)
        elif self._loop is not None:  # hang-ups ignored (nohup): the app still has nobody to show
            self._loop.call_soon_threadsafe(self._app.exit)


class EndsWithItsTerminal:
    """For an App: `TerminalDriver` where Textual would take its own Linux driver."""

    def get_driver_class(self) -> type[Driver]:
        default = super().get_driver_class()
        return TerminalDriver if default is LinuxDriver else default
