"""Every metric a run reports, declared once: the shared ones here, each algorithm's own in
its package (`trainers.algorithms`), placed among them.

The trainers fill `types.UpdateMetrics`, whose fields are the trainer metrics below in the
same order; the session records them with the ones it measures itself (sps), writes them to
metrics.jsonl and keeps their history; the dashboard's sparklines and chart, and the
headless line, show those flagged for them, under the labels given here.

Plain Python, without JAX: the session and the clients read it before (or without) JAX
starting, and `trainers` never imports `rltui`, so this module is the one place both sides
can share.
"""

from __future__ import annotations

from trainers.algorithms import ALGORITHMS
from trainers.algorithms.algorithm import placed, shared_by
from trainers.metric import MetricSpec

# The metrics rltui looks up by name (the chart's first, what ranks runs and members, the
# evaluation's, the session's own): spelled here once, in their specs below as everywhere else.
EPISODE_RETURN = "episode_return"
EVAL_RETURN = "eval_return"
EVAL_RETURN_STD = "eval_return_std"
SPS = "sps"


# The metrics every algorithm reports, and the session's; an algorithm's own are declared
# in its package and placed among these (`METRICS`).
SHARED_METRICS: tuple[MetricSpec, ...] = (
    MetricSpec(EPISODE_RETURN, "episode return", "return", fmt=".1f", higher_is_better=True, episodic=True,
               combine="finite_mean", sparkline=True, headless=True),
    MetricSpec("episode_length", "episode length", "length", fmt=".1f", episodic=True, combine="finite_mean"),
    MetricSpec("episodes", "episodes completed", "episodes", fmt=",.0f", integer=True, combine="sum", chart=False),
    MetricSpec("policy_loss", "policy loss", "π loss", sparkline=True, guards_divergence=True, group="loss"),
    MetricSpec("value_loss", "value loss", "V loss", higher_is_better=False, sparkline=True,
               guards_divergence=True, group="loss"),
    MetricSpec("entropy", "entropy", "entropy", sparkline=True, guards_divergence=True, group="loss"),
    MetricSpec("approx_kl", "approx KL", "KL", sparkline=True, group="loss"),
    MetricSpec("grad_norm", "grad norm", "grad norm", guards_divergence=True, group="loss"),
    # The rate in use at the update (annealed when anneal_lr): "now", beside the configured
    # lr the hyperparameters panel and the editor show.
    MetricSpec("lr", "learning rate now (after annealing)", "lr now", fmt=".3g", sparkline=True, group="schedule"),
    MetricSpec(EVAL_RETURN, "evaluation return (greedy)", "eval return", fmt=".1f", higher_is_better=True,
               source="evaluation", episodic=True, combine="finite_mean", group="eval"),
    MetricSpec(EVAL_RETURN_STD, "evaluation return, std over episodes", "eval std", fmt=".1f",
               source="evaluation", episodic=True, combine="finite_mean", group="eval"),
    MetricSpec(SPS, "env steps per second", "sps", fmt=",.0f", higher_is_better=True, source="session",
               headless=True),
)

# Every metric, in the order of `UpdateMetrics`, metrics.jsonl, the chart and the sparklines.
METRICS: tuple[MetricSpec, ...] = placed(
    shared_by(SHARED_METRICS, ALGORITHMS.values(), "unused_metrics"),
    (spec for a in ALGORITHMS.values() for spec in a.metrics),
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
DIVERGENCE_METRICS = tuple(spec.name for spec in METRICS if spec.guards_divergence)
# What can rank agents (population-based training's `pbt_metric`): a goal each agent has a
# value of, from training or from its evaluation.
RANKING_METRICS = tuple(spec.name for spec in METRICS if spec.higher_is_better and spec.source != "session")


def divergence_metrics(algo: str) -> tuple[str, ...]:
    """The metrics whose non-finite value means that a run of `algo` has diverged."""
    return tuple(name for name in DIVERGENCE_METRICS if METRIC_SPECS[name].reported_by(algo))


def undefined_metrics(algo: str) -> tuple[str, ...]:
    """The metrics `algo` has no such quantity for: another algorithm's own (REINFORCE clips
    nothing: no clip fraction), NaN in every update."""
    return tuple(spec.name for spec in METRICS if not spec.reported_by(algo))
