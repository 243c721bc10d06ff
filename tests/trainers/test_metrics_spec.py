"""A metric is declared once (trainers.metrics_spec): the trainer's output, the session's
snapshot and metrics.jsonl, the headless line, the sparklines and the chart all follow the
declaration, so a new metric is one line there plus the code that computes it."""

from __future__ import annotations

import dataclasses
import io
import math

import pytest
from rich.console import Console

from rltui.formatting import bucket_means
from rltui.headless import ProgressListener
from rltui.session import SessionListener, TrainingSession
from rltui.session.evaluation import EvalResult, EvaluationPolicy
from rltui.ui.widgets.chart import CHART_METRICS, downsample
from rltui.ui.widgets.sparklines import SPARKLINE_METRICS
from trainers import metrics_spec
from trainers.algorithms import ALGORITHMS
from trainers.hparams import DynamicHParams
from trainers.types import UpdateMetrics

DECLARED = {spec.name for spec in metrics_spec.METRICS}


class _Backend:
    """Every trainer metric of every update is 1.0."""

    steps_per_update = 10
    max_chunk_updates = 4

    def build(self, hparams):
        pass

    def run_chunk(self, num_updates, hparams):
        return [{name: 1.0 for name in metrics_spec.TRAINER_METRICS} for _ in range(num_updates)]

    def describe(self):
        return {"env": "Fake-v0", "algo": "ppo", "devices": ["cpu:0"], "device_kind": "fake"}


class _Evaluator:
    def compile(self):
        pass

    def evaluate(self, update):
        return EvalResult(float(update), 0.5)


class _Snapshots(SessionListener):
    def __init__(self):
        self.snapshots = []

    def on_metrics(self, snapshot):
        self.snapshots.append(snapshot)


def test_the_trainer_reports_exactly_the_declared_trainer_metrics_in_order():
    assert tuple(field.name for field in dataclasses.fields(UpdateMetrics)) == metrics_spec.TRAINER_METRICS


def test_every_declared_metric_is_in_the_sessions_snapshot_and_metrics_jsonl():
    # An evaluation on every update, so the evaluation's metrics have values too.
    session = TrainingSession(_Backend(), DynamicHParams.create(), 3, chunk_seconds=1.0,
                              evaluation=EvaluationPolicy(every_updates=1), evaluator=_Evaluator())
    listener = _Snapshots()
    session.add_listener(listener)
    session.start()
    assert session.join(timeout=30)
    snapshot = listener.snapshots[-1]
    assert set(snapshot.history) == DECLARED
    assert all(len(values) == 3 and all(math.isfinite(v) for v in values) for values in snapshot.history.values())
    row = snapshot.new_records[-1].to_json()
    assert {spec.name for spec in metrics_spec.METRICS if spec.source == "trainer"} <= set(row)
    assert {spec.name: type(row[spec.name]) for spec in metrics_spec.METRICS if spec.integer} == {"episodes": int,
                                                                                              "gradient_steps": int}


def test_the_headless_line_shows_every_metric_declared_for_it_with_its_label_and_format():
    out = io.StringIO()
    listener = ProgressListener(Console(file=out, force_terminal=False, width=200), 1000)
    session = TrainingSession(_Backend(), DynamicHParams.create(), 3, chunk_seconds=1.0)
    session.add_listener(listener)
    session.start()
    assert session.join(timeout=30)
    (line,) = [line for line in out.getvalue().splitlines() if line.startswith("update 3/3")]
    snapshot_sps = float(line.split("sps ")[1].split()[0].replace(",", ""))
    values = {"episode_return": 1.0, "sps": snapshot_sps}
    assert {spec.name for spec in metrics_spec.HEADLESS_METRICS} == set(values)
    for spec in metrics_spec.HEADLESS_METRICS:
        assert f"{spec.label} {spec.format(values[spec.name])}" in line, line


def test_the_dashboard_shows_the_metrics_declared_for_it_in_declared_order():
    assert CHART_METRICS == tuple((spec.name, spec.title) for spec in metrics_spec.METRICS if spec.chart)
    assert SPARKLINE_METRICS == tuple((spec.name, spec.label) for spec in metrics_spec.METRICS if spec.sparkline)
    # What the dashboard has shown all along: every metric on the chart but the episode count.
    assert {name for name, _ in CHART_METRICS} == DECLARED - {"episodes"}
    assert [name for name, _ in SPARKLINE_METRICS] == [
        "episode_return", "td_loss", "q_mean", "epsilon", "alpha", "policy_loss", "value_loss", "entropy", "approx_kl",
        "buffer_fill", "lr"
    ]


def test_the_metrics_an_algorithm_never_defines_are_the_declared_ones():
    # An algorithm's own metrics are declared in its package; the others have none of them.
    for algo, algorithm in ALGORITHMS.items():
        own = {spec.name for spec in algorithm.metrics}
        assert own <= DECLARED and not own & set(metrics_spec.undefined_metrics(algo))
        others = {spec.name for other in ALGORITHMS.values() if other is not algorithm for spec in other.metrics}
        assert set(metrics_spec.undefined_metrics(algo)) == (others - own) | set(algorithm.unused_metrics)
    replay = ("buffer_fill", "gradient_steps")
    assert metrics_spec.undefined_metrics("reinforce") == ("td_loss", "q_mean", "epsilon", "alpha", "reward_max",
                                                           "clip_frac", *replay)
    assert metrics_spec.undefined_metrics("ppo") == ("td_loss", "q_mean", "epsilon", "alpha", "reward_max", *replay)
    assert set(metrics_spec.undefined_metrics("pqn")) == {"policy_loss", "value_loss", "entropy", "approx_kl",
                                                          "clip_frac", "alpha", *replay}
    assert set(metrics_spec.undefined_metrics("dqn")) == {"policy_loss", "value_loss", "entropy", "approx_kl",
                                                          "clip_frac", "alpha"}
    assert set(metrics_spec.undefined_metrics("sac")) == {"value_loss", "approx_kl", "clip_frac", "epsilon"}


def test_one_downsampler_for_chart_and_sparklines():
    xs = list(range(10))
    ys = [0.0, 1.0, math.nan, 3.0, 4.0, 5.0, 6.0, math.inf, 8.0, 9.0]
    # The eight finite points in three runs as equal as can be: (0, 1), (3, 4, 5), (6, 8, 9).
    x, y = downsample(xs, ys, 3)
    assert x == pytest.approx([0.5, 4.0, 23 / 3]) and y == pytest.approx([0.5, 4.0, 23 / 3])
    assert downsample(xs, ys, 100) == ([0, 1, 3, 4, 5, 6, 8, 9], [0.0, 1.0, 3.0, 4.0, 5.0, 6.0, 8.0, 9.0])
    assert bucket_means([1.0, 3.0, 5.0, 7.0], 2) == pytest.approx([2.0, 6.0])
