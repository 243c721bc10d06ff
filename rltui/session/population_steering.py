"""The session's steering of a population (`PopulationSteering`, which a population's
session holds): divergent members, PBT at chunk boundaries, member edits, freezing and
cloning, and the population events that population.jsonl records.

Everything here runs on the session thread.
"""

from __future__ import annotations

from collections.abc import Callable

from rltui.session.backend import TrainingBackend
from rltui.session.commands import CloneMember, FreezeMembers
from rltui.session.events import SessionState
from rltui.session.params_service import ParamsService
from rltui.session.population import MemberState, Population, Replacement
from rltui.session.progress import TrainingProgress
from rltui.session.reporter import SessionReporter
from trainers.hparams import HParamError, check_changes, show_hparam
from trainers.metrics_spec import EPISODE_RETURN


class PopulationSteering:
    def __init__(self, population: Population, backend: TrainingBackend, progress: TrainingProgress,
                 reporter: SessionReporter, params: ParamsService, *, publish: Callable[[], None]):
        self._population = population
        self._backend = backend  # clones agents
        self._progress = progress
        self._reporter = reporter
        self._params = params  # told when an agent's state is replaced
        self._publish = publish  # a snapshot now: the table's changes show at once, even while paused

    def members_diverged(self, rows: list[dict]) -> bool:
        """Members whose update went non-finite are frozen at their last finite state and
        reported; the others go on. Only when none is left training does the run pause."""
        population = self._population
        for row in rows:
            returns = row.get("per_member", {}).get(EPISODE_RETURN)
            if returns:
                population.observe(returns)
        healthy = next((row["healthy"] for row in reversed(rows) if "healthy" in row), None)
        sick = population.mark_diverged(healthy) if healthy is not None else ()
        for member in sick:
            self.event(
                "diverged", f"member {member} ({population.describe(member)}) diverged: frozen at its last finite "
                f"state; the others go on", members=[member])
        return bool(sick) and population.all_stopped()

    def boundary(self) -> None:
        """At a chunk boundary: a PBT step if one is due; a pause once every member is frozen."""
        population = self._population
        updates_done = self._progress.updates_done
        if population.pbt_due(updates_done):
            replacements = population.pbt_step(updates_done)
            if replacements:
                self._backend.clone(population.agent_sources(replacements))
                self._params.state_replaced()
                self.event("pbt", _replaced(population, replacements), replacements=replacements)
            else:
                changeable = sum(m.state is not MemberState.FROZEN for m in population.view().members)
                why = ("fewer than 2 members are not frozen" if changeable < 2 else
                       "no member scored better than the ones it would replace (a tie, or no episode finished)")
                self.event("pbt_skipped", f"PBT step: {why}; nothing replaced")
        if population.all_stopped() and self._reporter.state is SessionState.RUNNING:
            self._reporter.event("paused", "every member is frozen: paused; thaw one (or resume) to go on")
            self._reporter.set_state(SessionState.PAUSED, "every member is frozen")

    def event(self, action: str, message: str, *, members: list[int] | None = None,
              replacements: list[Replacement] = (), **data) -> None:
        """An event of kind "population": what changed and the whole table after it, so that
        population.jsonl alone replays every member's lineage. `seq` numbers the changes of
        the history; a resume's line restates the table at its checkpoint and changes nothing."""
        population = self._population
        if action != "resumed" and population.changes is not None:
            population.changes += 1
        if population.changes is not None:
            data["seq"] = population.changes
        view = population.view()
        table = [{"member": m.index, "values": dict(population.values(m.index)), "state": m.state.value,
                  "parent": m.parent} for m in view.members]
        changes = [{"target": r.target, "source": r.source, "values": dict(r.values), "previous": dict(r.previous)}
                   for r in replacements]
        self._reporter.event("population", message, action=action, members=members, replacements=changes,
                             table=table, **data)

    def apply_hparams(self, changes: dict[str, object], members) -> None:
        """An edit of `members` (None: every member, and the run's own values too)."""
        population = self._population
        try:
            chosen = population.check_members(members)
            previous = population.set_values(changes, chosen)
        except HParamError as err:
            self._reporter.event("warning", f"edit refused: {err}")
            return
        values = check_changes(changes)
        progress = self._progress
        if members is None:  # every member: the run's own values too
            progress.hparams = progress.hparams.with_updates(values)
        progress.edits.append({"update": progress.updates_done, "changes": values, "members": list(chosen)})
        who = "every member" if members is None else "member" + ("s " if len(chosen) > 1 else " ") + ", ".join(
            map(str, chosen))
        text = ", ".join(f"{k} -> {show_hparam(k, v)}" for k, v in values.items())
        self._reporter.event("hparams", f"set {text} for {who}", changes=values, members=list(chosen),
                             previous={str(m): p for m, p in previous.items()})
        self.event("edit", f"set {text} for {who}", members=list(chosen))
        self._publish()  # the table's new values, shown at once even while paused

    def apply_command(self, command: FreezeMembers | CloneMember) -> None:
        population = self._population
        try:
            if isinstance(command, FreezeMembers):
                changed = population.set_frozen(command.members, command.frozen)
                verb = "froze" if command.frozen else "thawed"
                if changed:
                    self.event("freeze" if command.frozen else "thaw",
                               f"{verb} member{'s' if len(changed) > 1 else ''} "
                               f"{', '.join(map(str, changed))}", members=list(changed))
                if (not command.frozen and changed and self._reporter.state is SessionState.PAUSED
                        and self._progress.nonfinite):
                    self._progress.nonfinite = False
                if changed:
                    self._publish()
                return
            replacements = population.clone(command.source, command.targets, command.factor)
        except HParamError as err:
            self._reporter.event("warning", f"{type(command).__name__.lower()} refused: {err}")
            return
        self._backend.clone(population.agent_sources(replacements))
        self._params.state_replaced()
        self.event("clone", _replaced(population, replacements), replacements=replacements)
        self._publish()


def _replaced(population: Population, replacements: list[Replacement]) -> str:
    return "; ".join(
        f"member {r.target} <- member {r.source} ({population.describe(r.target)})" for r in replacements
    )
