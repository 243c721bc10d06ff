"""The whole run's curves: a bounded multi-resolution buffer (rltui.session.history) that
keeps every bucket's minimum, maximum and mean, on every client, after a resume and after a
rollback."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from rltui.control.remote import RemoteSession
from rltui.session.history import CAPACITY, CurveBuffer, Curves
from rltui.session.metrics import MetricsStore, load_run_history
from trainers.metrics_spec import METRIC_NAMES

from control_client import served, wait_for
from fakes import FakeSession


def feed(buffer: CurveBuffer, start: int, count: int, chunk: int = 50_000, spike_at: int | None = None) -> None:
    """`count` updates from `start + 1` on, in chunks as a session sends them."""
    for first in range(start, start + count, chunk):
        updates = np.arange(first + 1, min(first + chunk, start + count) + 1)
        values = np.sin(updates[:, None] / 100.0) + np.zeros((1, len(buffer.columns)))
        if spike_at is not None and updates[0] <= spike_at <= updates[-1]:
            values[spike_at - updates[0], 0] = 1e6
        buffer.extend(updates, updates * 512.0, updates * 0.01, values)


def test_the_buffer_s_memory_is_bounded_whatever_the_run_s_length():
    buffer = CurveBuffer(METRIC_NAMES)
    feed(buffer, 0, 20_000)
    per_bucket = buffer.nbytes / len(buffer)
    feed(buffer, 20_000, 2_000_000)
    # A hundred times the updates: buckets only grow wider, never more than the capacity.
    assert len(buffer) <= CAPACITY
    assert buffer.nbytes <= CAPACITY * per_bucket
    assert buffer.nbytes < 1 << 20  # under a MiB for every metric of a run of any length
    assert buffer.curves().updates == 2_020_000


def test_a_spike_far_back_survives_downsampling():
    buffer = CurveBuffer(METRIC_NAMES)
    feed(buffer, 0, 1_000_000, spike_at=3)
    curves = buffer.curves()
    assert curves.state["update_first"][0] == 1
    assert curves.extremes(METRIC_NAMES[0]).high == pytest.approx(1e6)
    assert np.nanmax(curves.rebin(40).series(METRIC_NAMES[0]).hi) == pytest.approx(1e6)
    # The mean is a mean: the spike is diluted there, not lost from the band.
    assert np.nanmax(curves.rebin(40).series(METRIC_NAMES[0]).mean) < 1e5


def test_the_curves_round_trip_through_the_protocol():
    buffer = CurveBuffer(("a", "b"), 8)
    buffer.extend([1, 2, 3], [10, 20, 30], [0.1, 0.2, 0.3], [[1.0, math.nan], [2.0, math.nan], [-5.0, math.nan]])
    curves = buffer.curves()
    again = Curves.from_json(json.loads(json.dumps(curves.to_json())))
    assert again.extremes("a") == (-5.0, 2.0) and again.extremes("b") is None
    assert again.updates == 3 and again.latest_finite("a") == -5.0


def test_a_rollback_keeps_the_history_before_the_checkpoint():
    fake = FakeSession(total_updates=10_000)
    fake.advance(3000, overrides={1: {"episode_return": -487.0}})
    fake.rollback_to(2500)
    curves = fake.advance(10).curves
    assert curves.state["update_first"][0] == 1
    assert curves.extremes("episode_return").low == pytest.approx(-487.0)
    assert curves.updates == 2510 and curves.last_update == 2510
    assert not np.any((curves.state["update_first"] > 2500) & (curves.state["update_first"] <= 2500))


def test_a_client_attaching_after_20k_updates_is_sent_the_whole_run(tmp_path):
    with served(tmp_path) as (fake, _):
        fake.total_updates = 30_000
        fake.on_thread(fake.advance, 20_000, {1: {"episode_return": -487.0}})
        remote = RemoteSession.connect(tmp_path)
        wait_for(lambda: remote._latest is not None and remote._latest.update == 20_000)
        curves = remote._latest.curves
        assert curves.state["update_first"][0] == 1 and curves.updates == 20_000
        assert curves.extremes("episode_return").low == pytest.approx(-487.0)
        fake.on_thread(fake.advance, 5)  # records after attaching extend it, once each
        # (the records owed come in pieces, each with the latest head: wait for the last)
        wait_for(lambda: remote._latest.curves.last_update == 20_005)
        assert remote._latest.curves.updates == 20_005
        remote.close()


def test_a_resume_loads_the_history_before_the_checkpoint(tmp_path):
    fake = FakeSession(total_updates=10_000)
    records = fake.advance(5000, overrides={1: {"episode_return": -487.0}}).new_records
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(r.to_json()) + "\n" for r in records) + '{"update": 50')  # cut short
    store = MetricsStore()
    assert load_run_history(store, path) == 5000
    curves = store.curves()
    assert curves.state["update_first"][0] == 1 and curves.last_update == 5000
    assert curves.extremes("episode_return").low == pytest.approx(-487.0)
    assert load_run_history(MetricsStore(), tmp_path / "missing.jsonl") == 0
