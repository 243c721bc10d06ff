"""What the dashboard prints when it closes (rltui.ui.runner): the same words as `--no-ui`,
how to go on included."""

from __future__ import annotations

import dataclasses

from test_headless import TOTAL, snapshot
from test_ui import until
from textual.app import App

from rltui.config import RunConfig
from rltui.session import SessionState
from rltui.ui.runner import DashboardApp, _summary, run_dashboard

from fakes import FakeSession, fixed_device_stats


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


# --- run_dashboard's last words, from a dashboard driven to its end ---------------------------


def _run_dashboard_driven(monkeypatch, session, run_dir, drive) -> int:
    """run_dashboard, its app run headless with `drive(app, pilot)` at the keys."""

    def run(app, **kwargs):
        async def auto_pilot(pilot):
            await until(pilot, lambda: session.started)
            await drive(app, pilot)

        return App.run(app, headless=True, size=(100, 30), auto_pilot=auto_pilot)

    monkeypatch.setattr(DashboardApp, "run", run)
    return run_dashboard(session, RunConfig(), run_dir, device_source=fixed_device_stats())


def test_quitting_the_dashboard_says_how_to_go_on_as_headless_does(tmp_path, monkeypatch, capsys):
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "checkpoint-000000010.msgpack").write_bytes(b"")  # the final one
    fake = FakeSession()

    async def stop_and_quit(app, pilot):
        fake.on_thread(fake.advance, 10)
        await until(pilot, lambda: app.latest is not None and app.latest.update == 10)
        await pilot.press("q", "y")

    assert _run_dashboard_driven(monkeypatch, fake, tmp_path, stop_and_quit) == 0
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("Stopped after 10 updates (5,120 env steps)")
    assert lines[1:] == [f"Run files: {tmp_path}", f"To go on: rltui launch --resume {tmp_path}"]


def test_a_run_quit_before_its_first_checkpoint_has_nothing_to_go_on_from(tmp_path, monkeypatch, capsys):
    fake = FakeSession()

    async def quit_at_once(app, pilot):
        await pilot.press("q", "y")

    assert _run_dashboard_driven(monkeypatch, fake, tmp_path, quit_at_once) == 0
    assert "To go on" not in capsys.readouterr().err


def test_a_finished_run_says_how_to_train_on(tmp_path, monkeypatch, capsys):
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "checkpoint-000000010.msgpack").write_bytes(b"")
    fake = FakeSession(total_updates=10)

    async def finish_and_quit(app, pilot):
        fake.on_thread(fake.advance, 10)
        fake.on_thread(fake.event, "finished", "finished 10 updates")
        fake.on_thread(fake.set_state, SessionState.FINISHED)
        await until(pilot, lambda: app.dashboard.status.state_text == "finished")
        await pilot.press("q")

    assert _run_dashboard_driven(monkeypatch, fake, tmp_path, finish_and_quit) == 0
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("Finished after 10 updates")
    assert lines[-1] == f"To train on: rltui launch --resume {tmp_path} --set total_timesteps={2 * 10 * 512}"


def test_a_run_on_an_env_object_offers_a_resume_from_python(tmp_path):
    # An env object handed to the Python API: `rltui launch --resume` could not build it.
    from rltui.ui.runner import _go_on

    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "checkpoint-000000010.msgpack").write_bytes(b"")
    last = snapshot(TOTAL, sps=1000.0)
    assert _go_on(SessionState.FINISHED, last, None, tmp_path, "CartPole-v1").startswith("To train on: ")
    assert _go_on(SessionState.FINISHED, last, None, tmp_path, "object:Bandit") == (
        f'To train on: rltui.train(env=<your env>, resume="{tmp_path}", total_timesteps={2 * last.env_steps})')
