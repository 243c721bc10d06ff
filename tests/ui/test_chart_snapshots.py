"""Snapshot tests of the chart with three seeds (pytest-textual-snapshot): the mean on a
filled min-max band, and one coloured line per seed with a legend. Update after an
intended change with `pytest --snapshot-update`, and look at the SVGs first."""

from __future__ import annotations

import time

from test_chart import publish_with_seeds

from rltui.config.build import RunConfig
from rltui.session import SessionState
from rltui.ui.app import DashboardApp

from fakes import FakeSession, fixed_device_stats


def dashboard_with_seeds(tmp_path, keys: tuple[str, ...]):
    fake = FakeSession()
    app = DashboardApp(
        fake, RunConfig(num_seeds=3), tmp_path / "CartPole-v1-ppo-snapshot", device_source=fixed_device_stats(),
        chart_interval=0, refresh_interval=0, user_theme_dir=tmp_path / "no-user-themes", clock=lambda: 0.0,
    )

    async def run_before(pilot):
        deadline = time.monotonic() + 10
        while app.session_state is not SessionState.RUNNING or app.dashboard.device_panel.stats is None:
            assert time.monotonic() < deadline, "the dashboard did not settle"
            await pilot.pause(0.01)
        fake.on_thread(publish_with_seeds, fake, 100, 3)
        while not app.dashboard.chart.shows_seeds:
            assert time.monotonic() < deadline, "no seeds"
            await pilot.pause(0.01)
        for key in keys:
            await pilot.press(key)
        app.dashboard.chart.redraw()
        await pilot.pause()

    return app, run_before


def test_seeds_band_120x40(snap_compare, tmp_path):
    app, run_before = dashboard_with_seeds(tmp_path, ())
    assert snap_compare(app, terminal_size=(120, 40), run_before=run_before)


def test_seeds_each_120x40(snap_compare, tmp_path):
    app, run_before = dashboard_with_seeds(tmp_path, ("b",))
    assert snap_compare(app, terminal_size=(120, 40), run_before=run_before)
