"""The dashboard's actions (`DashboardApp`'s share of them): the user's keys and palette
commands on the run (pause, resume, edit, checkpoint, rollback, stop, quit), on a
population's members (freeze, clone), and on the view (chart, side panel, screenshot,
help, watch), with the dialogs they open.

A key that cannot act now is hidden from the footer (`check_action`); pressing it, or its
palette command, says why (`rltui.ui.availability`).
"""

from __future__ import annotations

import os
import time

from rltui.formatting import fmt_hparam
from rltui.infra.owner_only import open_private
from rltui.runfiles.rundir import SCREENSHOT_PREFIX
from rltui.session import Pause, Resume, SaveCheckpoint, SessionState, SetHParams, Stop
from rltui.session.commands import CloneMember, FreezeMembers, Rollback
from rltui.ui import availability
from rltui.ui.screens import CloneDialog, HelpScreen, HParamEditor, QuitConfirm, StopRunConfirm
from rltui.ui.screens.clone import CloneChoice
from rltui.ui.session_handlers import LIVE
from rltui.ui.widgets import Leaderboard
from trainers.hparams import ALGO_HPARAMS


class DashboardActions:
    @property
    def is_live(self) -> bool:
        return self.session_state in LIVE and not self.quitting and self.pending != "stopping"

    @property
    def wants_paused(self) -> bool:
        """Paused, or asked to pause: what the next press of p should undo."""
        return self.pending == "pausing" or (self.session_state is SessionState.PAUSED and self.pending != "resuming")

    def applies(self, action: str) -> bool:
        return availability.applies(action, attached=self.attached)

    def unavailable_reason(self, action: str) -> str | None:
        if action in availability.VIEW_ACTIONS:
            return availability.view_unavailable_reason(
                action, num_seeds=self.config.num_seeds, population=self.dashboard.population)
        return availability.unavailable_reason(
            action, state=self.session_state, pending=self.pending, quitting=self.quitting
        )

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "explain":  # the fallback binding of a key whose action cannot act now
            (name,) = parameters
            return self.applies(str(name)) and self.unavailable_reason(str(name)) is not None
        if not self.applies(action):
            return False
        if action in availability.RUN_ACTIONS and self.unavailable_reason(action) is not None:
            return False  # hidden from the footer; its key's explain binding says why
        if action == "pause":
            return not self.wants_paused
        if action == "resume":
            return self.wants_paused
        return True

    def action_explain(self, action: str) -> None:
        self._refused(action)

    def _refused(self, action: str) -> bool:
        """Notify why `action` cannot act now, if it cannot: keys and palette commands
        that can do nothing say why rather than nothing."""
        reason = self.unavailable_reason(action)
        if reason is not None:
            self.notify(reason, title=availability.TITLES[action], timeout=4)
        return reason is not None

    def action_toggle_pause(self) -> None:
        if self._refused("pause"):
            return
        if self.wants_paused:
            self.action_resume()
        else:
            self.action_pause()

    def action_pause(self) -> None:
        self.session.submit(Pause())
        self.pending = "pausing"
        self._show_state()

    def action_resume(self) -> None:
        self.session.submit(Resume())
        self.pending = "resuming"
        self._show_state()

    def action_edit_hparams(self) -> None:
        if isinstance(self.screen, HParamEditor) or self._refused("edit_hparams"):
            return
        if not self.is_screen_installed("hparam-editor"):
            editor = HParamEditor(self.session.hparams.as_floats(), fields=ALGO_HPARAMS[self.config.algo])
            self.install_screen(editor, "hparam-editor")
        editor = self.get_screen("hparam-editor")
        members = self._edit_members = self.dashboard.edit_members
        values = self.session.hparams.as_floats()
        target = None
        if self.dashboard.population:
            target = "every member" if members is None else _members_text(members)
            view = self.latest.population if self.latest is not None else None
            if members is not None and view is not None:
                # The first selected member's own values (its swept ones differ from the run's).
                values.update(next((m.values for m in view.members if m.index == members[0]), {}))
        editor.prepare(values, target)
        self.push_screen(editor, self._edit_chosen)

    def _edit_chosen(self, change: dict[str, float] | None) -> None:
        if not change:
            return
        members = self._edit_members
        self.session.submit(SetHParams(change, members=members))
        text = ", ".join(f"{k} → {fmt_hparam(k, v)}" for k, v in change.items())
        if members is None:
            # The run's own values change (every member's): the panel shows them pending.
            self.pending_edits.update(change)
            self.dashboard.hparams_panel.pending = dict(self.pending_edits)
        else:
            text += f" for {_members_text(members)}"
        self.notify(f"{text} at the next chunk boundary", title="edit sent", timeout=3)

    # --- the leaderboard's requests (a population) -------------------------------------
    def on_leaderboard_freeze_requested(self, message: Leaderboard.FreezeRequested) -> None:
        if self._refused("freeze_members"):
            return
        self.session.submit(FreezeMembers(message.members, message.frozen))
        verb = "freezing" if message.frozen else "thawing"
        self.notify(f"{verb} {_members_text(message.members)} at the next chunk boundary", timeout=3)

    def on_leaderboard_clone_requested(self, message: Leaderboard.CloneRequested) -> None:
        if isinstance(self.screen, CloneDialog) or self._refused("clone_member"):
            return
        view = self.dashboard.leaderboard.view
        if view is None:
            return
        source = message.source

        def chosen(choice: CloneChoice | None) -> None:
            if choice is not None:
                self.session.submit(CloneMember(source, choice.targets, choice.factor))
                self.notify(f"member {source} into {_members_text(choice.targets)}, factor {choice.factor:g}, "
                            "at the next chunk boundary", title="clone sent", timeout=3)

        self.push_screen(CloneDialog(source, message.targets, len(view.members), view.keys), chosen)

    def action_save_checkpoint(self) -> None:
        if self._refused("save_checkpoint"):
            return
        self.session.submit(SaveCheckpoint())
        self.notify("Checkpoint requested: saved at the next chunk boundary.", timeout=3)

    def action_rollback(self) -> None:
        if not self._refused("rollback"):
            self.session.submit(Rollback())
            # Whether a checkpoint exists the session knows: it says so in the events if none does.
            kept = ("each member's values as the checkpoint holds them" if self.dashboard.population
                    else "hyperparameters are kept")
            self.notify(f"Rollback requested: to the latest checkpoint ({kept}).", timeout=3)

    def action_cycle_chart(self) -> None:
        self.dashboard.action_cycle_chart()

    def action_cycle_side_panel(self) -> None:
        self.dashboard.action_cycle_side_panel()

    def action_save_svg(self) -> None:
        # Earlier notes (a saved checkpoint, the last screenshot's path) are not part of
        # the dashboard: they go first, and the screenshot waits for a frame without them.
        self.clear_notifications()
        self.call_after_refresh(self._save_svg)

    def _save_svg(self) -> None:
        update = self.latest.update if self.latest is not None else 0
        name = f"{SCREENSHOT_PREFIX}u{update:06d}-{time.strftime('%H%M%S')}.svg"
        path = os.path.join(str(self.run_dir), name)
        try:
            with open_private(path, "w", encoding="utf-8") as out:  # a run's file: its owner's only
                out.write(self.export_screenshot())
        except OSError as err:
            self.notify(f"cannot save screenshot: {err}", severity="error")
            return
        self.notify(path, title="screenshot saved", timeout=4)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            keys = [*self.dashboard.BINDINGS, *(b for b in self.BINDINGS if b.show)]
            # One view key for the chart's curves: seeds, or a population's members.
            hidden = "toggle_seed_view" if self.dashboard.population else "toggle_member_view"
            keys = [b for b in keys if b.action != hidden]
            if self.dashboard.population:
                keys = [*Leaderboard.BINDINGS, *keys]
            self.push_screen(HelpScreen([b for b in keys if self.applies(b.action)]))

    def action_watch(self) -> None:
        """The watch view on the run's own env, playing its current parameters (copied by
        the session at a chunk boundary, or sent by an attached run on request); stepped in
        a worker thread, so neither the UI nor training waits for it."""
        from rltui.ui.screens.watch import LIVE_SPEED, WatchScreen
        from rltui.watch.live import live_imports, live_player

        if isinstance(self.screen, WatchScreen):
            return
        config, session = self.config, self.session
        module = live_imports(config)
        if module is not None:
            self.notify(f"watching imports the env module {module} (the run's env, {config.env}) into this process",
                        title="watch", timeout=6)

        def make_player(cancelled):
            return live_player(config, session, cancelled=cancelled, on_cpu=self.attached)

        self.push_screen(WatchScreen(make_player=make_player, speed=LIVE_SPEED,
                                     title=f"{config.env}: the policy as it trains"))

    def action_detach(self) -> None:
        """Leave an attached run; it goes on (run_dashboard closes the connection)."""
        self.exit()

    def action_stop_run(self) -> None:
        if not isinstance(self.screen, StopRunConfirm) and not self._refused("stop_run"):
            self.push_screen(StopRunConfirm(self.session_state, self.pending), self._stop_run_answered)

    def _stop_run_answered(self, stop: bool | None) -> None:
        if stop and self.is_live:
            # Stays open: the run's last states and events arrive before it closes.
            self.pending = "stopping"
            self.session.submit(Stop())
            self._show_state()

    async def action_quit(self) -> None:
        """q, ctrl+q and the palette's Quit: ask first while training runs; while the
        session is stopping, quit at once (run_dashboard still waits, bounded). An
        attached dashboard only detaches."""
        if self.attached:
            self.action_detach()
        elif not self.is_live:
            self.exit()
        elif not isinstance(self.screen, QuitConfirm):
            self.push_screen(QuitConfirm(self.session_state, self.pending), self._quit_answered)

    async def action_help_quit(self) -> None:
        """ctrl+c: Textual's own binding only notes which key quits; here it is that key,
        q (asks first while training runs; attached, detaches)."""
        await self.action_quit()

    def _quit_answered(self, stop: bool | None) -> None:
        if not stop:
            return
        # Stay up until the session has ended: one chunk (a fraction of a second), or the
        # rest of a compile, which XLA cannot interrupt. Exiting with the session thread
        # inside XLA would abort the interpreter at shutdown.
        self.quitting = True
        self.pending = "stopping"
        self.session.submit(Stop())
        self._show_state()
        if self.session_state is SessionState.COMPILING:
            self.notify("Stopping once the compile finishes. Press q again to quit at once.", timeout=30)


def _members_text(members) -> str:
    members = tuple(members)
    return ("member " if len(members) == 1 else "members ") + ", ".join(map(str, members))
