"""The runs view (`rltui runs`): every run in a directory, and the curves of those picked.

The list is read in a worker thread (rltui.runfiles.loading: a cache per run, so only
runs whose files changed are read again) every `refresh_interval` seconds, and the curves
are worked out in another, so a huge run never holds up the keys. Keys: space selects a
run, Enter attaches to a live run (the view exits with an AttachRequest) or opens a run's
curves, s/S sort, / or any other letter filters, m metric, x x axis, w/W smoothing, g
group by a config key, i mean/IQM, c clears the selection, ? help, q quits."""

from __future__ import annotations

import dataclasses
import datetime
import math
import time
from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static

from rltui.formatting import fmt_count, fmt_duration
from rltui.runfiles.discovery import has_socket, scan_runs, socket_answers, state_of
from rltui.runfiles.loading import LoadedRun, RunCache
from rltui.runs_view.curves import SMOOTHING, STATISTIC_NAMES, X_AXES, Overlay, group_keys, metric_choices, overlay
from rltui.runs_view.rows import SORT_KEYS, AttachRequest, RunRow, differences, matches, row_of, sort_rows
from rltui.ui.screens.curves import CurvesScreen
from rltui.ui.screens.help import RUNS_NOTES, HelpScreen
from rltui.ui.terminal import EndsWithItsTerminal
from rltui.ui.widgets.runs_chart import CurveControls, RunsChart

COLUMNS = ("", "run", "env", "algo", "state", "env steps", "latest", "best", "wall", "started",
           "config vs first selected")
SORT_COLUMN = {"started": 9, "name": 1, "env": 2, "algo": 3, "state": 4, "env steps": 5, "latest": 6, "best": 7,
               "wall time": 8}
STATE_STYLE = {"live": "bold green", "finished": "", "stopped": "yellow", "diverged": "bold magenta",
               "aborted": "yellow", "crashed": "bold red"}  # one per runs_view.discovery.STATES


def _num(value: float) -> str:
    return "-" if not math.isfinite(value) else f"{value:.4g}"


def _started(stamp: float | None) -> str:
    return "-" if stamp is None else datetime.datetime.fromtimestamp(stamp).strftime("%m-%d %H:%M")


@dataclasses.dataclass
class ListState:
    """How the list was left (`RunsScreen.list_state`): a detach from the run Enter attached
    to comes back to it as it was."""

    selected: list[Path]
    sort_key: str
    descending: bool
    filter_text: str
    controls: CurveControls
    cursor: Path | None


class RunsScreen(Screen):
    BINDINGS = [
        Binding("space", "toggle_select", "select"),
        Binding("s", "sort", "sort"),
        Binding("S", "reverse", "reverse", show=False),
        Binding("m", "metric", "metric"),
        Binding("x", "x_axis", "x axis"),
        Binding("w", "smoother", "smooth"),
        Binding("W", "rougher", "less smooth", show=False),
        Binding("g", "group", "group"),
        Binding("i", "statistic", "mean/IQM"),
        Binding("c", "clear", "clear", show=False),
        Binding("slash", "filter", "filter"),
        Binding("escape", "leave_filter", "list", show=False),
        Binding("q", "quit", "quit"),
        Binding("question_mark", "help", "help", tooltip="this help"),
    ]

    def __init__(self, root: Path, cache: RunCache, *, probe=socket_answers, refresh_interval: float = 2.0,
                 points: int | None = None, state: ListState | None = None):
        super().__init__()
        self.root = Path(root)
        self.cache = cache
        self.probe = probe
        self.refresh_interval = refresh_interval
        self.points = points
        self.controls = CurveControls()
        self.rows: dict[Path, RunRow] = {}
        self.shown: list[RunRow] = []  # the rows in the table, in order
        self.selected: list[Path] = []  # in the order picked: the first is what differences are against
        self.sort_key = "started"
        self.descending = True
        self.filter_text = ""
        self.loaded = False  # the first scan is in
        self.scan_seconds = 0.0
        self.overlay: Overlay | None = None
        self._cursor_at: Path | None = None  # where the cursor goes once the first scan is in
        if state is not None:
            self.selected, self.sort_key, self.descending = list(state.selected), state.sort_key, state.descending
            self.filter_text, self.controls = state.filter_text, dataclasses.replace(state.controls)
            self._cursor_at = state.cursor

    def list_state(self) -> ListState:
        return ListState(list(self.selected), self.sort_key, self.descending, self.filter_text,
                         dataclasses.replace(self.controls), self.cursor_path())

    def compose(self) -> ComposeResult:
        yield Input(placeholder="filter: words to match in name, env, algo, state or key=value (/ to type, Esc: list)",
                    id="runs-filter", select_on_focus=False)
        table = DataTable(id="runs-table", cursor_type="row", zebra_stripes=True)
        yield table
        yield RunsChart(id="runs-chart")
        yield Static(id="runs-status")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for label in COLUMNS:
            table.add_column(label, key=label or "mark")
        table.focus()
        if self.filter_text:
            self.query_one(Input).value = self.filter_text
        self._status("reading runs…")
        self.scan()
        if self.refresh_interval:
            self.set_interval(self.refresh_interval, self.scan)

    # --- reading ------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="scan")
    def scan(self) -> None:
        clock = time.perf_counter()
        try:
            paths = scan_runs(self.root)
        except Exception as err:  # noqa: BLE001 - the directory went away: say so, keep the list
            self.app.call_from_thread(self._status, f"cannot read {self.root}: {err}")
            return
        rows = {}
        for path in paths:
            run = self.cache.get(path)
            live = self.probe(path)
            rows[path] = row_of(run, state_of(run.events, live, socket_left=not live and has_socket(path)))
        seconds = time.perf_counter() - clock
        self.app.call_from_thread(self._apply, rows, seconds)

    def _apply(self, rows: dict[Path, RunRow], seconds: float) -> None:
        changed = rows != self.rows
        self.rows, self.scan_seconds = rows, seconds
        self.selected = [p for p in self.selected if p in rows]
        first = not self.loaded
        self.loaded = True
        if changed or first:
            self.fill()
            self.redraw_curves()
        self._status()

    def config_of(self, path: Path) -> dict:
        run = self.cache.cached(path)
        return run.config if run is not None else {}

    # --- the table ------------------------------------------------------------------------------
    def fill(self) -> None:
        table = self.query_one(DataTable)
        current, self._cursor_at = self.cursor_path() or self._cursor_at, None
        rows = [r for r in self.rows.values() if matches(r, self.config_of(r.path), self.filter_text)]
        self.shown = sort_rows(rows, self.sort_key, self.descending)
        base = self.config_of(self.selected[0]) if self.selected else None
        table.clear()
        for row in self.shown:
            selected = row.path in self.selected
            mark = Text("●" if selected else " ", style="bold")
            name = Text(row.name)
            if row.damaged:
                name = Text.assemble(("⚠ ", "bold red"), (row.name, "red"))
            config = self.config_of(row.path)
            diff = differences(base, config) if base is not None else ""
            if base is not None and row.path == self.selected[0]:
                diff = "(first)"
            table.add_row(
                mark, name, row.env, row.algo, Text(row.state.name, style=STATE_STYLE[row.state.name]),
                Text(fmt_count(row.env_steps), justify="right"), Text(_num(row.latest), justify="right"),
                Text(_num(row.best), justify="right"), Text(fmt_duration(row.wall_time), justify="right"),
                _started(row.started), diff, key=str(row.path),
            )
        arrow = " ↓" if self.descending else " ↑"
        for key, index in SORT_COLUMN.items():
            column = table.columns[table.ordered_columns[index].key]
            column.label = Text(COLUMNS[index] + (arrow if key == self.sort_key else ""))
        table.refresh()
        if current is not None and any(r.path == current for r in self.shown):
            table.move_cursor(row=next(i for i, r in enumerate(self.shown) if r.path == current), animate=False)

    def cursor_path(self) -> Path | None:
        table = self.query_one(DataTable)
        if not self.shown or not 0 <= table.cursor_row < len(self.shown):
            return None
        return self.shown[table.cursor_row].path

    def _status(self, text: str | None = None) -> None:
        if text is None:
            c = self.controls
            parts = [f"{len(self.rows)} run{'' if len(self.rows) == 1 else 's'}"
                     + (f", {len(self.shown)} shown" if self.filter_text else ""),
                     f"{len(self.selected)} selected", f"sort {self.sort_key}{' ↓' if self.descending else ' ↑'}",
                     f"metric {c.metric}", f"smoothing {c.smoothing:g}"]
            if c.group:
                parts.append(f"group by {c.group} ({c.statistic})")
            parts.append(f"read in {self.scan_seconds:.2f} s")
            if self.overlay is not None and self.selected:
                parts.append(f"curves {self.overlay.seconds:.2f} s")
            path = self.cursor_path()
            row = self.rows.get(path) if path is not None else None
            if row is not None and row.damaged:
                parts.append(f"⚠ {row.name}: {'; '.join(row.problems)}")
            elif row is not None and row.state.name != "finished":
                parts.append(f"{row.name}: {row.state.name}, {row.state.detail}")
            text = " · ".join(parts)
        self.query_one("#runs-status", Static).update(Text(text, no_wrap=True, overflow="ellipsis"))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if self.loaded:
            self._status()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.open(Path(event.row_key.value))

    def open(self, path: Path) -> None:
        row = self.rows.get(path)
        if row is None:
            return
        if row.state.name == "live":
            self.app.exit(AttachRequest(path))
            return
        run = self.cache.cached(path)
        if run is not None:
            self.app.push_screen(CurvesScreen(run, self.controls, on_close=self.redraw_curves))

    # --- the curves -----------------------------------------------------------------------------
    def selected_runs(self) -> list[LoadedRun]:
        return [run for run in (self.cache.cached(p) for p in self.selected) if run is not None]

    def redraw_curves(self) -> None:
        runs = self.selected_runs()
        if not runs:
            self.overlay = None
            self.query_one(RunsChart).show(None)
            return
        self.compute(runs)

    @work(thread=True, exclusive=True, group="curves")
    def compute(self, runs: list[LoadedRun]) -> None:
        c = self.controls
        chart = self.query_one(RunsChart)
        points = self.points or max(40, 2 * chart.size.width)
        result = overlay(runs, c.metric, x_axis=c.x_axis, smoothing=c.smoothing, group=c.group,
                            statistic=c.statistic, points=points)
        self.app.call_from_thread(self._show_overlay, result)

    def _show_overlay(self, result: Overlay) -> None:
        self.overlay = result
        self.query_one(RunsChart).show(result)
        self._status()

    # --- actions -------------------------------------------------------------------------------
    def action_toggle_select(self) -> None:
        path = self.cursor_path()
        if path is None:
            return
        if path in self.selected:
            self.selected.remove(path)
        else:
            self.selected.append(path)
        if self.controls.group and self.controls.group not in group_keys(self.selected_runs()):
            self.controls.group = None
        self.fill()
        self.redraw_curves()
        self._status()

    def action_clear(self) -> None:
        self.selected = []
        self.controls.group = None
        self.fill()
        self.redraw_curves()
        self._status()

    def action_sort(self) -> None:
        keys = list(SORT_KEYS)
        self.sort_key = keys[(keys.index(self.sort_key) + 1) % len(keys)]
        self.descending = self.sort_key in ("started", "env steps", "latest", "best", "wall time")
        self.fill()
        self._status()

    def action_reverse(self) -> None:
        self.descending = not self.descending
        self.fill()
        self._status()

    def action_metric(self) -> None:
        choices = metric_choices(self.selected_runs() or [r for r in (self.cache.cached(p) for p in self.rows) if r])
        if choices:
            c = self.controls
            c.metric = choices[(choices.index(c.metric) + 1) % len(choices)] if c.metric in choices else choices[0]
        self.redraw_curves()
        self._status()

    def action_x_axis(self) -> None:
        self.controls.x_axis = X_AXES[(X_AXES.index(self.controls.x_axis) + 1) % len(X_AXES)]
        self.redraw_curves()

    def _step_smoothing(self, by: int) -> None:
        levels = SMOOTHING
        c = self.controls
        index = min(range(len(levels)), key=lambda i: abs(levels[i] - c.smoothing))
        c.smoothing = levels[max(0, min(len(levels) - 1, index + by))]
        self.redraw_curves()
        self._status()

    def action_smoother(self) -> None:
        self._step_smoothing(1)

    def action_rougher(self) -> None:
        self._step_smoothing(-1)

    def action_group(self) -> None:
        keys = [None, *group_keys(self.selected_runs())]
        c = self.controls
        c.group = keys[(keys.index(c.group) + 1) % len(keys)] if c.group in keys else None
        if c.group is None and len(keys) == 1:
            self.notify("select runs whose configurations differ to group them", timeout=3)
        self.redraw_curves()
        self._status()

    def action_statistic(self) -> None:
        names = STATISTIC_NAMES
        self.controls.statistic = names[(names.index(self.controls.statistic) + 1) % len(names)]
        self.redraw_curves()
        self._status()

    def action_filter(self) -> None:
        self.query_one(Input).focus()

    def action_leave_filter(self) -> None:
        self.query_one(DataTable).focus()

    def action_quit(self) -> None:
        self.app.exit()

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen(self.BINDINGS, notes=RUNS_NOTES))

    def on_input_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value
        self.fill()
        self._status()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.query_one(DataTable).focus()

    def on_key(self, event) -> None:
        # Typing a letter no key is bound to starts the filter with it: a new word after
        # the filter's words (every one must match), never glued to the last of them.
        if self.focused is self.query_one(DataTable) and event.character and event.character.isprintable() \
                and event.is_printable and not self.app.active_bindings.get(event.key):
            box = self.query_one(Input)
            box.focus()
            kept = box.value if not box.value or box.value.endswith(" ") else box.value + " "
            box.value = kept + event.character
            box.cursor_position = len(box.value)
            event.stop()


class RunsApp(EndsWithItsTerminal, App):
    """`rltui runs`: exits with an AttachRequest when Enter is
    pressed on a live run (the command then attaches), else with None."""

    TITLE = "rltui runs"
    CSS_PATH = ["runs.tcss", "../help.tcss"]

    def __init__(self, root: Path, *, cache: RunCache | None = None, theme: str | None = None,
                 probe=socket_answers, refresh_interval: float = 2.0, user_theme_dir: Path | None = None,
                 points: int | None = None, state: ListState | None = None):
        super().__init__()
        from rltui.ui.themes import DEFAULT_THEME, load_themes

        for loaded in load_themes(user_theme_dir):
            self.register_theme(loaded)
        self.theme = theme or DEFAULT_THEME
        self.root = Path(root)
        self.cache = cache or RunCache()
        self.runs_screen = RunsScreen(self.root, self.cache, probe=probe, refresh_interval=refresh_interval,
                                      points=points, state=state)
        self.sub_title = str(self.root)

    def on_mount(self) -> None:
        self.push_screen(self.runs_screen)

