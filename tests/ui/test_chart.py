"""The chart and the sparklines over the whole run: the y axis and the panel agree on the
extremes, the seed views differ (a filled band; a coloured line per seed with a legend),
and the chart controls (pick a metric, smoothing, log scale, x axis)."""

from __future__ import annotations

import dataclasses

from test_ui import until

from rltui.config.build import RunConfig
from rltui.ui.app import DashboardApp
from rltui.ui.screens.metric_picker import MetricPicker
from rltui.ui.widgets.chart import CHART_METRICS

from fakes import FakeSession, fixed_device_stats


def publish_with_seeds(fake: FakeSession, updates: int, seeds: int, spread: float = 80.0) -> None:
    """A chunk as the session reports it for `seeds` agents whose returns differ by `spread`."""
    snapshot = fake.advance(updates)
    mean = snapshot.history["episode_return"]
    seed_returns = tuple(tuple(v + spread * (i - 1) * (1 + (k % 7) / 7) for k, v in enumerate(mean))
                         for i in range(seeds))
    snapshot = dataclasses.replace(snapshot, seed_returns=seed_returns)
    for listener in fake._listeners:
        listener.on_metrics(snapshot)

BRAILLE = range(0x2801, 0x2900)


async def run(tmp_path, scenario, config: RunConfig | None = None, size=(120, 40)) -> None:
    fake = FakeSession(total_updates=100_000)
    app = DashboardApp(
        fake, config or RunConfig(), tmp_path, chart_interval=0, refresh_interval=0,
        device_source=fixed_device_stats(), user_theme_dir=tmp_path / "no-user-themes",
    )

    async def main():
        async with app.run_test(size=size) as pilot:
            await until(pilot, lambda: fake.started)
            await scenario(app, pilot, fake)

    await main()


def chart_rows(chart) -> list[str]:
    return [chart.render_line(y).text for y in range(chart.size.height)]


def filled_columns(chart) -> int:
    """Columns where braille cells stand in three or more consecutive rows: a filled band."""
    rows = chart_rows(chart)
    count = 0
    for x in range(min(len(r) for r in rows)):
        run = best = 0
        for row in rows:
            run = run + 1 if ord(row[x]) in BRAILLE else 0
            best = max(best, run)
        count += best >= 3
    return count


async def test_the_chart_spans_the_panel_s_extremes_from_update_1(tmp_path):
    async def scenario(app, pilot, fake):
        # A dip at update 3, then 20k updates: the chart's y axis starts where the panel's minimum is.
        fake.on_thread(fake.advance, 20_000, {3: {"episode_return": -487.0}})
        chart = app.dashboard.chart
        await until(pilot, lambda: chart.y_range is not None and chart.curves.updates == 20_000)
        chart.redraw()
        assert chart.curves.state["update_first"][0] == 1
        assert chart.y_range[0] == -487.0
        assert chart.x_range[0] < 20_000 * 512 / 100  # the first point is near the run's start
        stats = app.dashboard.query_one("#spark-episode_return").stats_text
        assert "(-487…" in stats

    await run(tmp_path, scenario)


async def test_seed_band_is_filled_and_each_seed_has_a_colour_and_a_legend(tmp_path):
    async def scenario(app, pilot, fake):
        fake.on_thread(publish_with_seeds, fake, 100, 3)
        chart = app.dashboard.chart
        await until(pilot, lambda: chart.shows_seeds)
        chart.redraw()
        band = filled_columns(chart)
        assert band > chart.size.width // 3  # a band, not a line and dots
        await pilot.press("b")
        chart.redraw()
        text = "\n".join(chart_rows(chart))
        assert all(f"seed {k}" in text for k in range(3))  # the legend
        colours = {seg.style.color for y in range(chart.size.height) for seg in chart.render_line(y)
                   if seg.style and seg.style.color and any(ord(c) in BRAILLE for c in seg.text)}
        assert len(colours) >= 3
        assert filled_columns(chart) < band

    await run(tmp_path, scenario, RunConfig(num_seeds=3))


async def test_chart_controls(tmp_path):
    async def scenario(app, pilot, fake):
        fake.on_thread(fake.advance, 300)
        chart = app.dashboard.chart
        await until(pilot, lambda: chart.y_range is not None)
        await pilot.press("m")
        assert isinstance(app.screen, MetricPicker)
        names = [name for name, _ in chart.metrics]
        for _ in range(names.index("value_loss") - names.index(chart.metric)):
            await pilot.press("down")
        await pilot.press("enter")
        await until(pilot, lambda: not isinstance(app.screen, MetricPicker))
        assert chart.metric == "value_loss" and "value loss" in str(chart.border_title)
        await pilot.press("w")
        assert chart.smoothing == 0.6 and "smoothed 0.6" in str(chart.border_title)
        await pilot.press("l")
        assert chart.log_scale and "log" in str(chart.border_title) and not chart.log_refused
        await pilot.press("t")
        assert chart.x_axis == "time" and "wall time" in str(chart.border_title)
        assert chart.x_range[1] <= 300 * 0.01 + 1e-6  # seconds, not env steps
        await pilot.press("m", "escape")
        assert chart.metric == "value_loss"
        # No evaluation: no evaluation return to pick (or to pass by with c), which would
        # only draw an empty chart.
        assert "eval_return" not in names and "eval_return_std" not in names
        seen = set()
        for _ in CHART_METRICS:
            await pilot.press("c")
            seen.add(chart.metric)
        assert "value_loss" in seen and not any(metric.startswith("eval_") for metric in seen)
        # A metric with values <= 0 cannot go on a log axis: drawn linear, and said so.
        chart.metric = "policy_loss"
        assert chart.log_refused and "linear" in str(chart.border_title)

    await run(tmp_path, scenario)


async def test_a_run_that_evaluates_offers_its_evaluation_return(tmp_path):
    async def scenario(app, pilot, fake):
        await pilot.press("m")
        assert isinstance(app.screen, MetricPicker)
        assert ("eval_return", "evaluation return (greedy)") in app.screen.metrics

    await run(tmp_path, scenario, RunConfig(eval_every_updates=10))


async def drawn_chart(app, pilot, fake, updates: int = 300):
    """The dashboard's chart once it has drawn `updates` updates of the fake session."""
    fake.on_thread(fake.advance, updates)
    chart = app.dashboard.chart
    await until(pilot, lambda: chart.y_range is not None)
    return chart


def shown_title(chart) -> str:
    """The border title as the terminal shows it (the title is markup)."""
    from textual.content import Content

    return Content.from_markup(str(chart.border_title)).plain


async def test_the_title_shows_a_log_scale_alone_and_with_smoothing(tmp_path):
    async def scenario(app, pilot, fake):
        chart = await drawn_chart(app, pilot, fake)
        await pilot.press("l")
        assert shown_title(chart) == "episode return vs env steps [log] (c, m)"
        await pilot.press("w")
        assert shown_title(chart) == "episode return vs env steps [smoothed 0.6, log] (c, m)"

    await run(tmp_path, scenario)


async def test_a_log_chart_resized_twice_still_draws_its_curve(tmp_path):
    # plotext takes log10 of the data it holds each time it builds: a build at a new size
    # without the data set again drew nothing, and the next one raised (log10 of negatives).
    async def scenario(app, pilot, fake):
        chart = await drawn_chart(app, pilot, fake)
        await pilot.press("l")
        await pilot.pause()
        assert chart.log_scale and not chart.log_refused
        for size in ((100, 36), (120, 40), (110, 40)):
            await pilot.resize_terminal(*size)
            await pilot.pause()
            rows = chart_rows(chart)
            assert sum(ord(c) in BRAILLE for row in rows for c in row) > 20, size

    await run(tmp_path, scenario)


async def test_edits_are_marked_against_wall_time_too(tmp_path):
    async def scenario(app, pilot, fake):
        chart = await drawn_chart(app, pilot, fake)
        step = 150 * fake.steps_per_update
        chart.add_edit(step)
        chart.flush()
        curves = chart.curves
        assert chart._edit_positions(curves) == [float(step)]
        await pilot.press("t")
        (when,) = chart._edit_positions(curves)
        # Halfway through the run's env steps, halfway through its wall time (0.01 s an update).
        assert abs(when - 150 * 0.01) < 0.02 and chart.x_range[0] <= when <= chart.x_range[1]
        marked = [row for row in chart_rows(chart) if "│" in row[8:]]
        assert marked, "no edit marker drawn against wall time"

    await run(tmp_path, scenario)
