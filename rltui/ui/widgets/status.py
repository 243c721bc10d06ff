"""The two status lines at the top: what runs where, its state, and its progress."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Label

from rltui.formatting import fmt_count, fmt_duration
from rltui.session import MetricsSnapshot, SessionState

# What the user asked for but the session has not confirmed yet: shown instead of the
# state until the session reports the state it leads to.
PENDING_LABELS = {"pausing": "pausing...", "resuming": "resuming...", "stopping": "stopping..."}


# States in which training goes on, so an ETA means something.
_TRAINING = (SessionState.IDLE, SessionState.COMPILING, SessionState.RUNNING, SessionState.PAUSED)
# The order the progress line shows its parts in, whichever of them fit.
_ORDER = ("update", "steps", "SPS", "elapsed", "ETA")


def _order(part: str) -> int:
    return next((i for i, key in enumerate(_ORDER) if key in part), len(_ORDER))


def _fitted(parts: list[str], width: int) -> str:
    """`parts` (most wanted first) joined in reading order, leaving out the least wanted
    whole ones that do not fit in `width`: a part is never cut in the middle."""
    kept = list(parts)
    while len(kept) > 1 and len(" · ".join(kept)) > width > 0:
        kept.pop()
    return " · ".join(sorted(kept, key=_order))


class StatusBar(Widget):
    """Line 1: state badge, env, algorithm, devices, run name. Line 2: update, env steps,
    SPS, elapsed, ETA (from the latest snapshot)."""

    run_info: reactive[str] = reactive("")
    state: reactive[SessionState] = reactive(SessionState.IDLE)
    state_message: reactive[str | None] = reactive(None)
    pending: reactive[str | None] = reactive(None)
    # How a FINISHED run ended, as `rltui runs` names it: finished, stopped or diverged.
    ending: reactive[str | None] = reactive(None)
    compile_seconds: reactive[float] = reactive(0.0)
    # Snapshots compare field by field (whole histories); always_update skips that.
    snapshot: reactive[MetricsSnapshot | None] = reactive(None, always_update=True)
    # Seconds since `snapshot` arrived, added to its elapsed time: the app ticks it, as
    # the run's clock goes on between snapshots (none comes while paused).
    snapshot_age: reactive[float] = reactive(0.0)
    # Whether the speed is worth an ETA: not before the second chunk after training
    # (re)starts, as the first pays start-up costs (the app counts them).
    eta_settled: reactive[bool] = reactive(True)
    _progress_text = ""

    def compose(self) -> ComposeResult:
        with Horizontal(id="status-top"):
            yield Label(id="state-badge", markup=False)
            yield Label(id="run-info", markup=False)
        yield Label(id="progress", markup=False)

    def on_mount(self) -> None:
        self._show_state()
        self._show_progress()

    @property
    def state_text(self) -> str:
        if self.pending == "stopping" and self.state is SessionState.COMPILING:
            return f"stopping after the compile ({self.compile_seconds:.0f} s)"
        if self.pending in PENDING_LABELS:
            return PENDING_LABELS[self.pending]
        if self.state is SessionState.COMPILING:
            return f"compiling {self.compile_seconds:.0f} s"
        if self.state is SessionState.FINISHED and self.ending:
            return self.ending
        return self.state.value

    def show_state(self, state: SessionState, message: str | None, pending: str | None,
                   ending: str | None = None) -> None:
        """Set them all at once: one badge update instead of four."""
        self.set_reactive(StatusBar.state, state)
        self.set_reactive(StatusBar.state_message, message)
        self.set_reactive(StatusBar.pending, pending)
        self.set_reactive(StatusBar.ending, ending)
        self._show_state()

    def watch_run_info(self, text: str) -> None:
        if self.is_mounted:
            self.query_one("#run-info", Label).update(text, layout=False)

    def watch_state(self) -> None:
        self._show_state()

    def watch_state_message(self) -> None:
        self._show_state()

    def watch_pending(self) -> None:
        self._show_state()

    def watch_compile_seconds(self) -> None:
        self._show_state()

    def show_snapshot(self, snapshot: MetricsSnapshot, age: float = 0.0) -> None:
        """Set both at once: one progress update instead of two."""
        self.set_reactive(StatusBar.snapshot_age, age)
        self.snapshot = snapshot

    def watch_snapshot(self) -> None:
        self._show_progress()

    def watch_snapshot_age(self) -> None:
        self._show_progress()

    def watch_eta_settled(self) -> None:
        self._show_progress()

    def on_resize(self) -> None:
        self._show_progress()

    @property
    def eta_text(self) -> str | None:
        """The ETA, while there is one to give: none once the run has ended or is
        stopping, and a dash until the speed has settled."""
        snap = self.snapshot
        if snap is None or self.pending == "stopping" or self.state not in _TRAINING:
            return None
        if snap.update >= snap.total_updates:
            return None
        if not self.eta_settled or snap.eta_seconds is None:
            return "—"
        return fmt_duration(snap.eta_seconds)

    def progress_parts(self) -> list[str]:
        """The progress line's parts, most wanted first."""
        snap = self.snapshot
        if snap is None:
            return ["waiting for the first update…"]
        eta = self.eta_text
        return [
            f"update {snap.update:,}/{snap.total_updates:,}",
            *([f"ETA {eta}"] if eta is not None else []),
            f"elapsed {fmt_duration(snap.elapsed + self.snapshot_age)}",
            f"{fmt_count(snap.sps)} SPS",
            f"{fmt_count(snap.env_steps)}/{fmt_count(snap.total_env_steps)} steps",
        ]

    def _show_state(self) -> None:
        if not self.is_mounted:
            return
        badge = self.query_one("#state-badge", Label)
        text = self.state_text
        if self.state in (SessionState.ERROR, SessionState.PAUSED) and self.state_message and not self.pending:
            text = f"{text}: {self.state_message}"
        badge.update(f" {text} ")  # width changes: this one needs the layout pass
        for state in SessionState:
            badge.set_class(self.state is state and not self.pending, f"-{state.value}")
        badge.set_class(bool(self.pending), "-pending")
        self._show_progress()  # the ETA goes when the run ends or is stopping

    def _show_progress(self) -> None:
        if not self.is_mounted:
            return
        label = self.query_one("#progress", Label)
        text = _fitted(self.progress_parts(), self.size.width - 1)
        if text != self._progress_text:  # the age ticks every second; the text less often
            self._progress_text = text
            label.update(text, layout=False)
