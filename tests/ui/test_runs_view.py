"""`rltui runs`: the list of runs (live, finished, stopped, diverged, crashed, damaged), the
overlay and grouping of the runs picked, Enter on live and finished runs, and the command's
answers for an empty or unreadable directory. Run directories are only read."""

from __future__ import annotations

import json
import math
import os
import socket
import time
from pathlib import Path

import numpy as np
import pytest
from test_export import STEPS, make_run

from rltui.cli import main
from rltui.runfiles.comparison import group_by
from rltui.runfiles.discovery import RunState, state_of
from rltui.runfiles.loading import RunCache, load_run
from rltui.runs_view.rows import AttachRequest, row_of

from control_client import served

# --- building runs ---------------------------------------------------------------------------------


def events_ending(kind: str, message: str, *before: dict) -> list[dict]:
    return [{"kind": "compiled", "update": 0, "wall_time": 0.1, "message": "compiled"}, *before,
            {"kind": kind, "update": 12, "wall_time": 3.0, "message": message}]


def leave_socket(run: Path) -> None:
    """A control socket whose process is gone: the file stays, nobody accepts."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(run / "control.sock"))
    sock.close()


@pytest.fixture
def runs_dir(tmp_path):
    root = tmp_path / "runs"
    make_run(root / "a-finished", 12, config={"seed": 0})
    make_run(root / "b-lr", 12, config={"seed": 1, "lr": 1e-3}, ret=lambda u: 3.0 * u)
    make_run(root / "c-lr", 12, config={"seed": 2, "lr": 1e-3}, ret=lambda u: 3.0 * u + 1)
    make_run(root / "d-stopped", 12, events=events_ending("finished", "stopped at update 12"))
    make_run(root / "e-diverged", 12, events=events_ending(
        "finished", "stopped at update 12", {"kind": "nonfinite", "update": 11, "wall_time": 2.9, "message": "x"}))
    crashed = make_run(root / "f-crashed", 12, events=events_ending("checkpoint", "saved"))
    leave_socket(crashed)
    damaged = make_run(root / "g-damaged", 12)
    with open(damaged / "metrics.jsonl", "a") as file:
        file.write("{not json\n")
        file.write('{"update": 13, "env_st')  # being written: left out quietly
    return root


def files_of(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}


# --- states, unit -----------------------------------------------------------------------------------


def test_state_from_events():
    finished = events_ending("finished", "finished 12 updates")
    assert state_of(finished, live=False).name == "finished"
    assert state_of(finished, live=True).name == "live"
    assert state_of(events_ending("finished", "stopped at update 5"), live=False).name == "stopped"
    target = events_ending("finished", "stopped at update 5", {"kind": "target_reached", "update": 5,
                                                                "wall_time": 1, "message": "t"})
    assert state_of(target, live=False).name == "finished"
    nonfinite = {"kind": "nonfinite", "update": 5, "wall_time": 1, "message": "x"}
    assert state_of(events_ending("finished", "stopped at update 5", nonfinite), live=False).name == "diverged"
    rolled = {"kind": "rolled back", "update": 4, "wall_time": 1, "message": "x"}
    assert state_of(events_ending("finished", "finished 12 updates", nonfinite, rolled), False).name == "finished"
    error = state_of(events_ending("error", "boom"), live=False)
    assert error.name == "crashed" and "boom" in error.detail
    assert state_of(finished[:1], live=False, socket_left=True) == RunState(
        "crashed", "its control socket no longer answers")
    # A run resumed after it finished is judged by its last session.
    resumed = finished + [{"kind": "resumed", "update": 12, "wall_time": 3, "message": "r"}]
    assert state_of(resumed, live=False).name == "crashed"


def test_loaded_run_columns_and_cache(tmp_path):
    run = make_run(tmp_path / "r", 12, seeds=2)
    cache = RunCache()
    loaded = cache.get(run)
    assert loaded.env_steps == 12 * STEPS and loaded.updates == 12 and not loaded.damaged
    steps, values = loaded.curve("episode_return")
    assert len(values) == 8 and values[0] == pytest.approx(2.0) and steps[0] == STEPS  # None is no point
    assert "episode_return/seed_1" in loaded.columns
    assert cache.get(run) is loaded  # unchanged files: not read again
    with open(run / "metrics.jsonl", "a") as file:
        file.write(json.dumps({"update": 13, "env_steps": 13 * STEPS, "wall_time": 4, "episode_return": 99}) + "\n")
    again = cache.get(run)
    assert again is not loaded and again.updates == 13 and again.curve("episode_return")[1][-1] == 99


# --- the view -----------------------------------------------------------------------------------------


async def until(pilot, predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "the runs view did not settle"
        await pilot.pause(0.02)


def make_app(root: Path, tmp_path: Path, **kwargs):
    from rltui.ui.screens.runs import RunsApp

    return RunsApp(root, refresh_interval=0, user_theme_dir=tmp_path / "no-themes", **kwargs)


def table_text(screen) -> dict[str, list[str]]:
    from textual.widgets import DataTable

    table = screen.query_one(DataTable)
    out = {}
    for index in range(table.row_count):
        cells = [str(getattr(c, "plain", c)) for c in table.get_row_at(index)]
        out[cells[1].replace("⚠ ", "")] = cells
    return out


async def test_the_list_shows_every_state_and_marks_a_damaged_run(runs_dir, tmp_path):
    live = make_run(runs_dir / "h-live", 5)
    make_run(runs_dir / "i-aborted", 12, events=events_ending(
        "aborted", "aborted by a second Ctrl+C, without a final checkpoint; the run holds no checkpoint"))
    before = files_of(runs_dir)
    with served(live):
        app = make_app(runs_dir, tmp_path)
        async with app.run_test(size=(160, 40)) as pilot:
            screen = app.runs_screen
            await until(pilot, lambda: screen.loaded)
            rows = table_text(screen)
            states = {name: cells[4] for name, cells in rows.items()}
            assert states == {"a-finished": "finished", "b-lr": "finished", "c-lr": "finished",
                              "d-stopped": "stopped", "e-diverged": "diverged", "f-crashed": "crashed",
                              "g-damaged": "finished", "h-live": "live", "i-aborted": "aborted"}
            assert rows["g-damaged"][1] == "⚠ g-damaged" and rows["a-finished"][1] == "a-finished"
            assert rows["g-damaged"][5] == "1,536"  # the rest of that run still shows (12 updates)
            assert rows["a-finished"][6:8] == ["22", "22"]  # latest and best return
            # The status line says what is wrong with the damaged run under the cursor.
            table = screen.query_one("DataTable")
            table.move_cursor(row=screen.shown.index(screen.rows[runs_dir / "g-damaged"]))
            await pilot.pause()
            assert "1 damaged line in metrics.jsonl" in str(screen.query_one("#runs-status").render())
            table.move_cursor(row=screen.shown.index(screen.rows[runs_dir / "f-crashed"]))
            await pilot.pause()
            assert "no longer answers" in str(screen.query_one("#runs-status").render())
            # Enter on the live run: the view exits asking to attach to it.
            table.move_cursor(row=screen.shown.index(screen.rows[live]))
            await pilot.press("enter")
            await until(pilot, lambda: app.return_value is not None)
        assert app.return_value == AttachRequest(live)
    after = files_of(runs_dir)
    assert {k: v for k, v in after.items() if not k.endswith("control.sock")} == \
        {k: v for k, v in before.items() if not k.endswith("control.sock")}  # nothing written


async def test_enter_on_a_finished_run_opens_its_curves(runs_dir, tmp_path):
    from rltui.ui.screens.curves import CurvesScreen
    from rltui.ui.widgets.runs_chart import RunsChart

    app = make_app(runs_dir, tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = app.runs_screen
        await until(pilot, lambda: screen.loaded)
        screen.query_one("DataTable").move_cursor(row=screen.shown.index(screen.rows[runs_dir / "a-finished"]))
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, CurvesScreen))
        chart = app.screen.query_one(RunsChart)
        assert [line.label for line in chart.shown.lines] == ["a-finished"]
        await pilot.press("m")
        assert chart.shown.metric != "episode_return"
        await pilot.press("escape")
        assert app.screen is screen


async def test_back_from_an_attached_run_the_list_is_as_it_was_left(runs_dir, tmp_path):
    # `rltui runs` builds the list again after a detach, from the state the last one left.
    first = make_app(runs_dir, tmp_path)
    async with first.run_test(size=(160, 40)) as pilot:
        screen = first.runs_screen
        await until(pilot, lambda: screen.loaded)
        await pilot.press("space", "down", "space", "s", "S", "m", "x")  # two runs picked, sorted, charted
        await pilot.press(*"lr=0.001", "escape")
        state = screen.list_state()
    assert len(state.selected) == 2 and state.filter_text == "lr=0.001"
    again = make_app(runs_dir, tmp_path, state=state)
    async with again.run_test(size=(160, 40)) as pilot:
        screen = again.runs_screen
        await until(pilot, lambda: screen.loaded)
        assert screen.list_state() == state
        assert screen.query_one("Input").value == "lr=0.001"
        assert "2 selected" in str(screen.query_one("#runs-status").render())


async def test_overlay_smoothing_and_config_differences(runs_dir, tmp_path):
    from rltui.ui.widgets.runs_chart import RunsChart

    app = make_app(runs_dir, tmp_path, points=500)
    async with app.run_test(size=(160, 40)) as pilot:
        screen = app.runs_screen
        await until(pilot, lambda: screen.loaded)
        table = screen.query_one("DataTable")
        for name in ("a-finished", "b-lr"):
            table.move_cursor(row=screen.shown.index(screen.rows[runs_dir / name]))
            await pilot.press("space")
        chart = screen.query_one(RunsChart)
        await until(pilot, lambda: chart.shown is not None and len(chart.shown.lines) == 2)
        rows = table_text(screen)
        assert rows["a-finished"][0] == "●" and rows["a-finished"][10] == "(first)"
        assert rows["b-lr"][10] == "lr=0.001 seed=1"
        assert rows["c-lr"][10] == "lr=0.001 seed=2"
        line = chart.shown.lines[0]
        assert chart.shown.smoothing == pytest.approx(0.6)
        # The raw curve is kept under the smoothed one; the smoothed one is the debiased EMA.
        assert line.raw.tolist() == pytest.approx([2, 4, 8, 10, 14, 16, 20, 22])
        assert line.ys[0] == pytest.approx(2.0) and line.ys[-1] < 22
        await pilot.press("W", "W")
        await until(pilot, lambda: chart.shown.smoothing == 0.0)
        assert chart.shown.lines[0].raw is None and chart.shown.lines[0].ys[-1] == pytest.approx(22)
        await pilot.press("x")
        await until(pilot, lambda: chart.shown.x_axis == "time")
        assert chart.shown.lines[0].xs[0] == pytest.approx(0.25)  # wall time of update 1


async def test_grouping_matches_compare_group_by(runs_dir, tmp_path):
    from rltui.runfiles.statistics import t_quantile
    from rltui.ui.widgets.runs_chart import RunsChart

    app = make_app(runs_dir, tmp_path)
    async with app.run_test(size=(160, 40)) as pilot:
        screen = app.runs_screen
        await until(pilot, lambda: screen.loaded)
        table = screen.query_one("DataTable")
        names = ("a-finished", "b-lr", "c-lr")
        for name in names:
            table.move_cursor(row=screen.shown.index(screen.rows[runs_dir / name]))
            await pilot.press("space")
        await pilot.press("g")  # seed first
        assert screen.controls.group == "seed"
        await pilot.press("g")
        assert screen.controls.group == "lr"
        chart = screen.query_one(RunsChart)
        await until(pilot, lambda: chart.shown is not None and chart.shown.group == "lr")
        runs = [load_run(runs_dir / n) for n in names]
        expected = {k: tuple(r.name for r in members) for k, members in group_by(runs, "lr").items()}
        assert {b.key: b.members for b in chart.shown.bands} == expected
        assert [b.label for b in chart.shown.bands] == ["lr=0.0003 (1)", "lr=0.001 (2)"]
        # lr=0.001: b (3u) and c (3u + 1) smoothed alike, so their mean is b's curve + 0.5.
        pair = chart.shown.bands[1]
        assert np.all(pair.low <= pair.center + 1e-9) and np.all(pair.center <= pair.high + 1e-9)
        # Their t interval: two runs 1 apart, s = 1 / sqrt(2), so 2 x t(0.975, 1) x s / sqrt(2) wide.
        assert np.nanmax(pair.high - pair.low) == pytest.approx(t_quantile(0.975, 1))
        await pilot.press("i")
        await until(pilot, lambda: chart.shown.statistic == "iqm")


async def test_sort_and_filter_by_typing(runs_dir, tmp_path):
    app = make_app(runs_dir, tmp_path)
    async with app.run_test(size=(160, 40)) as pilot:
        screen = app.runs_screen
        await until(pilot, lambda: screen.loaded)
        names = lambda: [r.name for r in screen.shown]
        while screen.sort_key != "name":
            await pilot.press("s")
        assert names() == sorted(names())
        await pilot.press("S")
        assert names() == sorted(names(), reverse=True)
        await pilot.press("l", *"r=0.001")  # no key is bound to l: typing it starts the filter
        assert screen.filter_text == "lr=0.001"  # a word of the configuration
        assert names() == ["c-lr", "b-lr"]
        await pilot.press("escape", "slash", *["backspace"] * 8, *"stopped")
        assert names() == ["d-stopped"]
        await pilot.press("escape", "f")  # back in the list, a letter starts another word of the filter
        assert screen.filter_text == "stopped f" and names() == []


async def test_question_mark_opens_the_help_and_leaves_the_list_as_it_was(runs_dir, tmp_path):
    from rltui.ui.screens.help import HelpScreen

    app = make_app(runs_dir, tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = app.runs_screen
        await until(pilot, lambda: screen.loaded)
        shown = [r.name for r in screen.shown]
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        assert ("/", "filter") in app.screen.rows and ("space", "select") in app.screen.rows
        assert "starts the filter" in str(app.screen.query_one("#help-notes").content)
        assert app.screen.query_one("#help-dialog").styles.border.top[0] == "thick"  # help.tcss applies here too
        await pilot.press("escape")
        assert app.screen is screen and screen.filter_text == "" and [r.name for r in screen.shown] == shown


async def test_a_huge_run_loads_in_a_worker(tmp_path):
    root = tmp_path / "runs"
    make_run(root / "huge", 100_000)
    app = make_app(root, tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = app.runs_screen
        await until(pilot, lambda: screen.loaded, timeout=60)
        run = app.cache.cached(root / "huge")
        assert run.updates == 100_000
        assert str(screen.query_one("#runs-status").render()).startswith("1 run ·")
        await pilot.press("space")
        await until(pilot, lambda: screen.overlay is not None, timeout=30)
        # Generous bounds for a shared machine; docs/loggers.md states the measured figures.
        assert run.load_seconds < 20 and screen.overlay.seconds < 10


async def test_a_line_nested_too_deeply_marks_its_run_damaged(tmp_path):
    # A line deeper than Python's JSON parser recurses is a damaged line like any other: the
    # list shows the run, its returns and what is wrong with it, not a traceback.
    root = tmp_path / "runs"
    make_run(root / "a", 12)
    deep = make_run(root / "deep", 12)
    with open(deep / "metrics.jsonl", "a") as file:
        file.write("[" * 50_000 + "]" * 50_000 + "\n")
    app = make_app(root, tmp_path)
    async with app.run_test(size=(160, 40)) as pilot:
        screen = app.runs_screen
        await until(pilot, lambda: screen.loaded)
        rows = table_text(screen)
        assert rows["deep"][1] == "⚠ deep" and rows["deep"][5:8] == ["1,536", "22", "22"]
        screen.query_one("DataTable").move_cursor(row=screen.shown.index(screen.rows[deep]))
        await pilot.pause()
        assert "1 damaged line in metrics.jsonl" in str(screen.query_one("#runs-status").render())


# --- the command -------------------------------------------------------------------------------------


def test_runs_on_a_directory_without_runs_says_so(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["runs", str(tmp_path / "empty")]) == 0
    assert capsys.readouterr().out.startswith(f"no runs in {tmp_path / 'empty'}")


def test_runs_on_an_unreadable_directory_is_one_line(tmp_path, capsys, monkeypatch):
    assert main(["runs", str(tmp_path / "missing")]) == 2
    assert capsys.readouterr().err == f"rltui: error: {tmp_path / 'missing'}: no such directory\n"
    locked = tmp_path / "locked"
    locked.mkdir()
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if Path(p) == locked else real_access(p, mode))
    assert main(["runs", str(locked)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot read" in err


def test_snapshot_with_an_overlay(snap_compare, runs_dir, tmp_path, monkeypatch):
    import datetime

    from rltui.ui.screens import runs as screen_module

    utc = datetime.UTC  # the 'started' column in one time zone on every machine
    monkeypatch.setattr(screen_module, "_started",
                        lambda stamp: datetime.datetime.fromtimestamp(stamp, utc).strftime("%m-%d %H:%M"))
    for path in runs_dir.iterdir():  # fixed 'started' times for a picture that does not move
        for name in ("config.toml", "metrics.jsonl"):
            os.utime(path / name, (1_760_000_000, 1_760_000_000))
    app = make_app(runs_dir, tmp_path, probe=lambda path: False)

    async def run_before(pilot):
        screen = app.runs_screen
        await until(pilot, lambda: screen.loaded)
        table = screen.query_one("DataTable")
        while screen.sort_key != "name":
            await pilot.press("s")
        await pilot.press("S")  # a to g
        for name in ("a-finished", "b-lr", "c-lr"):
            table.move_cursor(row=screen.shown.index(screen.rows[runs_dir / name]))
            await pilot.press("space")
        await until(pilot, lambda: screen.overlay is not None and len(screen.overlay.lines) == 3)
        screen.scan_seconds, screen.overlay = 0.0, screen.overlay._replace(seconds=0.0)  # timings vary
        screen._status()
        await pilot.pause()

    assert snap_compare(app, terminal_size=(120, 36), run_before=run_before)


def test_nan_latest_is_a_dash(tmp_path):
    run = load_run(make_run(tmp_path / "r", 2, ret=lambda u: math.nan))
    assert math.isnan(row_of(run, RunState("finished", "")).latest)
