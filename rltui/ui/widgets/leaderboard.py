"""A population's leaderboard: one row per member, sorted by a key the user cycles.

Rows are keyed by member index and updated cell by cell from each snapshot's
PopulationView, so the table neither flickers nor loses its cursor (which follows its
member when the order changes). While the user moves the cursor the order holds
(until `HOLD_SECONDS` after the last move), so that the row aimed at is the row reached.
The widget never talks to the session: freezing and cloning are asked for with messages
(`FreezeRequested`, `CloneRequested`) that the app turns into commands.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence

from rich.text import Text
from textual.binding import Binding
from textual.coordinate import Coordinate
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import DataTable

from rltui.formatting import fmt_value
from rltui.session.population import MemberState, MemberView, PopulationView

BLOCKS = "▁▂▃▄▅▆▇█"
TREND_CELLS = 12  # the latest returns a row's sparkline shows
SORT_KEYS = ("latest", "best", "eval", "index")
_SORT_FIELD = {"latest": "latest_return", "best": "best_return", "eval": "eval_return"}
# A live sort waits this long after the user's last cursor move before it reorders rows.
HOLD_SECONDS = 3.0


def sparkline(values: Sequence[float], cells: int = TREND_CELLS) -> str:
    """The last `cells` finite values as unicode blocks, scaled to the row's own range:
    the shape of a member's recent returns (its level is in the return columns)."""
    finite = [v for v in values if math.isfinite(v)][-cells:]
    if not finite:
        return ""
    low, high = min(finite), max(finite)
    if high - low <= 1e-12 * max(1.0, abs(high)):
        return BLOCKS[3] * len(finite)
    top = len(BLOCKS) - 1
    return "".join(BLOCKS[round((v - low) / (high - low) * top)] for v in finite)


@dataclasses.dataclass(frozen=True)
class MemberCell:
    """The first cell of a row: the member's index, marked when it is in the selection.
    An object rather than text, so that sorting reads the index."""

    member: int
    selected: bool = False

    def __str__(self) -> str:
        return f"{'●' if self.selected else ' '}{self.member:>3}"

    def __rich__(self) -> Text:
        return Text(str(self), no_wrap=True, end="")


@dataclasses.dataclass(frozen=True)
class Column:
    key: str
    label: str
    width: int


class Leaderboard(DataTable):
    """Keys act while the leaderboard has the focus (it takes it when a population starts;
    Tab moves it): they shadow the dashboard's s, c and space there, whose actions stay
    in the command palette (and p pauses)."""

    BINDINGS = [
        Binding("space", "toggle_selected", "Select",
                tooltip="leaderboard: add the member under the cursor to the selection, or take it out"),
        Binding("escape", "clear_selection", "Clear", show=False, tooltip="leaderboard: clear the selection"),
        Binding("f", "freeze", "Freeze",
                tooltip="leaderboard: freeze the selected members (or the one under the cursor), or thaw them if "
                "none of them is training; a frozen member keeps its parameters and stops updating"),
        Binding("c", "clone", "Clone",
                tooltip="leaderboard: clone the member under the cursor into the selected members (asks for them "
                "if none), its hyperparameters multiplied by a factor you type"),
        Binding("s", "cycle_sort", "Sort", tooltip="leaderboard: sort by latest, best or eval return, or by index"),
    ]

    sort_key: reactive[str] = reactive("latest")

    @dataclasses.dataclass
    class FreezeRequested(Message):
        members: tuple[int, ...]
        frozen: bool

    @dataclasses.dataclass
    class CloneRequested(Message):
        source: int
        targets: tuple[int, ...]  # empty: ask the user

    def __init__(self, *, evaluating: bool = False, **kwargs):
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self.can_focus = False  # until the dashboard shows it (a population)
        self.evaluating = evaluating  # the run evaluates: an eval column, and eval as a sort key
        self.view: PopulationView | None = None
        self._ended: str | None = None  # "finished" or "stopped": how the run ended, once it has
        self.selected: set[int] = set()
        self._columns: tuple[Column, ...] = ()
        self.clock = time.monotonic  # when the user last moved the cursor, by this clock
        self._moved_at: float | None = None
        self._placing = False  # the cursor moves with its member, not by the user

    @property
    def holding(self) -> bool:
        """The user moved the cursor moments ago: the rows keep their order."""
        return self._moved_at is not None and self.clock() - self._moved_at < HOLD_SECONDS

    def watch_cursor_coordinate(self, old: Coordinate, new: Coordinate) -> None:
        super().watch_cursor_coordinate(old, new)
        if old.row != new.row and not self._placing:
            self._moved_at = self.clock()

    def on_mount(self) -> None:
        self._retitle()

    # --- what the app and tests read ----------------------------------------------------
    @property
    def sort_keys(self) -> tuple[str, ...]:
        return tuple(k for k in SORT_KEYS if k != "eval" or self.shows_eval)

    @property
    def shows_eval(self) -> bool:
        return self.evaluating or (self.view is not None and any(m.eval_return is not None for m in self.view.members))

    @property
    def cursor_member(self) -> int | None:
        if self.view is None or not self.row_count:
            return None
        return self.get_row_at(self.cursor_row)[0].member

    @property
    def chosen(self) -> tuple[int, ...]:
        """The members a freeze acts on: the selection, else the one under the cursor."""
        if self.selected:
            return tuple(sorted(self.selected))
        member = self.cursor_member
        return () if member is None else (member,)

    @property
    def order(self) -> tuple[int, ...]:
        """Member indices as the rows show them, top first."""
        return tuple(self.get_row_at(row)[0].member for row in range(self.row_count))

    def row_texts(self) -> list[list[str]]:
        """Every row as the cells' text, top first."""
        return [[str(cell) for cell in self.get_row_at(row)] for row in range(self.row_count)]

    @property
    def ended(self) -> str | None:
        return self._ended

    @ended.setter
    def ended(self, how: str | None) -> None:
        if how != self._ended:
            self._ended = how
            if self.view is not None:
                self.show(self.view)

    # --- updates ------------------------------------------------------------------------
    def show(self, view: PopulationView) -> None:
        """Fill the rows from `view`: cell by cell when the members and columns are the ones
        shown, then the order for the sort key, the cursor staying on its member."""
        self.view = view
        self.selected &= {m.index for m in view.members}
        columns = self._columns_for(view)
        shown = {key.value for key in self.rows}
        wanted = {str(m.index) for m in view.members}
        cursor = self.cursor_member
        if columns != self._columns or shown != wanted:
            self._placing = True
            try:
                self._rebuild(view, columns)
            finally:
                self._placing = False
        else:
            for member in view.members:
                row = str(member.index)
                for column, value in zip(columns, self._cells(member)):
                    if self.get_cell(row, column.key) != value:
                        self.update_cell(row, column.key, value)
        self._sort(cursor)
        self._retitle()

    def _columns_for(self, view: PopulationView) -> tuple[Column, ...]:
        return (
            Column("member", "  #", 4),
            *(Column(f"key-{k}", k, max(len(k), 8)) for k in view.keys),
            Column("latest", "latest", 7),
            Column("best", "best", 7),
            *((Column("eval", "eval", 7),) if self.shows_eval else ()),
            Column("trend", "trend", TREND_CELLS),
            Column("state", "state", 8),
            Column("parent", "from", 5),
        )

    def _cells(self, member: MemberView) -> list[object]:
        cells: list[object] = [MemberCell(member.index, member.index in self.selected)]
        cells += [fmt_value(member.values.get(k), 3) for k in self.view.keys]
        cells += [fmt_value(member.latest_return), fmt_value(member.best_return)]
        if self.shows_eval:
            cells.append(fmt_value(member.eval_return))
        cells.append(sparkline(member.trend))
        cells.append(self._state_text(member.state))
        cells.append("" if member.parent is None else f"<- {member.parent}")
        return cells

    def _state_text(self, state: MemberState) -> Text:
        if state is MemberState.TRAINING and self._ended:
            return Text(self._ended, no_wrap=True, end="")
        theme = self.app.current_theme
        colour = {MemberState.TRAINING: theme.success, MemberState.FROZEN: theme.warning,
                  MemberState.DIVERGED: theme.error}.get(state)
        return Text(state.value, style=colour or "", no_wrap=True, end="")

    def _rebuild(self, view: PopulationView, columns: tuple[Column, ...]) -> None:
        self.clear(columns=True)
        for column in columns:
            self.add_column(column.label, width=column.width, key=column.key)
        self._columns = columns
        for member in view.members:
            self.add_row(*self._cells(member), key=str(member.index))

    def _rank(self, member: int) -> tuple:
        if self.sort_key == "index":
            return (member,)
        value = getattr(self.view.members[member], _SORT_FIELD[self.sort_key])
        missing = value is None or not math.isfinite(value)
        return (missing, 0.0 if missing else -value, member)  # best first, members without a value last

    def _sort(self, cursor: int | None, *, asked: bool = False) -> None:
        """Order the rows by the sort key, the cursor on `cursor`'s row; a live re-sort
        waits while the user is moving the cursor (`asked`: the user chose the key)."""
        if self.view is None or not self.row_count:
            return
        if asked:
            self._moved_at = None
        ranks = {m.index: self._rank(m.index) for m in self.view.members}
        self._placing = True
        try:
            if list(self.order) != sorted(ranks, key=ranks.__getitem__) and not self.holding:
                self.sort("member", key=lambda cell: ranks[cell.member])
            if cursor is not None and cursor in ranks and self.cursor_member != cursor:
                self.move_cursor(row=self.get_row_index(str(cursor)), animate=False)
        finally:
            self._placing = False

    def _mark(self, member: int) -> None:
        self.update_cell(str(member), "member", MemberCell(member, member in self.selected))
        self._retitle()

    def _retitle(self) -> None:
        if self.view is None:
            self.border_title = "leaderboard"
        else:
            self.border_title = (f"leaderboard: {len(self.view.members)} members × {self.view.num_seeds} "
                                 f"seed{'s' if self.view.num_seeds != 1 else ''}, "
                                 f"by {self.sort_key} (s)")
        self.border_subtitle = f"{len(self.selected)} selected (space, Esc)" if self.selected else ""

    def watch_sort_key(self) -> None:
        if self.is_mounted:
            self._sort(self.cursor_member, asked=True)
            self._retitle()

    # --- actions ------------------------------------------------------------------------
    def action_cycle_sort(self) -> None:
        keys = self.sort_keys
        self.sort_key = keys[(keys.index(self.sort_key) + 1) % len(keys)] if self.sort_key in keys else keys[0]

    def action_toggle_selected(self) -> None:
        member = self.cursor_member
        if member is None:
            return
        self.selected ^= {member}
        self._mark(member)

    def action_clear_selection(self) -> None:
        cleared, self.selected = self.selected, set()
        for member in cleared:
            self._mark(member)

    def action_freeze(self) -> None:
        members = self.chosen
        if not members or self.view is None:
            return
        # Thaw only when none of them trains: a mixed choice is frozen, the safe way.
        frozen = any(self.view.members[m].state is MemberState.TRAINING for m in members)
        self.post_message(self.FreezeRequested(members, frozen))

    def action_clone(self) -> None:
        source = self.cursor_member
        if source is None:
            return
        self.post_message(self.CloneRequested(source, tuple(sorted(self.selected - {source}))))
