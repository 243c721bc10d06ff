"""The dashboard at 80x24, attached to a run: after pause, edit, save and rollback the
events keep their border, the footer's keys fit without a stray letter, the chart's plot
is closed by the panel's border alone, and the devices panel shows the run's devices
(also after a resize). Snapshots at 80x24 (pytest-textual-snapshot; update after an
intended change with `pytest --snapshot-update` and look at the SVGs first)."""

from __future__ import annotations

import time
from contextlib import contextmanager

from rltui.config.build import RunConfig
from rltui.control.remote import RemoteSession
from rltui.session import SessionState
from rltui.session.devices import DeviceStats, FixedDeviceStats
from rltui.ui.app import DashboardApp
from rltui.ui.screens import HParamEditor

from control_client import served

# Sampling another process (an attached run): its JAX devices are there, not here.
ATTACHED_STATS = FixedDeviceStats(DeviceStats(cpu_percent=(12.0, 87.0), process_rss=812 * 2**20,
                                              memory_total=16 * 2**30, jax_process=4321))


@contextmanager
def attached_dashboard(tmp_path):
    run_dir = tmp_path / "CartPole-v1-ppo-attached"  # only the name is shown
    run_dir.mkdir()
    with served(run_dir) as (fake, _server):
        fake.on_thread(fake.advance, 40)
        remote = RemoteSession.connect(run_dir)
        try:
            yield fake, DashboardApp(remote, RunConfig(), run_dir, device_source=ATTACHED_STATS, chart_interval=0,
                                     refresh_interval=0, user_theme_dir=tmp_path / "no-user-themes",
                                     clock=lambda: 0.0)
        finally:
            remote.close()


async def until(pilot, predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "the dashboard did not settle"
        await pilot.pause(0.01)


def after_pause_edit_save_rollback(app, fake):
    async def run_before(pilot):
        await until(pilot, lambda: app.latest is not None and app.latest.update == 40)
        await pilot.press("p")
        await until(pilot, lambda: app.session_state is SessionState.PAUSED)
        await pilot.press("e")
        await until(pilot, lambda: isinstance(app.screen, HParamEditor))
        await pilot.press("escape")
        await pilot.press("s")
        await until(pilot, lambda: "checkpoint saved" in app.dashboard.events_log.text)
        # As the real session says it: a line that wraps in the panel.
        fake.on_thread(fake.event, "checkpoint", "checkpoint saved checkpoint-000000040.msgpack (requested)")
        await pilot.press("r", "y")
        await until(pilot, lambda: "rolled back" in app.dashboard.events_log.text)
        app.clear_notifications()
        await pilot.pause()

    return run_before


def test_attached_80x24_after_pause_edit_save_rollback(snap_compare, tmp_path):
    with attached_dashboard(tmp_path) as (fake, app):
        assert snap_compare(app, terminal_size=(80, 24), run_before=after_pause_edit_save_rollback(app, fake))


def test_attached_80x24_devices_after_a_resize(snap_compare, tmp_path):
    with attached_dashboard(tmp_path) as (fake, app):
        async def run_before(pilot):
            await until(pilot, lambda: app.latest is not None and app.dashboard.device_panel.stats is not None)
            await pilot.resize_terminal(120, 40)
            await pilot.pause()
            await pilot.resize_terminal(80, 24)
            await pilot.press("v", "v")  # events, hyperparameters, devices
            await until(pilot, lambda: app.dashboard.side_panel == "devices")
            await pilot.pause()

        assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


async def test_the_footer_leaves_out_spare_keys_rather_than_clip_the_last_ones(tmp_path):
    with attached_dashboard(tmp_path) as (fake, app):
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: app.latest is not None)
            await pilot.press("p")
            await until(pilot, lambda: app.session_state is SessionState.PAUSED)
            await pilot.pause(0.1)
            from textual.widgets._footer import FooterKey

            footer = [key.description for key in app.dashboard.query(FooterKey) if key.description]
            assert footer[-4:] == ["Stop run", "Detach", "Watch", "palette"]
            assert "Chart" not in footer and "Rollback" in footer
            # As the terminal shows it: every key whole, nothing after the palette's.
            line = app.screen._compositor.render_strips()[-1].text
            assert "k Stop run q Detach a Watch" in line and line.rstrip().endswith("^p palette"), line
            await pilot.resize_terminal(120, 24)
            await pilot.pause(0.1)
            assert "Chart" in [key.description for key in app.dashboard.query(FooterKey)]


async def test_the_screen_is_repainted_once_a_toast_has_gone(tmp_path, monkeypatch):
    with attached_dashboard(tmp_path) as (fake, app):
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: app.latest is not None)
            repaints = []
            monkeypatch.setattr(type(app), "_repaint_after_toast", lambda self: repaints.append(self.screen))
            app.notify("a toast", timeout=0.05)
            await until(pilot, lambda: repaints == [app.screen])
