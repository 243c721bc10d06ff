"""Which dashboard actions exist for a run, and why one cannot act on it now.

Pure functions of the dashboard's view of the run, kept apart from the App so the rules
read in one place: a key that cannot act is hidden from the footer, and pressing it (or
its palette command) says why rather than nothing. The same for a view key that has
nothing to show for the run (`b` with one seed).
"""

from __future__ import annotations

from rltui.session import SessionState

# Actions that exist only for a run this process owns, or only for an attached one.
OWNED_ONLY = frozenset({"quit"})
ATTACHED_ONLY = frozenset({"detach", "stop_run"})
# Actions on the run, titled for the note that says why one cannot act now.
RUN_ACTIONS = {
    "pause": "pause",
    "resume": "resume",
    "edit_hparams": "edit hyperparameters",
    "save_checkpoint": "save checkpoint",
    "rollback": "roll back",
    "stop_run": "stop the run",
    "freeze_members": "freeze members",
    "clone_member": "clone a member",
}


# Actions on the view that some runs have nothing for, titled alike.
VIEW_ACTIONS = {"toggle_seed_view": "seeds"}
TITLES = {**RUN_ACTIONS, **VIEW_ACTIONS}


def applies(action: str, *, attached: bool) -> bool:
    """Whether `action` (with or without its "app." namespace) exists for this kind of
    run: Quit for an owned one, Detach and Stop run for an attached one."""
    name = action.removeprefix("app.")
    return name not in (OWNED_ONLY if attached else ATTACHED_ONLY)


def unavailable_reason(action: str, *, state: SessionState, pending: str | None, quitting: bool) -> str | None:
    """Why `action` (one of RUN_ACTIONS) cannot act on the run now; None if it can.
    `pending`: a command sent and not yet seen done ("pausing", "resuming", "stopping")."""
    if quitting or pending == "stopping" or state is SessionState.STOPPING:
        return "The run is stopping."
    if state is SessionState.FINISHED:
        return "The run has ended."
    if state is SessionState.ERROR:
        return "The run stopped with an error."
    if action == "rollback" and (state is not SessionState.PAUSED or pending is not None):
        # Throws away the updates since the last checkpoint: only from a deliberate
        # (or divergence) pause, never in passing.
        if pending == "pausing":
            return "Pausing: roll back once the status line says paused."
        return "Pause first (p): rolling back discards the updates since the last checkpoint."
    return None


def view_unavailable_reason(action: str, *, num_seeds: int, population: bool) -> str | None:
    """Why `action` (one of VIEW_ACTIONS) has nothing to show for this run; None if it has."""
    if action == "toggle_seed_view" and num_seeds <= 1 and not population:
        return "This run trains one seed: b splits the return by seed when num_seeds > 1, by member in a population " \
               "(--sweep)."
    return None
