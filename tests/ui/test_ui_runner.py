"""What the dashboard prints when it closes (rltui.ui.runner): the same words as `--no-ui`."""

from __future__ import annotations

import dataclasses

from test_headless import TOTAL, snapshot

from rltui.session import SessionState
from rltui.ui.runner import _summary


def test_a_finished_run_is_summed_up_as_headless_does():
    last = dataclasses.replace(snapshot(TOTAL, sps=1000.0), state=SessionState.FINISHED)
    assert _summary(SessionState.FINISHED, last) == (
        "Finished after 100 updates (10,000 env steps), latest mean return 20.0."
    )


def test_several_seeds_are_summed_up_as_their_mean():
    last = snapshot(TOTAL, sps=1000.0, seed_returns=((10.0,), (30.0,)))
    assert _summary(SessionState.FINISHED, last).endswith("latest mean return 20.0 (mean of 2 seeds).")


def test_a_run_stopped_early_says_stopped():
    assert _summary(SessionState.FINISHED, snapshot(40, sps=1000.0)).startswith("Stopped after 40 updates (4,000 env")


def test_a_run_left_running_says_where_it_is():
    # Detached from an attached run, which goes on; or an error.
    assert _summary(SessionState.RUNNING, snapshot(40, sps=1000.0)) == "At update 40 (4,000 env steps)."
