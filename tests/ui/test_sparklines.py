"""The metrics panel's `current (min…max)` label: whole numbers or fewer of them, never a cut one."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.app import App, ComposeResult
from textual.containers import Vertical

import rltui.ui
from rltui.ui.widgets.chart import _curves_of
from rltui.ui.widgets.sparklines import MetricSparkline


class OneMetric(App):
    CSS_PATH = str(Path(rltui.ui.__file__).parent / "app.tcss")  # the dashboard's layout of a metric

    def compose(self) -> ComposeResult:
        with Vertical():
            yield MetricSparkline("td_loss", "td loss", id="spark")


@pytest.mark.parametrize("values,shown", [
    # Fits the label's 26 cells whole.
    ([0.5, 2.0, 1.25], "1.25 (0.5…2)"),
    # Whole, 28 cells: the range with two digits (26).
    ([-9.87e-3, -1.11e-5, -1.23e-4], "-1.23e-4 (-0.0099…-1.1e-5)"),
    # Still too long with two: the current value alone.
    ([-9.876e-12, -1.111e-15, -1.234e-14], "-1.23e-14"),
])
async def test_the_stats_show_the_longest_text_that_fits(values, shown):
    app = OneMetric()
    async with app.run_test(size=(100, 10)) as pilot:
        spark = app.query_one("#spark", MetricSparkline)
        spark.curves = _curves_of(range(1, len(values) + 1), {"td_loss": tuple(values)})
        await pilot.pause()
        label = spark.query_one(".metric-stats")
        assert spark.stats_text == shown
        assert len(shown) <= label.content_size.width
