"""The watch for action values beyond what the rewards allow (`session.value_bound`): per
agent, against the largest reward each has seen, warning again only after settling."""

import math

import numpy as np

from rltui.session.value_bound import ValueBoundWatch


def first(watch, *args):
    """The first warning `watch.check(*args)` gives, or None."""
    warnings = watch.check(*args)
    return warnings[0] if warnings else None


def rows(*q_and_r):
    return [{"q_mean": q, "reward_max": r} for q, r in q_and_r]


def test_the_bound_is_the_largest_reward_seen_so_far_over_one_minus_gamma():
    watch = ValueBoundWatch("dqn")
    # Rewards 1 then 0 (a sparse update): the bound stays 1 / (1 - 0.9) = 10, passed at 2x.
    assert first(watch, rows((15.0, 1.0), (19.0, 0.0)), 1, 0.9) is None
    warning = first(watch, rows((21.0, 0.0)), 3, 0.9)
    assert warning.update == 3 and "mean Q 21 at update 3 is more than 2x the ±10 " in warning.message


def test_no_reward_seen_yet_means_no_bound_and_gamma_one_none_either():
    assert first(ValueBoundWatch("pqn"), rows((5.0, 0.0), (1e6, math.nan)), 1, 0.99) is None
    assert first(ValueBoundWatch("pqn"), rows((1e9, 1.0)), 1, 1.0) is None


def test_a_warning_comes_again_only_after_every_agent_is_back_within_the_bound():
    watch = ValueBoundWatch("dqn")
    assert first(watch, rows((30.0, 1.0)), 1, 0.9) is not None
    assert first(watch, rows((25.0, 1.0), (15.0, 1.0)), 2, 0.9) is None  # still past the bound itself
    assert first(watch, rows((9.0, 1.0)), 4, 0.9) is None  # settled: armed again
    assert first(watch, rows((40.0, 1.0)), 5, 0.9).update == 5


def test_several_agents_are_watched_each_against_its_own_rewards():
    watch = ValueBoundWatch("dqn")
    row = {"q_mean": 5.5, "reward_max": 5.5,
           "per_seed": {"q_mean": (1.0, 30.0), "reward_max": (10.0, 1.0)}}
    warning = first(watch, [row], 7, 0.9)
    assert warning is not None and "for seed 1: mean Q 30 at update 7" in warning.message
    # A population's agents are named by member (and seed).
    members = ValueBoundWatch("dqn", seeds_per_member=2)
    row = {"per_seed": {"q_mean": (1.0, 1.0, 1.0, 30.0), "reward_max": (1.0,) * 4}}
    assert "for member 1 (seed 1): mean Q 30 " in first(members, [row], 7, 0.9).message


def test_an_agent_stuck_past_the_bound_does_not_silence_the_others():
    # Seed 0 diverges and stays there (or is frozen with a NaN Q); seed 1 goes past later.
    watch = ValueBoundWatch("dqn")

    def row(q0, q1):
        return {"per_seed": {"q_mean": (q0, q1), "reward_max": (1.0, 1.0)}}

    assert "for seed 0:" in first(watch, [row(30.0, 5.0)], 1, 0.9).message
    assert first(watch, [row(math.nan, 5.0), row(40.0, 9.0)], 2, 0.9) is None
    warning = first(watch, [row(50.0, 25.0)], 4, 0.9)
    assert warning.update == 4 and "for seed 1:" in warning.message


def test_a_gamma_of_one_passes_a_chunk_over_without_ending_the_watch():
    watch = ValueBoundWatch("dqn")
    assert first(watch, rows((1e6, 1.0)), 1, 1.0) is None
    assert first(watch, rows((30.0, 1.0)), 2, 0.9).update == 2


def test_a_resume_counts_the_rewards_seen_before_its_checkpoint():
    # Before the checkpoint the run met a reward of 10; after it, only 0.1 so far. Values
    # learned from the 10 (bound 100) are no warning; past 200 they are.
    watch = ValueBoundWatch("dqn")
    watch.resume_from([0.1, math.nan, 10.0, 0.1])
    assert first(watch, rows((150.0, 0.1)), 11, 0.9) is None
    assert "±100 " in first(watch, rows((250.0, 0.1)), 12, 0.9).message


def plain_warnings(chunks, gamma, margin=2.0):
    """The watch's rule one update at a time, one agent: the updates whose warning a chunk
    reports (the first warning within each chunk)."""
    seen, warned, reported = math.nan, False, []
    for start, chunk in chunks:
        found = None
        for offset, (q, r) in enumerate(chunk):
            seen = r if math.isnan(seen) else max(seen, r) if not math.isnan(r) else seen
            bound = seen / (1 - gamma)
            over = math.isfinite(q) and bound > 0 and abs(q) > margin * bound
            if over:
                if not warned and found is None:
                    found = start + offset
                warned = True
            elif abs(q) <= bound:
                warned = False
        reported.append(found)
    return reported


def test_a_chunk_at_once_warns_where_the_rule_applied_update_by_update_would():
    rng = np.random.default_rng(0)
    for _ in range(200):
        updates = int(rng.integers(1, 40))
        q = rng.choice([5.0, 15.0, 25.0, math.nan, -30.0], size=updates)
        r = rng.choice([1.0, 0.0, math.nan, 0.5], size=updates)
        cuts = sorted(set(rng.integers(0, updates, size=3).tolist()) | {0, updates})
        chunks = [(cuts[i] + 1, list(zip(q[cuts[i]:cuts[i + 1]], r[cuts[i]:cuts[i + 1]])))
                  for i in range(len(cuts) - 1) if cuts[i] < cuts[i + 1]]
        watch = ValueBoundWatch("dqn")
        got = []
        for start, chunk in chunks:
            warning = first(watch, rows(*chunk), start, 0.9)
            got.append(None if warning is None else warning.update)
        assert got == plain_warnings(chunks, 0.9), (q, r, cuts)


def test_a_lower_gamma_edited_in_keeps_the_bound_of_the_largest_the_run_trained_with():
    # Values learned at 0.99 (bound 100 for rewards of 1) do not warn when gamma is edited
    # down to 0.9 (bound 10); past twice 0.99's bound they still do.
    watch = ValueBoundWatch("pqn")
    assert first(watch, rows((90.0, 1.0)), 1, 0.99) is None
    assert first(watch, rows((90.0, 1.0)), 2, 0.9) is None
    assert first(watch, rows((250.0, 1.0)), 3, 0.9).update == 3


def test_agents_past_the_bound_in_one_chunk_each_get_their_warning():
    watch = ValueBoundWatch("dqn", seeds_per_member=1)
    chunk = [{"per_seed": {"q_mean": (5.0, 5.0, 1.0), "reward_max": (1.0,) * 3}},
             {"per_seed": {"q_mean": (5.0, 25.0, 1.0), "reward_max": (1.0,) * 3}},
             {"per_seed": {"q_mean": (30.0, 50.0, 1.0), "reward_max": (1.0,) * 3}}]
    warnings = watch.check(chunk, 10, 0.9)
    assert [(w.update, w.message.split(":")[0]) for w in warnings] == [
        (11, "Q values diverging for member 1"), (12, "Q values diverging for member 0")]
