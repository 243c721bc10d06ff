"""The dashboard, driven with Pilot against a fake session (tests/fakes.py), and once
end to end against the real trainer."""

from __future__ import annotations

import math
import os
import re
import stat
import time
from pathlib import Path

import pytest
from textual.events import Key

from rltui.config.build import RunConfig
from rltui.session import Pause, Resume, SaveCheckpoint, SessionState, SetHParams, Stop
from rltui.session.commands import Rollback
from rltui.ui.app import DashboardApp
from rltui.ui.runner import run_dashboard
from rltui.ui.screens import HelpScreen, HParamEditor, QuitConfirm, RollbackConfirm, StopRunConfirm
from rltui.ui.widgets import SPARKLINE_METRICS, MetricSparkline
from rltui.ui.widgets.chart import CHART_METRICS

from fakes import FakeSession, fixed_device_stats

TIMEOUT = 10.0


async def run_scenario(session, run_dir: Path, scenario, size=(100, 30), config=None, notifications=False,
                       **app_kwargs) -> DashboardApp:
    """`notifications`: draw them (toasts), as a terminal does; off, they are only listed."""
    app_kwargs.setdefault("device_source", fixed_device_stats())
    app_kwargs.setdefault("user_theme_dir", run_dir / "no-user-themes")
    app = DashboardApp(session, config or RunConfig(), run_dir, chart_interval=0, refresh_interval=0, **app_kwargs)

    async def main():
        async with app.run_test(size=size, notifications=notifications) as pilot:
            await until(pilot, lambda: session.started)
            await scenario(app, pilot)

    await main()
    return app


async def until(pilot, predicate, timeout: float = TIMEOUT) -> None:
    """Let the app process messages until `predicate()` holds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for the dashboard")
        await pilot.pause(0.01)


def status_text(app: DashboardApp) -> str:
    return app.dashboard.status.state_text


def footer_keys(app: DashboardApp) -> list[str]:
    """What the footer shows, dimmed or not (as it builds its keys)."""
    return [active.binding.description for active in app.dashboard.active_bindings.values() if active.binding.show]


def notes(app: DashboardApp) -> list[str]:
    return [str(n.message) for n in app._notifications]


def progress_text(app: DashboardApp) -> str:
    return str(app.dashboard.query_one("#progress").content)


async def test_widgets_show_the_session_values(tmp_path):
    fake = FakeSession()

    async def scenario(app, pilot):
        fake.on_thread(fake.advance, 42)
        fake.on_thread(fake.event, "warning", "something odd")
        await until(pilot, lambda: "update 42/1,000" in progress_text(app))
        assert "21.5k/512.0k steps" in progress_text(app)
        assert "51.2k SPS" in progress_text(app)
        assert status_text(app) == "running"
        info = str(app.dashboard.query_one("#run-info").content)
        assert "CartPole-v1" in info and "ppo" in info and "cpu:0" in info and tmp_path.name in info
        # update 40 has no finished episode (NaN): the current return is update 42's
        ret = app.dashboard.query_one("#spark-episode_return", MetricSparkline)
        assert ret.stats_text.startswith(f"{9 + 4.5 * 42 + 3 * math.sin(42):.3g} (")
        assert len(ret.query_one("Sparkline").data) == 42 - 8  # NaN every 5th update is left out
        assert "lr" in str(app.dashboard.query_one("#hp-dynamic").content)
        assert "2.5e-4" in str(app.dashboard.query_one("#hp-dynamic").content)
        assert "CartPole-v1" in str(app.dashboard.query_one("#hp-static").content)
        await until(pilot, lambda: app.dashboard.device_panel.stats is not None)
        devices = str(app.dashboard.query_one("#device-text").content)
        assert "Fake GPU" in devices and "93%" in devices and "812.0 MiB" in devices
        await until(pilot, lambda: "something odd" in app.dashboard.events_log.text)
        assert "[   42] warning" in app.dashboard.events_log.text

    await run_scenario(fake, tmp_path, scenario)


@pytest.mark.parametrize("actions", ["discrete", "continuous"])
async def test_static_panel_lists_only_the_keys_of_the_envs_actions(tmp_path, actions):
    fake = FakeSession()
    fake.actions = actions

    async def scenario(app, pilot):
        fake.on_thread(fake.advance, 3)
        await until(pilot, lambda: app.dashboard.hparams_panel.actions == actions)
        static = str(app.dashboard.query_one("#hp-static").content)
        assert "num_envs" in static
        assert ("log_std_init" in static) == (actions == "continuous"), static

    await run_scenario(fake, tmp_path, scenario)


async def test_the_events_log_keeps_following_after_another_screen_was_shown(tmp_path):
    # Events that come while the watch view (here any screen) covers the dashboard are laid
    # out when it comes back: the log still follows the newest.
    from textual.screen import Screen
    from textual.widgets import Static

    class Frames(Screen):  # redraws all the while, as the watch view does
        def compose(self):
            yield Static("frame 0")

        def on_mount(self):
            self.frame = 0
            self.set_interval(0.01, self.draw)

        def draw(self):
            self.frame += 1
            self.query_one(Static).update(f"frame {self.frame}")

    fake = FakeSession()

    async def scenario(app, pilot):
        log = app.dashboard.events_log
        await app.push_screen(Frames())
        for i in range(60):
            fake.on_thread(fake.event, "checkpoint", f"saved number {i}")
            await pilot.pause(0.02)  # frames drawn between events
        await until(pilot, lambda: "saved number 59" in log.text)
        app.pop_screen()
        await until(pilot, lambda: log.max_scroll_y > 0)  # laid out again, the 60 lines overflow it
        await pilot.pause()
        fake.on_thread(fake.event, "checkpoint", "saved after the view closed")
        await until(pilot, lambda: "after the view closed" in log.text)
        await pilot.pause()
        await pilot.pause()
        assert log.max_scroll_y > 0 and log.is_vertical_scroll_end, (log.scroll_y, log.max_scroll_y)
        # Scrolled up by the user, it stays where they put it; back at the end, it follows again.
        log.action_page_up()
        await pilot.wait_for_scheduled_animations()  # the page scroll is animated
        where = log.scroll_y
        fake.on_thread(fake.event, "checkpoint", "saved while reading back")
        await until(pilot, lambda: "reading back" in log.text)
        await pilot.pause()
        assert log.scroll_y == pytest.approx(where, abs=0.5) and log.scroll_y < log.max_scroll_y - 5
        log.action_scroll_end()
        fake.on_thread(fake.event, "checkpoint", "saved once back at the end")
        await until(pilot, lambda: "back at the end" in log.text)
        await pilot.pause()
        await pilot.pause()
        assert log.is_vertical_scroll_end

    await run_scenario(fake, tmp_path, scenario)


@pytest.mark.parametrize("kind, message, shown", [
    ("compiled", "compiled in 3.8 s", "[    7] compiled  in 3.8 s"),
    ("rolled back", "rolled back from update 9", "[    7] rolled back from update 9"),
    ("paused", "Paused at update 7", "[    7] paused    at update 7"),
    ("checkpoint", "saved ckpt-000007 (manual)", "[    7] checkpoint saved ckpt-000007 (manual)"),
    ("finished", "finished", "[    7] finished  finished"),  # nothing else to say: kept
    ("error", "errors: [boom]", "[    7] error     errors: [boom]"),
])
def test_events_log_does_not_repeat_the_kind(kind, message, shown):
    from rltui.session import SessionEvent
    from rltui.ui.widgets.events import format_event

    assert format_event(SessionEvent(kind=kind, update=7, message=message, wall_time=0.0)).plain == shown


async def test_pause_shows_pausing_until_the_session_confirms(tmp_path):
    fake = FakeSession()

    async def scenario(app, pilot):
        await until(pilot, lambda: app.session_state is SessionState.RUNNING)
        fake.hold_chunk()
        await pilot.press("p")
        assert fake.commands_of(Pause) == [Pause()]
        assert status_text(app) == "pausing..."
        # the chunk is still in flight: a later event is drawn, and the pause still waits
        fake.on_thread(fake.event, "checkpoint", "saved while pausing")
        await until(pilot, lambda: "saved while pausing" in app.dashboard.events_log.text)
        assert status_text(app) == "pausing..."
        fake.release_chunk()
        await until(pilot, lambda: status_text(app) == "paused")
        await pilot.press("space")
        assert fake.commands_of(Resume) == [Resume()]
        await until(pilot, lambda: status_text(app) == "running")
        assert "paused    at update 0" in app.dashboard.events_log.text

    await run_scenario(fake, tmp_path, scenario)


async def test_valid_edit_is_submitted_logged_and_marked_on_the_chart(tmp_path):
    fake = FakeSession()

    async def scenario(app, pilot):
        fake.on_thread(fake.advance, 10)
        await pilot.press("e")
        assert isinstance(app.screen, HParamEditor)
        await pilot.press("down", "0", ".", "9", "8", "enter")  # gamma
        assert not isinstance(app.screen, HParamEditor)
        assert fake.commands_of(SetHParams) == [SetHParams({"gamma": 0.98})]
        await until(pilot, lambda: "set gamma 0.99 -> 0.98" in app.dashboard.events_log.text)
        assert app.dashboard.chart.edit_steps == [10 * RunConfig().steps_per_update]
        assert app.pending_edits == {}
        assert fake.hparams.gamma == pytest.approx(0.98)

    await run_scenario(fake, tmp_path, scenario)


async def test_an_edit_applied_while_paused_shows_at_once(tmp_path):
    """No snapshot comes while paused: the panel must not wait for one."""
    fake = FakeSession()

    async def scenario(app, pilot):
        fake.on_thread(fake.advance, 3)
        await pilot.press("p")
        await until(pilot, lambda: app.session_state is SessionState.PAUSED)
        await pilot.press("e", "1", "e", "-", "3", "enter")
        await until(pilot, lambda: "set lr" in app.dashboard.events_log.text)
        shown = str(app.dashboard.query_one("#hp-dynamic").content)
        assert shown.splitlines()[0].split() == ["lr", "0.001", "(start)"], shown  # annealed from it

    await run_scenario(fake, tmp_path, scenario)


async def test_invalid_edit_is_refused_in_the_editor(tmp_path):
    fake = FakeSession()

    async def scenario(app, pilot):
        await pilot.press("e", "minus", "1", "enter")
        editor = app.screen
        assert isinstance(editor, HParamEditor)
        assert editor.error_text == "lr: expected a number > 0, got -1.0"
        await pilot.press("ctrl+a", "ctrl+k", "a", "b", "c", "enter")
        assert "not a number" in editor.error_text
        await pilot.press("ctrl+a", "ctrl+k", "n", "a", "n", "enter")
        assert "lr: expected" in editor.error_text
        await pilot.press("escape")
        assert not isinstance(app.screen, HParamEditor)
        assert fake.commands_of(SetHParams) == []

    await run_scenario(fake, tmp_path, scenario)


async def test_moving_to_another_field_clears_the_refused_value(tmp_path):
    """Text typed for lr (and refused) must not become the start of gamma's value."""
    fake = FakeSession()

    async def scenario(app, pilot):
        await pilot.press("e", "minus", "1", "e", "minus", "4", "enter")
        editor = app.screen
        assert editor.error_text.startswith("lr: expected")
        await pilot.press("down")
        assert editor.field == "gamma"
        assert editor.query_one("#editor-value").value == "" and editor.error_text == ""
        await pilot.press("0", ".", "9", "enter")
        assert fake.commands_of(SetHParams) == [SetHParams({"gamma": 0.9})]

    await run_scenario(fake, tmp_path, scenario)


async def test_switches_show_as_true_or_false_in_line_with_the_rest(tmp_path):
    # As rltui info and config.toml write them, not 1 and 0; and the editor's long name
    # (bootstrap_truncated) does not push its value out of the column.
    fake = FakeSession()

    async def scenario(app, pilot):
        await until(pilot, lambda: app.session_state is SessionState.RUNNING)
        panel = str(app.dashboard.query_one("#hp-dynamic").content).splitlines()
        assert re.search(r"^bootstrap_truncated +true$", "\n".join(panel), re.M), panel
        await pilot.press("e")
        editor = app.screen
        rows = [str(editor.query_one("#editor-fields").get_option_at_index(i).prompt)
                for i in range(len(editor.fields))]
        assert len({row.index(row.split()[1], len(row.split()[0])) for row in rows}) == 1, rows
        assert "bootstrap_truncated true" in [" ".join(row.split()) for row in rows]
        await pilot.press(*["down"] * editor.fields.index("bootstrap_truncated"))
        assert str(editor.query_one("#editor-rule").content) == "bootstrap_truncated: true or false (now true)"
        await pilot.press(*"maybe", "enter")  # a switch's refusal says what it takes, whole
        assert editor.error_text == "bootstrap_truncated: 'maybe': expected true or false"
        await pilot.pause()
        error = editor.query_one("#editor-error")
        assert error.size.width >= len(editor.error_text) or error.size.height > 1
        await pilot.press("ctrl+a", "ctrl+k", *"false", "enter")
        assert fake.commands_of(SetHParams) == [SetHParams({"bootstrap_truncated": 0.0})]
        assert notes(app)[-1] == "bootstrap_truncated → false at the next chunk boundary"
        await until(pilot, lambda: "bootstrap_truncated" in app.dashboard.events_log.text)
        shown = str(app.dashboard.query_one("#hp-dynamic").content)
        assert re.search(r"^bootstrap_truncated +false$", shown, re.M), shown

    await run_scenario(fake, tmp_path, scenario)


async def test_editor_opens_on_the_first_field_every_time(tmp_path):
    """Users count their down presses from lr, whatever they edited last."""
    fake = FakeSession()

    async def scenario(app, pilot):
        await pilot.press("e", "down", "0", ".", "9", "8", "enter")  # gamma
        await pilot.press("e")
        editor = app.screen
        assert editor.field == "lr" and editor.query_one("#editor-fields").highlighted == 0
        assert editor.query_one("#editor-value").value == ""
        await pilot.press("down", "0", ".", "9", "5", "enter")  # gamma again
        assert fake.commands_of(SetHParams) == [SetHParams({"gamma": 0.98}), SetHParams({"gamma": 0.95})]

    await run_scenario(fake, tmp_path, scenario)


async def test_save_checkpoint_submits_and_logs_the_answer(tmp_path):
    fake = FakeSession()

    async def scenario(app, pilot):
        await pilot.press("s")
        assert fake.commands_of(SaveCheckpoint) == [SaveCheckpoint()]
        await until(pilot, lambda: "checkpoint saved at update 0" in app.dashboard.events_log.text)

    await run_scenario(fake, tmp_path, scenario)


async def test_rollback_only_while_paused(tmp_path):
    fake = FakeSession()

    async def scenario(app, pilot):
        await until(pilot, lambda: app.session_state is SessionState.RUNNING)
        await until(pilot, lambda: "Pause" in footer_keys(app))
        assert "Rollback" not in footer_keys(app)
        await pilot.press("r")  # running: nothing is rolled back, and the key says why
        assert fake.commands_of(Rollback) == []
        assert notes(app) == ["Pause first (p): rolling back discards the updates since the last checkpoint."]
        await pilot.press("p")
        await until(pilot, lambda: app.session_state is SessionState.PAUSED)
        await until(pilot, lambda: "Rollback" in footer_keys(app))
        await pilot.press("r")  # it asks first: the updates since the checkpoint are undone
        assert isinstance(app.screen, RollbackConfirm) and fake.commands_of(Rollback) == []
        assert "The updates since it are undone" in str(app.screen.query_one("#quit-question").content)
        await pilot.press("n")  # kept paused, nothing sent
        assert not isinstance(app.screen, RollbackConfirm) and fake.commands_of(Rollback) == []
        await pilot.press("r", "y")
        assert fake.commands_of(Rollback) == [Rollback()]
        # a request: the session says whether there was a checkpoint to roll back to
        assert notes(app)[-1] == "Rollback requested: to the latest checkpoint (hyperparameters are kept)."
        await until(pilot, lambda: "rolled back from update 0" in app.dashboard.events_log.text)

    await run_scenario(fake, tmp_path, scenario)


async def test_keys_of_an_ended_run_are_hidden_and_say_why(tmp_path):
    fake = FakeSession()

    async def scenario(app, pilot):
        await until(pilot, lambda: "Edit" in footer_keys(app))
        assert {"Pause", "Edit", "Save"} <= set(footer_keys(app))
        fake.on_thread(fake.set_state, SessionState.FINISHED)
        await until(pilot, lambda: app.session_state is SessionState.FINISHED)
        await until(pilot, lambda: "Edit" not in footer_keys(app))
        assert not {"Pause", "Resume", "Edit", "Save", "Rollback"} & set(footer_keys(app))
        assert "Quit" in footer_keys(app)
        app.clear_notifications()
        await pilot.press("e", "s", "p", "r")
        assert fake.commands == [] and not isinstance(app.screen, HParamEditor)
        assert notes(app) == ["The run has ended."] * 4

    await run_scenario(fake, tmp_path, scenario)


async def test_stop_run_of_an_ended_attached_run_says_why(tmp_path):
    class AttachedSession(FakeSession):
        outlives_client = True  # like rltui attach: the run goes on without the dashboard

    fake = AttachedSession()

    async def scenario(app, pilot):
        fake.on_thread(fake.set_state, SessionState.FINISHED)
        await until(pilot, lambda: app.session_state is SessionState.FINISHED)
        await pilot.press("k")
        assert not isinstance(app.screen, StopRunConfirm) and fake.commands == []
        assert notes(app)[-1] == "The run has ended."

    await run_scenario(fake, tmp_path, scenario)


async def test_divergence_alerts_and_offers_rollback(tmp_path):
    fake = FakeSession()

    async def scenario(app, pilot):
        await until(pilot, lambda: app.session_state is SessionState.RUNNING)
        fake.on_thread(fake.event, "nonfinite", "non-finite loss or gradient: training paused")
        fake.on_thread(fake.set_state, SessionState.PAUSED, "non-finite loss or gradient")
        await until(pilot, lambda: any("roll back" in str(n.message) for n in app._notifications))
        await pilot.press("r", "y")
        assert fake.commands_of(Rollback) == [Rollback()]

    await run_scenario(fake, tmp_path, scenario)


async def test_messages_before_the_dashboard_is_ready_are_kept(tmp_path):
    """A session that is already running can report before the widgets exist."""
    fake = FakeSession()
    fake.start()
    app = DashboardApp(fake, RunConfig(), tmp_path, device_source=fixed_device_stats(), refresh_interval=0,
                       user_theme_dir=tmp_path)
    fake.on_thread(fake.advance, 5)
    fake.on_thread(fake.event, "warning", "early bird")

    async def main():
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda: "early bird" in app.dashboard.events_log.text)
            await until(pilot, lambda: "update 5/" in progress_text(app))

    await main()


async def test_nan_and_inf_metrics_do_not_crash(tmp_path):
    fake = FakeSession()
    bad = {name: value for name, value in zip(
        ("episode_return", "policy_loss", "value_loss", "entropy", "approx_kl", "lr", "grad_norm"),
        (math.nan, math.inf, -math.inf, math.nan, math.inf, math.nan, math.nan),
    )}

    async def scenario(app, pilot):
        # first only non-finite values, then a mix
        fake.on_thread(fake.advance, 3, {1: bad, 2: bad, 3: bad})
        await until(pilot, lambda: "update 3/" in progress_text(app))
        loss = app.dashboard.query_one("#spark-policy_loss", MetricSparkline)
        assert loss.stats_text == "inf" and loss.query_one(".metric-stats").has_class("-nonfinite")
        fake.on_thread(fake.advance, 20, {23: bad})
        await until(pilot, lambda: "update 23/" in progress_text(app))
        assert loss.stats_text.startswith("inf (")
        for metric in ("episode_return", "policy_loss", "value_loss", "entropy", "approx_kl", "lr"):
            spark = app.dashboard.query_one(f"#spark-{metric}", MetricSparkline)
            assert all(math.isfinite(v) for v in spark.query_one("Sparkline").data)
        for _ in range(12):  # every chart metric, some all-NaN for a while
            await pilot.press("c")
        await pilot.pause()
        assert app.return_code is None  # still running: nothing crashed

    await run_scenario(fake, tmp_path, scenario, size=(160, 48))


async def test_quit_asks_while_training_and_stops_cleanly_mid_chunk(tmp_path):
    fake = FakeSession()

    async def scenario(app, pilot):
        await until(pilot, lambda: app.session_state is SessionState.RUNNING)
        await pilot.press("q")
        assert isinstance(app.screen, QuitConfirm)
        await pilot.press("n")
        assert not isinstance(app.screen, QuitConfirm)
        assert fake.commands_of(Stop) == []
        fake.hold_chunk()  # the session is in the middle of a chunk
        await pilot.press("q", "y")
        assert fake.commands_of(Stop) == [Stop()]
        assert status_text(app) == "stopping..." and app.return_code is None
        await pilot.press("p", "e")  # nothing more reaches a stopping session
        assert fake.commands == [Stop()] and not isinstance(app.screen, HParamEditor)
        fake.release_chunk()  # the chunk ends, the session stops, the app exits
        await until(pilot, lambda: app.return_code == 0)

    # The app exits as the chunk ends (`until` above bounds it), not after some timeout of its own.
    await run_scenario(fake, tmp_path, scenario)
    assert fake.join(TIMEOUT) and fake.state is SessionState.FINISHED


async def test_quit_question_says_what_training_is_doing(tmp_path):
    fake = FakeSession()

    def question(app) -> str:
        return str(app.screen.query_one("#quit-question").content)

    async def scenario(app, pilot):
        await until(pilot, lambda: app.session_state is SessionState.RUNNING)
        await pilot.press("q")
        assert question(app) == "Training is running. Stop it and quit?"
        await pilot.press("n", "p")
        await until(pilot, lambda: status_text(app) == "paused")
        await pilot.press("q")
        assert question(app) == "Training is paused. Stop it and quit?"
        assert str(app.screen.query_one("#quit-detail").content) == "Run files are kept."
        await pilot.press("n")
        fake.on_thread(fake.set_state, SessionState.COMPILING)
        await until(pilot, lambda: app.session_state is SessionState.COMPILING)
        await pilot.press("q")
        assert question(app) == "Training is compiling. Stop it and quit?"
        await pilot.press("n")
        assert fake.commands_of(Stop) == []

    await run_scenario(fake, tmp_path, scenario)


async def test_second_quit_while_stopping_exits_at_once(tmp_path):
    """A compile cannot be interrupted: q again leaves without waiting for it."""
    fake = FakeSession()

    async def scenario(app, pilot):
        await until(pilot, lambda: app.session_state is SessionState.RUNNING)
        fake.hold_chunk()
        await pilot.press("q", "y")
        assert app.return_code is None
        await pilot.press("q")
        assert app.return_code == 0

    await run_scenario(fake, tmp_path, scenario)
    assert not fake.join(0.05)  # still mid-chunk after the app has gone
    fake.release_chunk()
    assert fake.join(TIMEOUT)  # listener calls after the app exited were harmless
    assert fake.state is SessionState.FINISHED


async def test_quit_after_the_run_ended_does_not_ask(tmp_path):
    fake = FakeSession()

    async def scenario(app, pilot):
        fake.on_thread(fake.set_state, SessionState.ERROR, "RuntimeError: boom")
        await until(pilot, lambda: app.session_state is SessionState.ERROR)
        assert status_text(app) == "error"
        assert "RuntimeError: boom" in str(app.dashboard.query_one("#state-badge").content)
        assert app.check_action("pause", ()) is False and app.check_action("resume", ()) is False
        await pilot.press("p", "e")
        assert fake.commands == [] and not isinstance(app.screen, HParamEditor)
        await pilot.press("q")
        assert app.return_code == 0

    await run_scenario(fake, tmp_path, scenario)


async def test_compiling_shows_elapsed_seconds(tmp_path):
    fake = FakeSession()
    now = [100.0]

    async def scenario(app, pilot):
        fake.on_thread(fake.set_state, SessionState.COMPILING)
        await until(pilot, lambda: app.session_state is SessionState.COMPILING)
        now[0] += 12.2
        await until(pilot, lambda: status_text(app) == "compiling 12 s", timeout=3)

    await run_scenario(fake, tmp_path, scenario, clock=lambda: now[0])


async def test_elapsed_goes_on_while_paused_and_stops_when_the_run_ends(tmp_path):
    """The session's elapsed time includes pauses, but no snapshot comes while paused."""
    fake = FakeSession()
    now = [100.0]

    async def scenario(app, pilot):
        fake.on_thread(fake.advance, 100)  # the snapshot says elapsed 1 s
        await until(pilot, lambda: "elapsed 0:01" in progress_text(app))
        await pilot.press("p")
        await until(pilot, lambda: app.session_state is SessionState.PAUSED)
        now[0] += 14
        await until(pilot, lambda: "elapsed 0:15" in progress_text(app), timeout=3)
        fake.on_thread(fake.set_state, SessionState.FINISHED)
        await until(pilot, lambda: app.session_state is SessionState.FINISHED)
        now[0] += 60
        app.snapshots.tick()  # what the app's one-second timer calls: the run's clock has stopped
        await pilot.pause()
        assert "elapsed 0:15" in progress_text(app)

    await run_scenario(fake, tmp_path, scenario, clock=lambda: now[0])


@pytest.mark.parametrize("algo", ["ppo", "reinforce", "pqn", "dqn", "sac"])
async def test_chart_passes_over_a_metric_the_algorithm_does_not_define(tmp_path, algo):
    fake = FakeSession()
    # Before any episode ends the return is NaN: still a metric the chart shows. REINFORCE
    # has no clip fraction (NaN in every update): the chart passes over it.
    undefined = {update: {"clip_frac": math.nan, "episode_return": math.nan} for update in range(1, 6)}

    async def scenario(app, pilot):
        fake.on_thread(fake.advance, 5, undefined)
        await until(pilot, lambda: "update 5/" in progress_text(app))
        seen = []
        for _ in range(len(CHART_METRICS)):
            await pilot.press("c")
            seen.append(app.dashboard.chart.metric)
        # Nor, in a run that does not evaluate, over the evaluation's metrics.
        policy = {"policy_loss", "value_loss", "entropy", "approx_kl", "clip_frac"}
        replay = {"buffer_fill", "gradient_steps"}
        values = {"td_loss", "q_mean", "reward_max", "epsilon"}
        not_its_own = {"reinforce": {"clip_frac", "alpha"} | replay | values, "ppo": replay | values | {"alpha"},
                       "pqn": policy | replay | {"alpha"}, "dqn": policy | {"alpha"},
                       "sac": {"value_loss", "approx_kl", "clip_frac", "epsilon"}}[algo]
        expected = {name for name, _ in CHART_METRICS} - not_its_own - {"eval_return", "eval_return_std"}
        assert set(seen) == expected and len(seen) == len(CHART_METRICS)
        # The sparklines show the algorithm's own metrics only.
        sparks = {spark.id.removeprefix("spark-") for spark in app.dashboard.query(MetricSparkline)}
        assert sparks == {name for name, _ in SPARKLINE_METRICS} - not_its_own

    await run_scenario(fake, tmp_path, scenario, config=RunConfig(algo=algo))


async def test_chart_labels_env_steps_compactly(tmp_path):
    fake = FakeSession(total_updates=4000)

    def chart_text(app) -> str:
        chart = app.dashboard.chart
        return "\n".join(chart.render_line(y).text for y in range(chart.size.height))

    async def scenario(app, pilot):
        fake.on_thread(fake.advance, 3000)  # 512 env steps an update: 1.536M in all
        await until(pilot, lambda: "update 3,000/" in progress_text(app))
        await pilot.pause()
        x_labels = chart_text(app).splitlines()[-1].split()  # under the x axis
        assert x_labels == ["0.5M", "1.0M", "1.5M"]

    await run_scenario(fake, tmp_path, scenario)


@pytest.mark.parametrize("low, high, most, labels", [
    (966_729.1, 3_054_592.0, 5, ["1.0M", "1.5M", "2.0M", "2.5M", "3.0M"]),  # the user's run
    (966_729.1, 3_054_592.0, 3, ["1M", "2M", "3M"]),
    (0, 61_440, 5, ["0", "20k", "40k", "60k"]),
    (512, 4_096, 5, ["1,000", "2,000", "3,000", "4,000"]),
    (5.1e6, 5.2e6, 4, ["5.10M", "5.15M", "5.20M"]),
    (1_001, 1_009, 2, ["1,005"]),
    (512, 512, 4, ["512"]),
])
def test_count_ticks_are_round_and_compact(low, high, most, labels):
    from rltui.formatting import count_ticks

    ticks, shown = count_ticks(low, high, most)
    assert shown == labels and len(ticks) == len(labels) <= most
    assert all(low <= tick <= high for tick in ticks)


async def test_side_panels_cycle_on_a_small_screen(tmp_path):
    fake = FakeSession()

    async def scenario(app, pilot):
        shown = lambda: [p.id for p in app.dashboard.query(".side-panel") if p.display]
        assert shown() == ["events"]
        await pilot.press("v")
        assert shown() == ["hparams"]
        await pilot.press("v")
        assert shown() == ["devices"]
        await pilot.resize_terminal(160, 48)
        assert shown() == ["hparams", "devices", "events"]
        assert app.dashboard.check_action("cycle_side_panel", ()) is False

    await run_scenario(fake, tmp_path, scenario, size=(80, 24))


async def test_screenshot_key_saves_an_svg_into_the_run_directory(tmp_path):
    fake = FakeSession()

    async def scenario(app, pilot):
        fake.on_thread(fake.advance, 7)
        await until(pilot, lambda: "update 7/" in progress_text(app))
        await pilot.press("x")

    mask = os.umask(0o022)  # most users': files others may read
    try:
        await run_scenario(fake, tmp_path, scenario)
    finally:
        os.umask(mask)
    (svg,) = tmp_path.glob("screenshot-u000007-*.svg")
    assert svg.read_text().startswith("<svg")
    assert stat.S_IMODE(svg.stat().st_mode) == 0o600  # a file of the run's: its owner's only


async def test_help_screen_and_command_palette_list_every_action(tmp_path):
    fake = FakeSession()

    async def scenario(app, pilot):
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        keys = app.screen.text
        assert "p, space" in keys and "edit a hyperparameter" in keys
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        titles = {command.title for command in app.get_system_commands(app.screen)}
        for title in ("Pause / resume training", "Edit hyperparameters", "Save checkpoint", "Next chart metric",
                      "Next side panel", "Save SVG screenshot", "Help", "Theme", "Quit"):
            assert title in titles

    await run_scenario(fake, tmp_path, scenario)


async def test_themes_are_registered_and_selectable(tmp_path):
    user_dir = tmp_path / "themes"
    user_dir.mkdir()
    (user_dir / "mine.toml").write_text('name = "mine"\nprimary = "#ff0000"\ndark = false\n')
    (user_dir / "broken.toml").write_text('name = "broken"\nprimary = "not a colour"\n')

    async def scenario(app, pilot):
        assert app.theme == "rltui-light"
        assert {"rltui-dark", "rltui-light", "rltui-high-contrast", "mine"} <= set(app.available_themes)
        assert "broken" not in app.available_themes
        assert any("broken.toml" in problem for problem in app.theme_problems)
        app.theme = "mine"
        await pilot.pause()

    await run_scenario(FakeSession(), tmp_path, scenario, theme="light", user_theme_dir=user_dir)


def test_theme_names_for_the_cli(tmp_path):
    from rltui.ui.themes import available_theme_names, check_theme

    names = available_theme_names(user_dir=tmp_path)
    assert names[:3] == ["rltui-dark", "rltui-high-contrast", "rltui-light"]
    assert "textual-dark" in names
    assert check_theme(None, user_dir=tmp_path) == "rltui-dark"
    assert check_theme("high-contrast", user_dir=tmp_path) == "rltui-high-contrast"
    assert check_theme("nord", user_dir=tmp_path) == "nord"
    with pytest.raises(ValueError) as err:
        check_theme("nope", user_dir=tmp_path)
    assert "\n" not in str(err.value)


def test_unknown_theme_is_an_error_before_anything_starts(tmp_path):
    fake = FakeSession()
    with pytest.raises(ValueError, match=r"unknown theme 'nope'; available: rltui-dark, "):
        run_dashboard(fake, RunConfig(), tmp_path, theme="nope")
    assert not fake.started


async def test_a_resumed_run_marks_the_edits_before_its_checkpoint(tmp_path):
    fake = FakeSession()

    async def scenario(app, pilot):
        fake.on_thread(fake.advance, 30)
        fake.on_thread(fake.event, "resumed", "resumed from update 30", update=30,
                       edits=[{"update": 4, "changes": {"lr": 1e-3}}, {"update": 20, "changes": {"gamma": 0.98}}])
        steps = RunConfig().steps_per_update
        await until(pilot, lambda: app.dashboard.chart.edit_steps == [4 * steps, 20 * steps])
        assert app.dashboard.chart.border_subtitle == "│ = hyperparameter edit (2)"

    await run_scenario(fake, tmp_path, scenario)


async def test_end_to_end_with_the_real_trainer(tmp_path):
    """Launch over a real session, wait for metrics, pause, edit lr, resume, quit."""
    from rltui.session import TrainingSession
    from rltui.session.backend import JaxBackend

    config = RunConfig(num_envs=2, num_steps=8, num_minibatches=2, update_epochs=1, hidden_sizes=(16,),
                       total_timesteps=10_000_000, chunk_seconds=0.1)
    session = TrainingSession(JaxBackend(config.static_config(), config.seed), config.dynamic_hparams(),
                              config.total_updates, chunk_seconds=config.chunk_seconds)
    app = DashboardApp(session, config, tmp_path, device_source=fixed_device_stats(), user_theme_dir=tmp_path)

    async def main():
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: app.latest is not None and app.latest.update > 0, timeout=60)
            await pilot.press("p")
            await until(pilot, lambda: app.session_state is SessionState.PAUSED)
            await pilot.press("e", "1", "e", "-", "3", "enter")
            await until(pilot, lambda: "hparams" in app.dashboard.events_log.text)
            await pilot.press("p")
            await until(pilot, lambda: app.session_state is SessionState.RUNNING)
            seen["kinds"] = [event.kind for event in app.dashboard.events_log.events]
            seen["log"] = app.dashboard.events_log.text
            seen["edits"] = list(app.dashboard.chart.edit_steps)
            await pilot.press("q", "y")

    seen = {}
    await main()
    assert session.join(TIMEOUT)
    assert session.state is SessionState.FINISHED
    assert float(session.hparams.lr) == pytest.approx(1e-3)
    assert seen["kinds"][:4] == ["compiled", "paused", "hparams", "resumed"]
    assert "set lr 0.00025 -> 0.001" in seen["log"]
    assert len(seen["edits"]) == 1


# --- issue 28: the rough edges of daily use -------------------------------------------------


def _eta(app) -> str | None:
    """The ETA the progress line shows ('—' while unsettled), or None if it shows none."""
    import re

    found = re.search(r"ETA (\S+)", progress_text(app))
    return found.group(1) if found else None


async def test_eta_waits_for_the_second_chunk_after_each_start(tmp_path):
    # The first chunk after a start (or a resume) pays start-up costs: its speed would
    # throw the ETA, so it shows a dash until the second.
    fake = FakeSession()

    async def scenario(app, pilot):
        await until(pilot, lambda: app.session_state is SessionState.RUNNING)
        fake.on_thread(fake.advance, 10)
        await until(pilot, lambda: "update 10/" in progress_text(app))
        assert _eta(app) == "—"
        fake.on_thread(fake.advance, 10)
        await until(pilot, lambda: "update 20/" in progress_text(app))
        assert _eta(app) == "0:09"  # 980 updates x 512 steps at 51.2k SPS: 9.8 s
        await pilot.press("p")
        await until(pilot, lambda: status_text(app) == "paused")
        await pilot.press("p")
        await until(pilot, lambda: status_text(app) == "running")
        fake.on_thread(fake.advance, 10)
        await until(pilot, lambda: "update 30/" in progress_text(app))
        assert _eta(app) == "—"
        fake.on_thread(fake.advance, 10)
        await until(pilot, lambda: "update 40/" in progress_text(app))
        assert _eta(app) == "0:09"

    await run_scenario(fake, tmp_path, scenario)


async def test_the_status_line_names_the_end_as_rltui_runs_does(tmp_path):
    # One word for how a run ended, from the same events, here, in rltui runs and headless.
    from rltui.runfiles.discovery import state_of

    def ended(events: list[tuple[str, str]], finish: bool = True):
        async def scenario(app, pilot):
            await until(pilot, lambda: app.session_state is SessionState.RUNNING)
            fake.on_thread(fake.advance, 10)
            for kind, message in events:
                fake.on_thread(fake.event, kind, message)
            if finish:
                fake.on_thread(fake.set_state, SessionState.FINISHED)
            else:
                fake.submit(Stop())
            await until(pilot, lambda: app.session_state is SessionState.FINISHED)
            await until(pilot, lambda: "finished" in app.dashboard.events_log.text)
            seen.append((status_text(app), list(app._notifications)[-1].title))

        return scenario

    seen: list[tuple[str, str]] = []
    for events, finish in (([("finished", "finished 10 updates")], True),
                           ([], False),
                           ([("nonfinite", "non-finite loss or gradient: training paused")], False)):
        fake = FakeSession(total_updates=10)
        await run_scenario(fake, tmp_path, ended(events, finish))
    assert seen == [("finished", "finished"), ("stopped", "stopped"), ("diverged", "diverged")]
    assert state_of([{"kind": "finished", "message": "stopped at update 10"}], live=False).name == "stopped"


def screen_text(app: DashboardApp) -> str:
    """What the terminal shows, as text (the SVG screenshot's, spaces and all)."""
    import html
    import re

    svg = app.export_screenshot()
    return html.unescape(" ".join(re.findall(r">([^<>]*)</text>", svg))).replace("\xa0", " ")


async def test_the_end_of_a_run_is_a_passing_note_under_the_help(tmp_path):
    # The note that a run has ended goes as others do (the status line keeps the state),
    # and the help screen, asked for, is drawn above it rather than under it.
    fake = FakeSession()

    async def scenario(app, pilot):
        await until(pilot, lambda: app.session_state is SessionState.RUNNING)
        fake.on_thread(fake.advance, 10)
        fake.submit(Stop())
        await until(pilot, lambda: app.session_state is SessionState.FINISHED)
        await pilot.pause()
        (note,) = app._notifications
        assert note.title == "stopped" and note.timeout == app.NOTIFICATION_TIMEOUT
        assert "Stopped at update 10" in screen_text(app)
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.pause()
        shown = screen_text(app)
        assert "help (Esc closes)" in shown and "Stopped at update 10" not in shown
        await pilot.press("escape")
        # Not over yet: back once the help has gone (redrawn when the loop gets to it).
        await until(pilot, lambda: "Stopped at update 10" in screen_text(app))
        assert status_text(app) == "stopped"

    await run_scenario(fake, tmp_path, scenario, size=(80, 24), notifications=True)


async def test_a_stopped_or_failed_run_shows_no_eta(tmp_path):
    fake = FakeSession()

    async def scenario(app, pilot):
        await until(pilot, lambda: app.session_state is SessionState.RUNNING)
        fake.on_thread(fake.advance, 10)
        await until(pilot, lambda: "update 10/" in progress_text(app))
        fake.on_thread(fake.advance, 10)
        await until(pilot, lambda: _eta(app) == "0:09")
        fake.submit(Stop())  # what k does, for every client
        await until(pilot, lambda: app.session_state is SessionState.FINISHED)
        assert status_text(app) == "stopped"
        assert _eta(app) is None and "update 20/1,000" in progress_text(app)

    await run_scenario(fake, tmp_path, scenario)

    failed = FakeSession()

    async def failing(app, pilot):
        await until(pilot, lambda: app.session_state is SessionState.RUNNING)
        failed.on_thread(failed.advance, 10)
        await until(pilot, lambda: "update 10/" in progress_text(app))
        failed.on_thread(failed.advance, 10)
        await until(pilot, lambda: _eta(app) == "0:09")
        failed.on_thread(failed.set_state, SessionState.ERROR, "boom")
        await until(pilot, lambda: app.session_state is SessionState.ERROR)
        assert _eta(app) is None

    await run_scenario(failed, tmp_path, failing)


async def test_ctrl_c_asks_as_q_does(tmp_path):
    # Not Textual's "Do you want to quit? Press q" note, then a second question: the one
    # question of q, at once.
    fake = FakeSession()

    async def scenario(app, pilot):
        await until(pilot, lambda: app.session_state is SessionState.RUNNING)
        await pilot.press("ctrl+c")
        assert isinstance(app.screen, QuitConfirm) and notes(app) == []
        await pilot.press("n")
        assert not isinstance(app.screen, QuitConfirm) and fake.commands == []
        await pilot.press("ctrl+c", "y")
        await until(pilot, lambda: app.return_code is not None)
        assert fake.commands == [Stop()]

    await run_scenario(fake, tmp_path, scenario)

    class AttachedSession(FakeSession):
        outlives_client = True

    attached = AttachedSession()

    async def detach(app, pilot):
        await until(pilot, lambda: app.session_state is SessionState.RUNNING)
        await pilot.press("ctrl+c")  # as q: detach, the run goes on
        assert app.return_code == 0 and attached.commands == []

    await run_scenario(attached, tmp_path, detach)


async def test_the_quit_question_of_a_paused_run_offers_to_keep_it_paused(tmp_path):
    fake = FakeSession()

    def no_button(app) -> str:
        return str(app.screen.query_one("#quit-no").label)

    async def scenario(app, pilot):
        await until(pilot, lambda: app.session_state is SessionState.RUNNING)
        await pilot.press("q")
        assert no_button(app) == "Keep training (n)"
        await pilot.press("n", "p")
        await until(pilot, lambda: status_text(app) == "paused")
        await pilot.press("q")
        assert isinstance(app.screen, QuitConfirm)
        assert no_button(app) == "Keep it paused (n)"
        await pilot.press("n")
        assert status_text(app) == "paused" and fake.commands_of(Stop) == []

    await run_scenario(fake, tmp_path, scenario)


async def test_on_pause_the_status_line_shows_the_update_it_paused_at(tmp_path):
    # Snapshots are drawn at most once per refresh_interval; pausing must not leave an
    # older update on the status line beside the event that names the newer one.
    fake = FakeSession()
    app = DashboardApp(fake, RunConfig(), tmp_path, device_source=fixed_device_stats(), chart_interval=0,
                       refresh_interval=60, user_theme_dir=tmp_path / "no-user-themes")

    async def main():
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda: fake.started and app.session_state is SessionState.RUNNING)
            fake.on_thread(fake.advance, 5)
            await until(pilot, lambda: "update 5/" in progress_text(app))
            fake.on_thread(fake.advance, 10)  # drawn in a minute, unless something says otherwise
            await until(pilot, lambda: app.latest.update == 15)
            assert "update 5/" in progress_text(app)
            await pilot.press("p")
            await until(pilot, lambda: "paused    at update 15" in app.dashboard.events_log.text, timeout=2)
            assert "update 15/" in progress_text(app) and status_text(app) == "paused"

    await main()


async def test_palette_quit_says_it_asks_and_has_no_keys_entry(tmp_path):
    fake = FakeSession()

    async def scenario(app, pilot):
        commands = {command.title: command.help for command in app.get_system_commands(app.screen)}
        assert "Keys" not in commands  # Help (?) lists the keys
        assert "as soon as possible" not in commands["Quit"] and "asks first" in commands["Quit"]
        assert list(commands).count("Quit") == 1

    await run_scenario(fake, tmp_path, scenario)


@pytest.mark.parametrize("key, dialog", [("q", QuitConfirm), ("e", HParamEditor), ("question_mark", HelpScreen)])
async def test_dialogs_leave_the_dashboard_in_sight(tmp_path, key, dialog):
    fake = FakeSession()

    async def scenario(app, pilot):
        fake.on_thread(fake.advance, 30)
        await until(pilot, lambda: "update 30/" in progress_text(app))
        await pilot.press(key)
        await until(pilot, lambda: isinstance(app.screen, dialog))
        await pilot.pause()
        assert 0 < app.screen.styles.background.a < 1  # tinted, not opaque
        # What the terminal shows: the chart's title and the status line around the dialog.
        screen = app.export_screenshot()
        assert "episode" in screen and "update" in screen and "30/1,000" in screen.replace("&#160;", " ")

    await run_scenario(fake, tmp_path, scenario, size=(120, 40))


async def test_screenshot_leaves_out_the_notes_on_screen(tmp_path):
    fake = FakeSession()
    app = DashboardApp(fake, RunConfig(), tmp_path, device_source=fixed_device_stats(), chart_interval=0,
                       refresh_interval=0, user_theme_dir=tmp_path / "no-user-themes")

    async def main():
        async with app.run_test(size=(100, 30), notifications=True) as pilot:  # toasts drawn, as in a terminal
            await until(pilot, lambda: fake.started)
            fake.on_thread(fake.advance, 7)
            await until(pilot, lambda: "update 7/" in progress_text(app))
            app.notify("an earlier note the screenshot must not show", timeout=30)
            await pilot.press("x")  # its own note says where the file went
            await until(pilot, lambda: any("screenshot-u000007" in n for n in notes(app)))
            await until(pilot, lambda: "screenshot saved" in app.export_screenshot().replace("&#160;", " "))
            for svg in tmp_path.glob("screenshot-*.svg"):
                svg.unlink()
            await pilot.press("x")  # the second shows neither note
            await until(pilot, lambda: any(tmp_path.glob("screenshot-*.svg")))
            await pilot.pause(0.1)

    await main()
    (svg,) = tmp_path.glob("screenshot-u000007-*.svg")
    text = svg.read_text().replace("&#160;", " ")
    assert "update 7/1,000" in text
    assert "earlier" not in text and "screenshot saved" not in text


async def test_at_80_columns_the_progress_line_keeps_the_eta_whole(tmp_path):
    fake = FakeSession(total_updates=781_250, steps_per_update=256)

    async def scenario(app, pilot):
        await until(pilot, lambda: app.session_state is SessionState.RUNNING)
        fake.on_thread(fake.advance, 1692)
        await until(pilot, lambda: "update 1,692/" in progress_text(app))
        fake.on_thread(fake.advance, 10)
        await until(pilot, lambda: "update 1,702/781,250" in progress_text(app))
        label = app.dashboard.query_one("#progress")
        text = progress_text(app)
        assert len(text) <= label.content_region.width, text
        assert _eta(app) == "1:04:57"  # (781,250 - 1,702) x 256 steps at 51.2k SPS, whole
        assert "elapsed" in text

    await run_scenario(fake, tmp_path, scenario, size=(80, 24))


async def test_at_80_columns_wrapped_help_lines_keep_their_indent(tmp_path):
    fake = FakeSession()

    async def scenario(app, pilot):
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.pause()
        texts = list(app.screen.query(".help-text"))
        keys = list(app.screen.query(".help-key"))
        assert len({text.region.x for text in texts}) == 1  # one column, whatever wraps
        assert texts[0].region.x > max(key.region.right for key in keys) - 1
        assert any(text.region.height > 1 for text in texts)  # some do wrap at this width
        assert "p, space" in app.screen.text and "edit a hyperparameter" in app.screen.text

    await run_scenario(fake, tmp_path, scenario, size=(80, 24))


async def test_the_footer_shows_the_keys_before_the_app_has_the_focus(tmp_path):
    # A browser tab (rltui serve) starts without the focus: the footer must still follow
    # the bindings (Pause -> Resume), not stay as it was until a click.
    from textual.widgets._footer import FooterKey

    fake = FakeSession()

    def shown(app) -> list[str]:
        return [key.description for key in app.dashboard.query(FooterKey)]

    async def scenario(app, pilot):
        await until(pilot, lambda: app.session_state is SessionState.RUNNING)
        app.app_focus = False  # as a browser tab starts: no focus until a click
        await pilot.pause()
        fake.submit(Pause())
        await until(pilot, lambda: status_text(app) == "paused")
        await until(pilot, lambda: "Resume" in shown(app), timeout=3)
        assert "Pause" not in shown(app)

    await run_scenario(fake, tmp_path, scenario)


async def test_a_run_that_evaluates_shows_its_evaluation_return(tmp_path):
    fake = FakeSession()

    async def scenario(app, pilot):
        fake.on_thread(fake.advance, 20, {10: {"eval_return": 180.0}, 20: {"eval_return": 240.0}})
        await until(pilot, lambda: "update 20/" in progress_text(app))
        spark = app.dashboard.query_one("#spark-eval_return")
        await until(pilot, lambda: spark.stats_text.startswith("240"))
        assert "180" in spark.stats_text  # its minimum, over the run

    await run_scenario(fake, tmp_path, scenario, size=(120, 40), config=RunConfig(eval_every_updates=10))
    # a run that does not evaluate has no such sparkline
    plain = FakeSession()

    async def no_eval(app, pilot):
        assert not app.dashboard.query("#spark-eval_return")

    await run_scenario(plain, tmp_path, no_eval, size=(120, 40))


async def test_metrics_beyond_the_panels_lines_scroll_into_view(tmp_path):
    # SAC reports more metrics than a 100x30 terminal's panel has lines for.
    from rltui.config.build import build_config

    fake = FakeSession()
    config = build_config({}, {"algo": "sac", "env": "Pendulum-v1"})

    async def scenario(app, pilot):
        fake.on_thread(fake.advance, 5)
        await until(pilot, lambda: "update 5/" in progress_text(app))
        panel = app.dashboard.query_one("#metrics")
        last = app.dashboard.query_one("#spark-lr", MetricSparkline)
        assert panel.allow_vertical_scroll and not panel.region.contains_region(last.region)
        panel.scroll_end(animate=False)
        await pilot.pause()
        await until(pilot, lambda: panel.region.contains_region(last.region))

    await run_scenario(fake, tmp_path, scenario, config=config)


@pytest.mark.parametrize("algo,env,size,compact", [("sac", "Pendulum-v1", (120, 36), True),
                                                   ("dqn", "CartPole-v1", (120, 36), False),
                                                   ("sac", "Pendulum-v1", (160, 48), False)])
async def test_on_a_large_terminal_every_metric_shows_one_line_each_where_two_do_not_fit(tmp_path, algo, env, size,
                                                                                        compact):
    # At 120x36 the panel has 14 lines: SAC's 8 metrics do not fit at two lines each (a name
    # line over a sparkline), DQN's 6 do, and at 160x48 SAC's do too.
    from rltui.config.build import build_config

    fake = FakeSession()
    config = build_config({}, {"algo": algo, "env": env})

    async def scenario(app, pilot):
        fake.on_thread(fake.advance, 5)
        await until(pilot, lambda: "update 5/" in progress_text(app))
        panel = app.dashboard.query_one("#metrics")
        await pilot.pause()
        sparks = list(panel.query(MetricSparkline))
        assert all(panel.region.contains_region(spark.region) for spark in sparks), [s.region for s in sparks]
        heights = {spark.region.height for spark in sparks}
        assert heights == {1} if compact else 1 not in heights, heights

    await run_scenario(fake, tmp_path, scenario, config=config, size=size)


async def test_session_messages_that_arrive_while_the_dashboard_tears_down_are_dropped(tmp_path):
    """An event, a state change or a snapshot can arrive after the app has begun removing
    its widgets (the session runs on its own thread): it is dropped, not an error."""
    from rltui.session.events import SessionEvent
    from rltui.ui.messages import SessionEventLogged, SessionStateChanged
    from rltui.ui.widgets.events import EventsLog
    from rltui.ui.widgets.status import StatusBar

    fake = FakeSession()

    async def scenario(app, pilot):
        fake.on_thread(fake.advance, 2)
        await until(pilot, lambda: "update 2/" in progress_text(app))
        await app.dashboard.query_one(EventsLog).remove()
        await app.dashboard.query_one(StatusBar).remove()
        app.session_view.handle(SessionEventLogged(SessionEvent("hparams", 2, "set gamma 0.99 -> 0.9", 0.0)))
        app.session_view.handle(SessionStateChanged(SessionState.PAUSED, None))

    await run_scenario(fake, tmp_path, scenario)


@pytest.mark.parametrize("reopened", [False, True])
@pytest.mark.parametrize("burst", [["e", "down", "0", ".", "9", "enter"], ["e", "down", "1", "e", "-", "3", "enter"]])
async def test_keys_typed_straight_after_e_land_in_the_editor(tmp_path, burst, reopened):
    """`e` and the keys behind it sent at once, as a terminal sends them: the editor opens
    before the next key is handed on, and an `e` typed in the value is part of the number."""
    fake = FakeSession()

    async def scenario(app, pilot):
        if reopened:  # the editor is built on the first opening and reused afterwards
            await pilot.press("e", "escape")
            await until(pilot, lambda: app.screen is app.dashboard)
        named = {".": "full_stop", "-": "minus"}
        for key in burst:
            event = Key(named.get(key, key), key if len(key) == 1 else None)
            event.set_sender(app)
            app._driver.send_message(event)
        await until(pilot, lambda: fake.commands_of(SetHParams))
        field = app.get_screen("hparam-editor").fields[burst.count("down")]
        expected = float("".join(burst[burst.index("down") + 1:-1]))
        assert fake.commands_of(SetHParams) == [SetHParams({field: pytest.approx(expected)})]
        await until(pilot, lambda: app.screen is app.dashboard)

    await run_scenario(fake, tmp_path, scenario)


@pytest.mark.parametrize("burst", [["down", "0", ".", "9", "enter"],
                                   ["down", "down", "up", "down", "0", ".", "9", "enter"]])
async def test_keys_typed_straight_after_an_arrow_land_in_the_new_fields_value(tmp_path, burst):
    """A fast typist (or tmux send-keys) gets every key in before the option list has
    reported its highlight: the late report must not clear what was typed, nor move back."""
    fake = FakeSession()

    async def scenario(app, pilot):
        await pilot.press("e")
        named = {".": "full_stop"}
        for key in burst:  # sent at once, as a terminal does: none handled before the next arrives
            event = Key(named.get(key, key), key if len(key) == 1 else None)
            event.set_sender(app)
            app._driver.send_message(event)
        await until(pilot, lambda: fake.commands_of(SetHParams))
        field = app.get_screen("hparam-editor").fields[burst.count("down") - burst.count("up")]
        assert fake.commands_of(SetHParams) == [SetHParams({field: 0.9})]
        await until(pilot, lambda: app.screen is app.dashboard)

    await run_scenario(fake, tmp_path, scenario)
