"""One metric's declaration (`MetricSpec`): its name, its labels, how a line of text formats
it, which views show it, and how the values of several agents combine into one.

The shared metrics are declared in `trainers.metrics_spec`, an algorithm's own in its
package (`trainers.algorithms`); both use this record. Plain Python, without JAX.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Literal

# The sections a metric's series sit in, in TensorBoard and W&B (`<group>/<name>`): what the
# agent achieved while training, the optimisation's losses and diagnostics, the greedy
# evaluation's, and the values a schedule sets (the annealed learning rate, epsilon).
MetricGroup = Literal["train", "loss", "eval", "schedule"]


@dataclasses.dataclass(frozen=True)
class MetricSpec:
    name: str
    title: str  # long label: the chart's title
    label: str  # short label: sparklines, the headless line
    fmt: str = ".4g"  # format spec of one value in a line of text
    higher_is_better: bool | None = None  # False: lower is (a loss); None: neither, a diagnostic
    # "session": measured by the session (a field of its UpdateRecord), not in UpdateMetrics.
    # "evaluation": the session's evaluation of the policy (eval_every_updates), held in the
    # record of the update it evaluated and NaN in the others.
    source: Literal["trainer", "session", "evaluation"] = "trainer"
    # The algorithms that report it (None: every one); the others report NaN in every update.
    # An algorithm's package declares the metrics only it reports, and this is filled in there.
    algos: tuple[str, ...] | None = None
    # Where an algorithm's metric sits in the table (after the metric named here; None: at
    # the end): the order of `UpdateMetrics`, metrics.jsonl, the chart and the sparklines.
    after: str | None = None
    integer: bool = False  # a count: metrics.jsonl writes it as an integer
    # A mean over the episodes that ended in (or evaluated at) the update: NaN, routinely,
    # where none did.
    episodic: bool = False
    # How one update's values of several agents (seeds, population members) combine into
    # the one a record shows: "sum" (a count), "mean", or "finite_mean" (the mean over the
    # agents that have a value; an agent that ended no episode has none). A NaN under
    # "mean" stays NaN, so the divergence guard sees it.
    combine: Literal["mean", "sum", "finite_mean"] = "mean"
    # A non-finite value means training has diverged: the session pauses the run (an
    # episodic metric may be NaN simply because no episode ended, so it never guards).
    guards_divergence: bool = False
    sparkline: bool = False
    chart: bool = True
    headless: bool = False
    group: MetricGroup = "train"

    @property
    def tag(self) -> str:
        """Its series' name in TensorBoard and W&B: `<group>/<name>`."""
        return f"{self.group}/{self.name}"

    def format(self, value: float | None) -> str:
        """One value as a line of text shows it; — when there is none."""
        if value is None or math.isnan(value):
            return "—"
        return format(value, self.fmt)

    def reported_by(self, algo: str) -> bool:
        return self.algos is None or algo in self.algos
