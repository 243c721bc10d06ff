"""What the dashboard's actions (`DashboardApp.action_*`) work out apart from the App:
the words for a population's members, the values an edit of some members starts from,
the keys the help lists, and the screenshot's file.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from textual.binding import Binding

from rltui.formatting import fmt_hparam
from rltui.infra.owner_only import open_private
from rltui.runfiles.names import SCREENSHOT_PREFIX
from rltui.session import MetricsSnapshot
from rltui.ui.widgets import Leaderboard
from rltui.ui.widgets.hparams import learned_instead


def members_text(members: Iterable[int]) -> str:
    members = tuple(members)
    return ("member " if len(members) == 1 else "members ") + ", ".join(map(str, members))


def edit_text(change: dict[str, float], values: dict[str, float]) -> str:
    """An edit as the dashboard says it was sent ("lr → 3e-4"), with what the run's `values`
    (the edit's included) set it aside for: SAC's alpha is used once autotune is off."""
    aside = " (used once autotune is off)"
    return ", ".join(f"{k} → {fmt_hparam(k, v)}" + (aside if learned_instead(k, values) else "")
                     for k, v in change.items())


def rollback_notice(*, population: bool) -> str:
    """What the dashboard says of a rollback sent: a request, since whether a checkpoint
    exists the session knows (its events say so if none does)."""
    kept = "each member's values as the checkpoint holds them" if population else "hyperparameters are kept"
    return f"Rollback requested: to the latest checkpoint ({kept})."


def edit_start_values(run_values: dict[str, float], members: Sequence[int] | None,
                      latest: MetricsSnapshot | None) -> dict[str, float]:
    """What the editor shows first for an edit of `members` (None: every member): the run's
    values, or the first selected member's own (its swept ones differ from the run's)."""
    view = latest.population if latest is not None else None
    if members is None or view is None:
        return run_values
    return {**run_values, **next((m.values for m in view.members if m.index == members[0]), {})}


def help_keys(screen_keys: Iterable[Binding], app_keys: Iterable[Binding], *, population: bool) -> list[Binding]:
    """The keys the help lists: the dashboard's, the App's shown ones, and a population's
    leaderboard keys; one view key for the chart's curves (seeds, or a population's members)."""
    hidden = "toggle_seed_view" if population else "toggle_member_view"
    keys = [b for b in (*screen_keys, *(b for b in app_keys if b.show)) if b.action != hidden]
    return [*Leaderboard.BINDINGS, *keys] if population else keys


def save_screenshot(run_dir: Path, update: int, svg: str) -> str:
    """Write a screenshot into the run directory, named by its update and time of day; its
    path. OSError if it cannot be written."""
    path = os.path.join(str(run_dir), f"{SCREENSHOT_PREFIX}u{update:06d}-{time.strftime('%H%M%S')}.svg")
    with open_private(path, "w", encoding="utf-8") as out:  # a run's file: its owner's only
        out.write(svg)
    return path
