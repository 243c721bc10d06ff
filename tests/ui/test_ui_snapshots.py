"""Snapshot tests of the dashboard (pytest-textual-snapshot): the main screen at 80x24 and
120x40, and the editor, with deterministic data (a fake session, fixed device stats, no
wall clock). Update after an intended change with `pytest --snapshot-update`, and look at
the SVGs in __snapshots__/ before committing them."""

from __future__ import annotations

import math
import time

from rltui.config.build import RunConfig
from rltui.session import SessionState, SetHParams
from rltui.ui.app import DashboardApp

from fakes import FakeSession, fixed_device_stats


def dashboard_with_history(tmp_path):
    fake = FakeSession()
    app = DashboardApp(
        fake,
        RunConfig(),
        tmp_path / "CartPole-v1-ppo-snapshot",  # only the name is shown
        device_source=fixed_device_stats(),
        chart_interval=0,
        refresh_interval=0,
        user_theme_dir=tmp_path / "no-user-themes",
        clock=lambda: 0.0,  # elapsed counts on from each snapshot by this clock: keep it still
    )

    async def run_before(pilot):
        async def until(predicate):
            deadline = time.monotonic() + 10
            while not predicate():
                assert time.monotonic() < deadline, "the dashboard did not settle"
                await pilot.pause(0.01)

        await until(lambda: app.session_state is SessionState.RUNNING)
        fake.on_thread(fake.advance, 60, {57: {"policy_loss": math.nan}})
        fake.submit(SetHParams({"lr": 1e-3}))
        await until(lambda: "hparams" in app.dashboard.events_log.text)
        fake.on_thread(fake.advance, 60)
        fake.on_thread(fake.event, "warning", "a warning, for the log")
        await until(lambda: app.latest is not None and app.latest.update == 120)
        await until(lambda: "warning" in app.dashboard.events_log.text)
        await until(lambda: app.dashboard.device_panel.stats is not None)
        # A toast leaves after its timeout by the wall clock, which a loaded machine can pass
        # before the picture is taken: the picture has none.
        app.clear_notifications()
        await pilot.pause()

    return app, run_before


def test_main_screen_80x24(snap_compare, tmp_path):
    app, run_before = dashboard_with_history(tmp_path)
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_main_screen_120x40(snap_compare, tmp_path):
    app, run_before = dashboard_with_history(tmp_path)
    assert snap_compare(app, terminal_size=(120, 40), run_before=run_before)


def test_editor_80x24(snap_compare, tmp_path):
    app, settle = dashboard_with_history(tmp_path)

    async def run_before(pilot):
        await settle(pilot)
        await pilot.press("e", "down", "1", ".", "5", "enter")  # gamma 1.5: refused
        await pilot.pause()

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_quit_dialog_80x24(snap_compare, tmp_path):
    # The dialog is tinted, not opaque: the dashboard stays in sight behind it.
    app, settle = dashboard_with_history(tmp_path)

    async def run_before(pilot):
        await settle(pilot)
        await pilot.press("q")
        await pilot.pause()

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_help_80x24(snap_compare, tmp_path):
    # A description that wraps goes on under itself, not at column 0.
    app, settle = dashboard_with_history(tmp_path)

    async def run_before(pilot):
        await settle(pilot)
        await pilot.press("question_mark")
        await pilot.pause()

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)
