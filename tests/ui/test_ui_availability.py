"""The rules for which dashboard keys act now (rltui.ui.availability)."""

from __future__ import annotations

import pytest

from rltui.session import SessionState
from rltui.ui.availability import applies, unavailable_reason


def test_quit_is_for_an_owned_run_detach_and_stop_for_an_attached_one():
    assert applies("app.quit", attached=False) and not applies("quit", attached=True)
    assert applies("detach", attached=True) and not applies("app.detach", attached=False)
    assert not applies("stop_run", attached=False) and applies("pause", attached=True)


@pytest.mark.parametrize(
    "action, state, pending, quitting, reason",
    [
        ("pause", SessionState.RUNNING, None, False, None),
        ("edit_hparams", SessionState.PAUSED, None, False, None),
        ("rollback", SessionState.PAUSED, None, False, None),
        ("rollback", SessionState.RUNNING, None, False, "Pause first"),
        ("rollback", SessionState.RUNNING, "pausing", False, "Pausing"),
        ("save_checkpoint", SessionState.FINISHED, None, False, "has ended"),
        ("edit_hparams", SessionState.ERROR, None, False, "error"),
        ("pause", SessionState.RUNNING, "stopping", False, "stopping"),
        ("resume", SessionState.PAUSED, None, True, "stopping"),
    ],
)
def test_why_an_action_cannot_act_now(action, state, pending, quitting, reason):
    said = unavailable_reason(action, state=state, pending=pending, quitting=quitting)
    assert said is None if reason is None else reason in said
