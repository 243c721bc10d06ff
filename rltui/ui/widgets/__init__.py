"""Small dashboard widgets; each takes immutable data and never talks to the session."""

from rltui.ui.widgets.chart import CHART_METRICS, MetricChart
from rltui.ui.widgets.devices import DevicePanel
from rltui.ui.widgets.events import EventsLog
from rltui.ui.widgets.hparams import HParamsPanel
from rltui.ui.widgets.leaderboard import Leaderboard
from rltui.ui.widgets.sparklines import SPARKLINE_METRICS, MetricsPanel, MetricSparkline
from rltui.ui.widgets.status import StatusBar

__all__ = [
    "CHART_METRICS",
    "SPARKLINE_METRICS",
    "DevicePanel",
    "EventsLog",
    "HParamsPanel",
    "Leaderboard",
    "MetricChart",
    "MetricSparkline",
    "MetricsPanel",
    "StatusBar",
]
