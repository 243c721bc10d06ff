"""When the dashboard draws the session's snapshots, and the status line's clocks between
them.

The latest snapshot is drawn at most every `refresh_interval` seconds, and just after the
chunk it ends has started, at once when training stands still; between snapshots the
clocks go on (a compile's seconds, the run's elapsed time).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from textual.css.query import NoMatches
from textual.timer import Timer

from rltui.session import MetricsSnapshot, SessionState
from rltui.ui.run_status import LIVE, RunStatus
from rltui.ui.screens import DashboardScreen

# Seconds between a snapshot's arrival and drawing it (see `SnapshotDisplay.arrived`).
AFTER_CHUNK_DELAY = 0.05


class SnapshotDisplay:
    def __init__(
        self,
        dashboard: DashboardScreen,
        status: RunStatus,
        *,
        set_timer: Callable[[float, Callable[[], None]], Timer],
        refresh_interval: float,
        clock: Callable[[], float],
    ):
        self._dashboard = dashboard
        self._status = status  # the run's state: drawn at once unless it runs
        self._set_timer = set_timer  # the App's: calls back on the UI thread
        self._refresh_interval = refresh_interval
        self._clock = clock
        self.latest: MetricsSnapshot | None = None
        self._latest_at = 0.0  # when it arrived (self._clock)
        self._shown_at: float | None = None  # when the snapshot on screen arrived
        self._last_shown = -math.inf  # when the last was drawn (time.monotonic)
        self._show_timer: Timer | None = None
        self._compile_started: float | None = None
        # The update of the first chunk seen since training (re)started: that chunk pays
        # start-up costs (a compile, caches), so its speed says little about the rest, and
        # the ETA waits for a later one.
        self._first_chunk_update: int | None = None
        if status.state in (SessionState.RUNNING, SessionState.PAUSED):
            # Attached to a run in progress: its speed is the run's, past its start-up.
            self._first_chunk_update = -1

    def arrived(self, snapshot: MetricsSnapshot) -> None:
        self.latest = snapshot
        self._latest_at = self._clock()
        if snapshot.new_records and self._first_chunk_update is None:
            self._first_chunk_update = snapshot.update
        if self._show_timer is not None:
            return  # already due: it will show this newer snapshot
        if self._refresh_interval <= 0:
            self._show_latest()
            return
        # A snapshot arrives just as the session thread is about to dispatch the next
        # chunk, which needs the GIL: drawing at that moment stalls training far more
        # than the drawing's CPU time. Wait until the chunk runs (in XLA, GIL released).
        wait = max(AFTER_CHUNK_DELAY, self._last_shown + self._refresh_interval - time.monotonic())
        self._show_timer = self._set_timer(wait, self._show_latest)

    def compiling(self) -> None:
        """A compile starts: the status line counts its seconds."""
        self._compile_started = self._clock()

    def training_started(self) -> None:
        """Training (re)starts: its first chunk pays start-up costs again."""
        self._first_chunk_update = None

    def show_now(self) -> None:
        """Show the latest snapshot now rather than when its timer fires."""
        if self._show_timer is not None:
            self._show_timer.stop()
            self._show_latest()

    def _show_latest(self) -> None:
        self._show_timer = None
        self._last_shown = time.monotonic()
        if self.latest is not None:
            try:
                self._shown_at = self._latest_at
                first = self._first_chunk_update
                self._dashboard.status.eta_settled = first is not None and self.latest.update > first
                self._dashboard.show_snapshot(self.latest, age=self._clock() - self._shown_at)
                self.flush_chart_unless_running()
            except NoMatches:
                pass  # a timer that fired while the app tears its widgets down

    def flush_chart_unless_running(self) -> None:
        # While training runs, the chart catches up at the next snapshot; otherwise none
        # may come, so draw what it holds now.
        if self._status.state is not SessionState.RUNNING:
            self._dashboard.chart.flush()

    def tick(self) -> None:
        """Every second: the clocks of the status line."""
        try:
            if self._status.state is SessionState.COMPILING and self._compile_started is not None:
                self._dashboard.status.compile_seconds = self._clock() - self._compile_started
            if self._status.state in LIVE:
                self.count_age()
        except NoMatches:
            pass  # fired during teardown

    def count_age(self) -> None:
        """The session's elapsed time goes on while paused (and between snapshots), but
        snapshots come only after chunks: count on from the one on screen, so that elapsed
        neither stands still during a pause nor jumps at the next snapshot."""
        if self._shown_at is not None:
            self._dashboard.status.snapshot_age = self._clock() - self._shown_at
