"""The mean over seeds: each seed's latest finished episode carried forward, the mean over
every seed that has one (rltui.session.latest_episodes), as the session records it."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from test_session import TIMEOUT, FakeBackend, make_session

from rltui.session.backend import seed_row
from rltui.session.latest_episodes import LatestEpisodes
from trainers.metrics_spec import TRAINER_METRICS

# Three seeds, the third slow: it finishes an episode only in updates 1 and 4 (a long, poor
# episode); the others finish one every update. A mean over the seeds that finished one in
# the update swings between the fast seeds' level and the slow seed's.
NAN = math.nan
RETURNS = (
    (-100.0, -110.0, -250.0),
    (-100.0, -110.0, NAN),
    (-98.0, -108.0, NAN),
    (-96.0, -106.0, -240.0),
    (NAN, -104.0, NAN),
)


def backend_rows(returns=RETURNS) -> list[dict]:
    rows = []
    for values in returns:
        per_seed = {name: np.full(3, 0.5) for name in TRAINER_METRICS}
        per_seed["episode_return"] = np.asarray(values)
        per_seed["episode_length"] = np.where(np.isfinite(values), -np.asarray(values), NAN)
        rows.append(seed_row(per_seed))
    return rows


def test_each_seed_carries_its_latest_return_and_the_mean_is_over_all_of_them():
    carry = LatestEpisodes()
    rows = [carry.carry(row, update) for update, row in enumerate(backend_rows(), start=1)]
    means = [row["episode_return"] for row in rows]
    assert means == pytest.approx([-460 / 3, -460 / 3, -456 / 3, -442 / 3, -440 / 3])
    assert max(abs(a - b) for a, b in zip(means, means[1:])) < 10  # no swing to the slow seed and back
    assert rows[4]["per_seed"]["episode_return"] == (-96.0, -104.0, -240.0)
    assert rows[2]["episode_length"] == pytest.approx((98 + 108 + 250) / 3)
    assert rows[0]["episodes"] == backend_rows()[0]["episodes"]  # counts are the update's own
    assert rows[1]["policy_loss"] == 0.5


def test_the_mean_is_nan_only_before_any_seed_has_finished_an_episode():
    carry = LatestEpisodes()
    returns = ((NAN, NAN, NAN), (NAN, 5.0, NAN), (NAN, NAN, NAN))
    rows = [carry.carry(row, update) for update, row in enumerate(backend_rows(returns), start=1)]
    assert math.isnan(rows[0]["episode_return"])
    assert rows[1]["episode_return"] == rows[2]["episode_return"] == 5.0  # over the one seed that has one
    assert math.isnan(rows[2]["per_seed"]["episode_return"][0])


def test_a_rollback_forgets_what_the_undone_updates_carried_and_a_resume_starts_from_its_record():
    carry = LatestEpisodes()
    rows = backend_rows()
    for update, row in enumerate(rows[:3], start=1):
        carry.carry(row, update)
    after = carry.carry(rows[4], 2)  # back to update 1: updates 2 and 3 are undone
    assert after["per_seed"]["episode_return"][1] == -104.0 and math.isnan(after["per_seed"]["episode_return"][0])
    resumed = LatestEpisodes()
    resumed.resume_from({"episode_return": (1.0, 2.0, 3.0)}, update=7)
    assert resumed.carry(rows[4], 8)["per_seed"]["episode_return"] == (1.0, -104.0, 3.0)


def test_one_agent_is_recorded_as_it_is():
    row = {"episode_return": NAN, "policy_loss": 0.5}
    assert math.isnan(LatestEpisodes().carry(row, 1)["episode_return"])


class SeedsBackend(FakeBackend):
    """Three seeds whose returns are `RETURNS`, one row per update."""

    def run_chunk(self, num_updates, hparams):
        start = len(self.seen)
        self.seen.extend([hparams] * num_updates)
        return backend_rows(RETURNS[start:start + num_updates])


def test_the_session_records_the_carried_mean_in_snapshots_and_metrics_jsonl():
    backend = SeedsBackend(max_chunk_updates=2)
    session, rec = make_session(backend, total_updates=len(RETURNS), chunk_seconds=1e-9)
    session.start()
    assert session.join(TIMEOUT)
    records = rec.records
    assert [r.get("episode_return") for r in records] == pytest.approx(
        [-460 / 3, -460 / 3, -456 / 3, -442 / 3, -440 / 3])
    written = json.loads(json.dumps(records[4].to_json()))  # a line of metrics.jsonl
    assert written["seeds"]["episode_return"] == [-96.0, -104.0, -240.0]
    assert written["episode_return"] == pytest.approx(-440 / 3)
    snapshot = rec.snapshots[-1]
    # The chart's band spans every seed in every update; the mean is the records'.
    low, high = snapshot.curves.seed_band()
    assert list(high[np.isfinite(high)]) == [-100.0, -100.0, -98.0, -96.0, -96.0]
    assert list(low[np.isfinite(low)]) == [-250.0, -250.0, -250.0, -240.0, -240.0]


def test_a_populations_members_are_means_of_their_seeds_carried_values():
    from rltui.session.population import Population
    from trainers.hparams import DynamicHParams

    population = Population(DynamicHParams.create(), [{"lr": 1e-3}, {"lr": 3e-3}], num_seeds=2)
    carry = LatestEpisodes()
    member_returns = []
    for update, values in enumerate(((1.0, 3.0, 10.0, NAN), (NAN, 5.0, NAN, 20.0), (NAN, NAN, NAN, NAN)), start=1):
        per_seed = {name: np.full(4, 0.5) for name in TRAINER_METRICS}
        per_seed["episode_return"] = np.asarray(values)
        shaped = population.shape_row(carry.carry(seed_row(per_seed), update))
        member_returns.append(shaped["per_member"]["episode_return"])
        assert shaped["episode_return"] == pytest.approx(np.nanmean(shaped["per_seed"]["episode_return"]))
    assert member_returns == [(2.0, 10.0), (3.0, 15.0), (3.0, 15.0)]
