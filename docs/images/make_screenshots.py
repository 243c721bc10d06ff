"""Draw the dashboard's chart screenshots for docs/dashboard.md against the fake session of
tests/fakes.py: python docs/images/make_screenshots.py OUT_DIR (run from the repository
root; docs/images for the pictures the page shows)."""

from __future__ import annotations

import asyncio
import dataclasses
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, "tests")

from rltui.config.build import RunConfig
from rltui.ui.app import DashboardApp

from fakes import FakeSession, fixed_device_stats


def seeds_chunk(fake: FakeSession, updates: int) -> None:
    snapshot = fake.advance(updates)
    mean = snapshot.history["episode_return"]
    seed_returns = tuple(tuple(v + 80.0 * (i - 1) * (1 + (k % 7) / 7) for k, v in enumerate(mean)) for i in range(3))
    snapshot = dataclasses.replace(snapshot, seed_returns=seed_returns)
    for listener in fake._listeners:
        listener.on_metrics(snapshot)


async def shoot(name: str, config: RunConfig, feed, keys: tuple[str, ...] = ()) -> None:
    fake = FakeSession(total_updates=40_000)
    app = DashboardApp(fake, config, Path(tempfile.mkdtemp()), chart_interval=0, refresh_interval=0,
                       device_source=fixed_device_stats())
    async with app.run_test(size=(140, 42)) as pilot:
        while not fake.started:
            await pilot.pause(0.05)
        fake.on_thread(feed, fake)
        await pilot.pause(0.5)
        for key in keys:
            await pilot.press(key)
        app.dashboard.chart.flush()
        await pilot.pause(0.3)
        app.save_screenshot(name)


def main(out_dir: str) -> None:
    out = Path(out_dir)
    # A dip at update 3, then 20k updates: the chart and the panel's min still show it.
    asyncio.run(shoot(str(out / "history.svg"), RunConfig(),
                      lambda fake: fake.advance(20_000, {3: {"episode_return": -487.0}})))
    asyncio.run(shoot(str(out / "seeds-band.svg"), RunConfig(num_seeds=3), lambda fake: seeds_chunk(fake, 100)))
    asyncio.run(shoot(str(out / "seeds-each.svg"), RunConfig(num_seeds=3), lambda fake: seeds_chunk(fake, 100),
                      keys=("b",)))


if __name__ == "__main__":
    main(sys.argv[1])
