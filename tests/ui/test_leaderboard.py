"""A population's leaderboard in the dashboard: its rows, the sort key, and the keys that
select, freeze, clone and edit members (as commands the session is sent)."""

from __future__ import annotations

import dataclasses
import math
from types import MappingProxyType

import pytest
from test_ui import notes, until

from rltui.config.build import RunConfig
from rltui.session import SetHParams
from rltui.session.commands import CloneMember, FreezeMembers
from rltui.session.population import MemberState, MemberView, PopulationView
from rltui.ui.app import DashboardApp
from rltui.ui.screens import CloneDialog, HelpScreen, HParamEditor
from rltui.ui.widgets.leaderboard import sparkline

from fakes import FakeSession, fixed_device_stats

LRS = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2)
SWEEP = {"lr": list(LRS)}


def member_returns(index: int, update: int) -> float:
    """A made-up but plausible curve per member: the middle learning rates learn fastest."""
    speed = (1.0, 2.2, 4.5, 3.6, 1.6, 0.4)[index]
    return min(500.0, 9.0 + speed * update + 2.0 * math.sin(update + index))


def population_view(update: int, *, states=None, parents=None, evals=None, values=None, seeds=2) -> PopulationView:
    states = states or {}
    parents = parents or {}
    members = []
    for m, lr in enumerate(LRS):
        trend = tuple(member_returns(m, u) for u in range(max(1, update - 31), update + 1))
        members.append(MemberView(
            index=m,
            values=MappingProxyType({"lr": (values or {}).get(m, lr)}),
            state=states.get(m, MemberState.TRAINING),
            latest_return=trend[-1] if trend else None,  # update 0 (rolled back to the start): none yet
            best_return=max(trend) if trend else None,
            eval_return=(evals or {}).get(m),
            trend=trend,
            parent=parents.get(m),
        ))
    return PopulationView(keys=("lr",), num_seeds=seeds, members=tuple(members))


class PopulationFake(FakeSession):
    """The fake session, publishing a population's snapshots: the members' curves as the
    chart's overlay, and the member table."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.view_options: dict = {}

    def advance(self, updates, overrides=None):
        listeners, self._listeners = self._listeners, []
        try:
            snapshot = super().advance(updates, overrides)
        finally:
            self._listeners = listeners
        steps = range(self._update - len(snapshot.history_env_steps) + 1, self._update + 1)
        snapshot = dataclasses.replace(
            snapshot,
            seed_returns=tuple(tuple(member_returns(m, u) for u in steps) for m in range(len(LRS))),
            population=population_view(self._update, **self.view_options),
        )
        for listener in self._listeners:
            listener.on_metrics(snapshot)
        return snapshot


def make_app(tmp_path, fake, config=None) -> DashboardApp:
    return DashboardApp(
        fake, config or RunConfig(sweep=SWEEP), tmp_path / "CartPole-v1-ppo-population",
        chart_interval=0, refresh_interval=0, device_source=fixed_device_stats(),
        user_theme_dir=tmp_path / "no-user-themes", clock=lambda: 0.0,
    )


async def started(app, pilot, fake, updates: int = 40):
    await until(pilot, lambda: fake.started)
    fake.on_thread(fake.advance, updates)
    board = app.dashboard.leaderboard
    await until(pilot, lambda: board.row_count == len(LRS))
    await pilot.pause()
    return board


async def cursor_to(pilot, board, member: int) -> None:
    """Arrow keys until the cursor is on `member`'s row."""
    steps = board.order.index(member) - board.cursor_row
    await pilot.press(*(["down"] * steps if steps > 0 else ["up"] * -steps))
    assert board.cursor_member == member


def test_sparkline_scales_to_the_row():
    assert sparkline([1.0, 2.0, 3.0, math.nan, 4.0]) == "▁▃▆█"
    assert sparkline([5.0, 5.0]) == "▄▄"
    assert sparkline([]) == "" and sparkline([math.nan]) == ""
    assert len(sparkline(range(100))) == 12


async def test_rows_show_each_member_sorted_by_latest(tmp_path):
    fake = PopulationFake()
    fake.view_options = {"states": {4: MemberState.FROZEN, 5: MemberState.DIVERGED}, "parents": {0: 2}}
    app = make_app(tmp_path, fake)
    async with app.run_test(size=(120, 40)) as pilot:
        board = await started(app, pilot, fake)
        assert board.display and app.focused is board
        assert board.order == (2, 3, 1, 4, 0, 5)  # by latest return, best first
        rows = {int(r[0]): r for r in board.row_texts()}
        assert rows[2][1] == "0.001" and rows[2][2] == fmt(member_returns(2, 40))
        assert rows[4][-2] == "frozen" and rows[5][-2] == "diverged" and rows[3][-2] == "training"
        assert rows[0][-1] == "<- 2" and rows[1][-1] == ""
        assert set(rows[1][-3]) <= set("▁▂▃▄▅▆▇█") and len(rows[1][-3]) == 12
        assert "eval" not in [str(c.label) for c in board.columns.values()]  # no evaluation in this run
        assert "6 members" in str(board.border_title) and "by latest" in str(board.border_title)
        # The chart overlays members, and says so.
        assert "6 members" in str(app.dashboard.chart.border_title)
        assert app.dashboard.chart.unit == "member"
        # The hyperparameters panel does not show one member's lr as if it were the run's.
        shown = str(app.dashboard.hparams_panel.query_one("#hp-dynamic").render())
        lr_line = next(line for line in shown.splitlines() if line.startswith("lr"))
        assert lr_line.split(None, 1)[1] == "per member"


async def test_once_the_run_is_stopped_training_members_say_so(tmp_path):
    from rltui.session import Stop

    fake = PopulationFake()
    fake.view_options = {"states": {4: MemberState.FROZEN}}
    app = make_app(tmp_path, fake)
    async with app.run_test(size=(120, 40)) as pilot:
        board = await started(app, pilot, fake)
        fake.submit(Stop())
        await until(pilot, lambda: board.ended == "stopped")
        rows = {int(r[0]): r for r in board.row_texts()}
        assert rows[4][-2] == "frozen"  # the user's freeze stays as it was
        assert [rows[m][-2] for m in (0, 1, 2, 3, 5)] == ["stopped"] * 5


async def test_a_populations_rollback_says_the_members_values_go_back_too(tmp_path):
    from rltui.session import SessionState
    from rltui.session.commands import Rollback

    fake = PopulationFake()
    app = make_app(tmp_path, fake)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(app, pilot, fake)
        await pilot.press("p")
        await until(pilot, lambda: app.session_state is SessionState.PAUSED)
        await pilot.press("r", "y")
        await until(pilot, lambda: fake.commands_of(Rollback))
        assert notes(app)[-1] == (
            "Rollback requested: to the latest checkpoint (each member's values as the checkpoint holds them).")


def fmt(value: float) -> str:
    from rltui.formatting import fmt_value

    return fmt_value(value)


async def test_sort_key_cycles_and_the_cursor_stays_on_its_member(tmp_path):
    fake = PopulationFake()
    fake.view_options = {"evals": {0: 480.0, 1: 20.0}}
    app = make_app(tmp_path, fake, RunConfig(sweep=SWEEP, eval_every_updates=10))
    async with app.run_test(size=(120, 40)) as pilot:
        board = await started(app, pilot, fake)
        await pilot.press("down")  # on member 3
        assert board.cursor_member == 3
        keys = []
        for _ in range(4):
            await pilot.press("s")
            keys.append(board.sort_key)
            assert board.cursor_member == 3  # the cursor follows its member, not its row
        assert keys == ["best", "eval", "index", "latest"]
        await pilot.press("s", "s")
        assert board.sort_key == "eval" and board.order[:2] == (0, 1)  # members without an eval last
        await pilot.press("s")
        assert board.order == (0, 1, 2, 3, 4, 5)
        # A new snapshot updates the rows in place: same rows, the cursor where it was.
        fake.on_thread(fake.advance, 5)
        await until(pilot, lambda: board.row_texts()[3][2] == fmt(member_returns(3, 45)))
        assert board.cursor_member == 3 and board.order == (0, 1, 2, 3, 4, 5)


async def test_f_freezes_the_selection_or_the_cursor_member(tmp_path):
    fake = PopulationFake()
    fake.view_options = {"states": {4: MemberState.FROZEN}}
    app = make_app(tmp_path, fake)
    async with app.run_test(size=(120, 40)) as pilot:
        board = await started(app, pilot, fake)
        await pilot.press("f")  # no selection: the member under the cursor (the best, 2)
        await until(pilot, lambda: len(fake.commands_of(FreezeMembers)) == 1)
        assert fake.commands_of(FreezeMembers)[-1] == FreezeMembers((2,), True)
        await pilot.press("space", "down", "down", "space")  # select 2 and 1
        assert board.selected == {1, 2} and "●" in board.row_texts()[0][0]
        assert "2 selected" in str(board.border_subtitle)
        await pilot.press("f")
        await until(pilot, lambda: len(fake.commands_of(FreezeMembers)) == 2)
        assert fake.commands_of(FreezeMembers)[-1] == FreezeMembers((1, 2), True)
        # Only frozen members chosen: f thaws them.
        await pilot.press("escape")
        assert board.selected == set()
        await cursor_to(pilot, board, 4)
        await pilot.press("f")
        await until(pilot, lambda: len(fake.commands_of(FreezeMembers)) == 3)
        assert fake.commands_of(FreezeMembers)[-1] == FreezeMembers((4,), False)


async def test_c_clones_the_cursor_member_into_the_selection_with_a_factor(tmp_path):
    fake = PopulationFake()
    app = make_app(tmp_path, fake)
    async with app.run_test(size=(120, 40)) as pilot:
        board = await started(app, pilot, fake)
        await cursor_to(pilot, board, 0)
        await pilot.press("space")
        await cursor_to(pilot, board, 5)
        await pilot.press("space")  # 0 and 5 selected
        await cursor_to(pilot, board, 2)
        await pilot.press("c")
        await until(pilot, lambda: isinstance(app.screen, CloneDialog))
        dialog = app.screen
        assert dialog.targets == (0, 5)
        await pilot.press("ctrl+a", "ctrl+k", "x", "enter")  # a bad factor: one line in the dialog
        assert "factor: not a number" in dialog.error_text and "\n" not in dialog.error_text
        await pilot.press("ctrl+a", "ctrl+k", "enter")  # cleared: refused, not taken for 1.0
        assert dialog.error_text == "factor: empty; type a positive number, 1.0 for an exact copy"
        assert fake.commands_of(CloneMember) == []
        await pilot.press("ctrl+a", "ctrl+k", "1", ".", "2", "enter")
        await until(pilot, lambda: fake.commands_of(CloneMember))
        assert fake.commands_of(CloneMember) == [CloneMember(2, (0, 5), 1.2)]
        assert not isinstance(app.screen, CloneDialog)


async def test_c_without_a_selection_asks_for_the_targets(tmp_path):
    fake = PopulationFake()
    app = make_app(tmp_path, fake)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(app, pilot, fake)
        await pilot.press("c")  # member 2 under the cursor, nothing selected
        await until(pilot, lambda: isinstance(app.screen, CloneDialog))
        dialog = app.screen
        await pilot.press("2", "enter")  # itself: refused
        assert "member 2 is the one cloned" in dialog.error_text
        await pilot.press("backspace", "9", "enter")
        assert "from 0 to 5" in dialog.error_text
        await pilot.press("backspace", "0", " ", "4", "enter")  # factor left at 1.0: an exact copy
        await until(pilot, lambda: fake.commands_of(CloneMember))
        assert fake.commands_of(CloneMember) == [CloneMember(2, (0, 4), 1.0)]


async def test_an_edit_goes_to_the_selection_or_to_every_member(tmp_path):
    fake = PopulationFake()
    app = make_app(tmp_path, fake)
    async with app.run_test(size=(120, 40)) as pilot:
        board = await started(app, pilot, fake)
        await pilot.press("e")
        await until(pilot, lambda: isinstance(app.screen, HParamEditor))
        assert "every member" in str(app.screen.query_one("#editor-dialog").border_title)
        await pilot.press("escape")
        await pilot.press("space", "down", "space")  # members 2 and 3
        assert board.selected == {2, 3}
        await pilot.press("e")
        await until(pilot, lambda: isinstance(app.screen, HParamEditor))
        editor = app.screen
        assert "members 2, 3" in str(editor.query_one("#editor-dialog").border_title)
        assert editor.values["lr"] == pytest.approx(1e-3)  # the first selected member's own lr
        await pilot.press("5", "e", "-", "4", "enter")
        await until(pilot, lambda: fake.commands_of(SetHParams))
        assert fake.commands_of(SetHParams) == [SetHParams({"lr": 5e-4}, members=(2, 3))]
        await pilot.press("escape", "e")  # no selection: every member
        await until(pilot, lambda: isinstance(app.screen, HParamEditor))
        await pilot.press("2", "e", "-", "4", "enter")
        await until(pilot, lambda: len(fake.commands_of(SetHParams)) == 2)
        assert fake.commands_of(SetHParams)[-1] == SetHParams({"lr": 2e-4}, members=None)


async def test_help_lists_the_leaderboard_keys(tmp_path):
    fake = PopulationFake()
    app = make_app(tmp_path, fake)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(app, pilot, fake)
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        text = app.screen.text
        assert "leaderboard: freeze" in text and "leaderboard: clone" in text and "leaderboard: sort" in text
        assert "one line per member" in text and "one line per seed" not in text


async def test_a_single_run_has_no_leaderboard(tmp_path):
    fake = FakeSession()
    app = make_app(tmp_path, fake, RunConfig(num_seeds=3))
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: fake.started)
        fake.on_thread(fake.advance, 10)
        await until(pilot, lambda: app.latest is not None)
        await pilot.pause()
        assert not app.dashboard.leaderboard.display
        assert app.focused is not app.dashboard.leaderboard
        assert app.dashboard.chart.unit == "seed"
        await pilot.press("f")  # nothing: not a population
        assert fake.commands_of(FreezeMembers) == []


def population_dashboard(tmp_path):
    fake = PopulationFake()
    fake.view_options = {"states": {4: MemberState.FROZEN, 5: MemberState.DIVERGED}, "parents": {0: 2},
                         "values": {0: 1.2e-3}}
    app = make_app(tmp_path, fake)

    async def run_before(pilot):
        await started(app, pilot, fake, updates=60)
        await pilot.press("down", "down", "space")
        await pilot.pause()

    return app, run_before


def test_leaderboard_120x40(snap_compare, tmp_path):
    app, run_before = population_dashboard(tmp_path)
    assert snap_compare(app, terminal_size=(120, 40), run_before=run_before)


def test_leaderboard_80x24(snap_compare, tmp_path):
    app, run_before = population_dashboard(tmp_path)
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


async def test_pbt_and_clone_steps_are_marked_on_the_chart(tmp_path):
    fake = PopulationFake()
    app = make_app(tmp_path, fake)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(app, pilot, fake)
        chart = app.dashboard.chart
        before = list(chart.edit_steps)
        fake.on_thread(fake.event, "population", "member 5 <- member 2 (lr=0.0008)", action="pbt",
                       replacements=[{"target": 5, "source": 2}])
        fake.on_thread(fake.event, "population", "froze member 4", action="freeze", members=[4])
        await until(pilot, lambda: len(chart.edit_steps) > len(before))
        await pilot.pause()
        assert chart.edit_steps[len(before):] == [40 * RunConfig(sweep=SWEEP).steps_per_update]  # the freeze is not



def dialog_text(app) -> str:
    """The words the open dialog shows on screen, line after line, clipped as the terminal
    draws them (a line cut at the dialog's edge loses its end here too)."""
    import re

    region = app.screen.query_one("#clone-dialog").content_region
    rows = app.screen._compositor.render_strips()[region.y:region.bottom]
    return re.sub(r"\s+", " ", " ".join(row.text[region.x:region.right] for row in rows)).strip()


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
@pytest.mark.parametrize("selected", [(1,), ()])
async def test_the_clone_dialog_wraps_its_text_whole(tmp_path, size, selected):
    fake = PopulationFake()
    app = make_app(tmp_path, fake)
    async with app.run_test(size=size) as pilot:
        board = await started(app, pilot, fake)
        for member in selected:
            await cursor_to(pilot, board, member)
            await pilot.press("space")
        await cursor_to(pilot, board, 4)
        await pilot.press("c")
        await until(pilot, lambda: isinstance(app.screen, CloneDialog))
        await pilot.pause()
        into = "1" if selected else "the members typed below"
        shown = dialog_text(app)
        assert f"Member 4's parameters and optimizer state go into {into}, at the next chunk boundary." in shown
        assert "factor: lr are multiplied by it (1.0 = an exact copy)" in shown
        assert "Tab next field · Enter clone · Esc cancel" in shown


async def test_a_member_edit_is_one_line_in_the_events_log(tmp_path):
    fake = PopulationFake()
    app = make_app(tmp_path, fake)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(app, pilot, fake)
        # as the session reports an edit of members: an hparams event, then the population's
        # record of it with the table after it (for population.jsonl)
        text = "set lr -> 0.0005 for members 2, 3"
        fake.on_thread(fake.event, "hparams", text, changes={"lr": 5e-4}, members=[2, 3])
        fake.on_thread(fake.event, "population", text, action="edit", members=[2, 3], replacements=[], table=[])
        fake.on_thread(fake.event, "population", "froze member 4", action="freeze", members=[4], table=[])
        log = app.dashboard.events_log
        await until(pilot, lambda: "froze member 4" in log.text)
        assert [line.split("] ", 1)[1] for line in log.text.splitlines() if "lr -> 0.0005" in line] == [
            "hparams   set lr -> 0.0005 for members 2, 3"]


@pytest.mark.parametrize("seeds,title", [(1, "6 members × 1 seed, by latest"), (2, "6 members × 2 seeds, by latest")])
async def test_the_leaderboard_title_counts_seeds_in_words(tmp_path, seeds, title):
    fake = PopulationFake()
    fake.view_options = {"seeds": seeds}
    app = make_app(tmp_path, fake)
    async with app.run_test(size=(120, 40)) as pilot:
        board = await started(app, pilot, fake)
        assert str(board.border_title) == f"leaderboard: {title} (s)"



class ReshufflingFake(PopulationFake):
    """Each snapshot ranks the members anew (member u mod 6 leads at update u): under a live
    sort by latest return the rows reorder between key presses."""

    def advance(self, updates, overrides=None):
        update = self._update + updates
        listeners, self._listeners = self._listeners, []
        try:
            snapshot = super().advance(updates, overrides)
        finally:
            self._listeners = listeners
        view = snapshot.population
        members = tuple(dataclasses.replace(m, latest_return=float(-((m.index - update) % len(LRS))))
                        for m in view.members)
        snapshot = dataclasses.replace(snapshot, population=dataclasses.replace(view, members=members))
        for listener in self._listeners:
            listener.on_metrics(snapshot)
        return snapshot


async def test_the_rows_hold_their_order_while_the_user_moves_the_cursor(tmp_path):
    from rltui.ui.widgets.leaderboard import HOLD_SECONDS

    fake = ReshufflingFake()
    app = make_app(tmp_path, fake)
    async with app.run_test(size=(120, 40)) as pilot:
        board = await started(app, pilot, fake, updates=6)
        now = [0.0]
        board.clock = lambda: now[0]
        shown = board.order
        for _ in range(5):  # a snapshot that would reorder the rows between key presses
            await pilot.press("down")
            view = board.view
            fake.on_thread(fake.advance, 1)
            await until(pilot, lambda: board.view is not view)
            now[0] += 0.5
            assert board.order == shown
        await pilot.press("f")  # the member on the row moved to, as it was shown
        await until(pilot, lambda: fake.commands_of(FreezeMembers))
        assert fake.commands_of(FreezeMembers)[-1] == FreezeMembers((shown[5],), True)
        # Once the user has stopped moving, a snapshot sorts again; the cursor goes with its member.
        now[0] += HOLD_SECONDS
        fake.on_thread(fake.advance, 2)
        await until(pilot, lambda: board.order != shown)
        assert board.cursor_member == shown[5]
