"""Every metric a run reports, declared once.

The trainers fill `types.UpdateMetrics`, whose fields are the trainer metrics below in the
same order; the session records them with the ones it measures itself (sps), writes them to
metrics.jsonl and keeps their history; the dashboard's sparklines and chart, and the
headless line, show those flagged for them, under the labels given here.

Plain Python, without JAX: the session and the clients read it before (or without) JAX
starting, and `trainers` never imports `rltui`, so this module is the one place both sides
can share.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Literal


@dataclasses.dataclass(frozen=True)
class MetricSpec:
    name: str
    title: str  # long label: the chart's title
    label: str  # short label: sparklines, the headless line
    fmt: str = ".4g"  # format spec of one value in a line of text
    higher_is_better: bool | None = None  # None: neither, a diagnostic rather than a goal
    # "session": measured by the session (a field of its UpdateRecord), not in UpdateMetrics.
    # "evaluation": the session's evaluation of the policy (eval_every_updates), held in the
    # record of the update it evaluated and NaN in the others.
    source: Literal["trainer", "session", "evaluation"] = "trainer"
    undefined_for: tuple[str, ...] = ()  # algorithms with no such quantity: NaN in every update
    integer: bool = False  # a count: metrics.jsonl writes it as an integer
    # A mean over the episodes that ended in (or evaluated at) the update: NaN, routinely,
    # where none did.
    episodic: bool = False
    sparkline: bool = False
    chart: bool = True
    headless: bool = False

    def format(self, value: float | None) -> str:
        """One value as a line of text shows it; — when there is none."""
        if value is None or math.isnan(value):
            return "—"
        return format(value, self.fmt)


METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("episode_return", "episode return", "return", fmt=".1f", higher_is_better=True, episodic=True,
               sparkline=True, headless=True),
    MetricSpec("episode_length", "episode length", "length", fmt=".1f", episodic=True),
    MetricSpec("episodes", "episodes completed", "episodes", fmt=",.0f", integer=True, chart=False),
    MetricSpec("policy_loss", "policy loss", "π loss", sparkline=True),
    MetricSpec("value_loss", "value loss", "V loss", sparkline=True),
    MetricSpec("entropy", "entropy", "entropy", sparkline=True),
    MetricSpec("approx_kl", "approx KL", "KL", sparkline=True),
    MetricSpec("clip_frac", "clip fraction", "clip frac", undefined_for=("reinforce",)),
    MetricSpec("grad_norm", "grad norm", "grad norm"),
    MetricSpec("lr", "learning rate", "lr", fmt=".3g", sparkline=True),
    MetricSpec("eval_return", "evaluation return (greedy)", "eval return", fmt=".1f", higher_is_better=True,
               source="evaluation", episodic=True),
    MetricSpec("eval_return_std", "evaluation return, std over episodes", "eval std", fmt=".1f",
               source="evaluation", episodic=True),
    MetricSpec("sps", "env steps per second", "sps", fmt=",.0f", higher_is_better=True, source="session",
               headless=True),
)

METRIC_SPECS = {spec.name: spec for spec in METRICS}
METRIC_NAMES = tuple(spec.name for spec in METRICS)
# The fields of `types.UpdateMetrics`, in order.
TRAINER_METRICS = tuple(spec.name for spec in METRICS if spec.source == "trainer")
# The values an update record carries (`UpdateRecord.values`): the trainer's and the evaluation's.
RECORDED_METRICS = tuple(spec.name for spec in METRICS if spec.source != "session")
EVALUATION_METRICS = tuple(spec.name for spec in METRICS if spec.source == "evaluation")
CHART_METRICS = tuple(spec for spec in METRICS if spec.chart)
SPARKLINE_METRICS = tuple(spec for spec in METRICS if spec.sparkline)
HEADLESS_METRICS = tuple(spec for spec in METRICS if spec.headless)


def undefined_metrics(algo: str) -> tuple[str, ...]:
    """The metrics `algo` has no such quantity for (REINFORCE clips nothing: no clip fraction)."""
    return tuple(spec.name for spec in METRICS if algo in spec.undefined_for)
