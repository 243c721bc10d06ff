"""The dashboard with several seeds: return as mean with a min-max band, or one line per
seed, switched with `b`."""

from __future__ import annotations

import dataclasses

from test_ui import until

from rltui.config.build import RunConfig
from rltui.ui.app import DashboardApp

from fakes import FakeSession, fixed_device_stats


def publish_with_seeds(fake: FakeSession, updates: int, seeds: int) -> None:
    """A chunk as the session reports it for `seeds` agents: the mean in `history`, each
    agent's returns in `seed_returns`."""
    snapshot = fake.advance(updates)
    mean = snapshot.history["episode_return"]
    seed_returns = tuple(tuple(v + 10.0 * (i - 1) for v in mean) for i in range(seeds))
    snapshot = dataclasses.replace(snapshot, seed_returns=seed_returns)
    for listener in fake._listeners:
        listener.on_metrics(snapshot)


async def run(tmp_path, config: RunConfig, scenario) -> None:
    fake = FakeSession()
    app = DashboardApp(
        fake, config, tmp_path, chart_interval=0, refresh_interval=0,
        device_source=fixed_device_stats(), user_theme_dir=tmp_path / "no-user-themes",
    )

    async def main():
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: fake.started)
            await scenario(app, pilot, fake)

    await main()


async def test_seeds_band_then_lines(tmp_path):
    async def scenario(app, pilot, fake):
        fake.on_thread(publish_with_seeds, fake, 20, 3)
        chart = app.dashboard.chart
        await until(pilot, lambda: chart.shows_seeds)
        assert "3 seeds: mean, min-max" in str(chart.border_title)
        await pilot.press("b")
        assert chart.seed_view == "lines"
        assert "3 seeds: each" in str(chart.border_title)
        await pilot.press("c")  # other metrics have no per-seed view
        assert not chart.shows_seeds and "seeds" not in str(chart.border_title)

    await run(tmp_path, RunConfig(num_seeds=3), scenario)


async def test_single_seed_has_no_seed_view_and_b_says_why(tmp_path):
    async def scenario(app, pilot, fake):
        fake.on_thread(fake.advance, 5)
        await pilot.press("b")
        chart = app.dashboard.chart
        assert chart.seed_view == "band" and not chart.shows_seeds
        assert "seeds" not in str(chart.border_title)
        # A key that cannot act says why, rather than nothing.
        assert [(n.title, n.message) for n in app._notifications] == [
            ("seeds", "This run trains one seed: b splits the return by seed when num_seeds > 1, "
                      "by member in a population (--sweep).")]

    await run(tmp_path, RunConfig(), scenario)

    async def several(app, pilot, fake):
        fake.on_thread(publish_with_seeds, fake, 5, 3)
        await until(pilot, lambda: app.dashboard.chart.shows_seeds)
        await pilot.press("b")
        assert app.dashboard.chart.seed_view == "lines" and not app._notifications

    await run(tmp_path, RunConfig(num_seeds=3), several)
