"""The session's steering of a population (`TrainingSession`'s share of it): the per-agent
hyperparameters, divergent members, PBT at chunk boundaries, member edits, freezing and
cloning, and the population events that population.jsonl records.

A mixin of `TrainingSession`: it runs on the session thread and uses the session's
backend, events and snapshots.
"""

from __future__ import annotations

from rltui.session.commands import FreezeMembers
from rltui.session.events import SessionState
from rltui.session.population import MemberState, Population, Replacement
from trainers.hparams import DynamicHParams, HParamError, check_changes, show_hparam


class PopulationSteering:
    def _trainer_hparams(self) -> DynamicHParams:
        return self._hparams if self.population is None else self.population.trainer_hparams()

    def _members_diverged(self, rows: list[dict]) -> bool:
        """Members whose update went non-finite are frozen at their last finite state and
        reported; the others go on. Only when none is left training does the run pause."""
        population = self.population
        for row in rows:
            returns = row.get("per_member", {}).get("episode_return")
            if returns:
                population.observe(returns)
        healthy = next((row["healthy"] for row in reversed(rows) if "healthy" in row), None)
        sick = population.mark_diverged(healthy) if healthy is not None else ()
        for member in sick:
            self._population_event(
                "diverged", f"member {member} ({population.describe(member)}) diverged: frozen at its last finite "
                f"state; the others go on", members=[member])
        return bool(sick) and population.all_stopped()

    def _population_boundary(self) -> None:
        population = self.population
        if population.pbt_due(self._updates_done):
            replacements = population.pbt_step(self._updates_done)
            if replacements:
                self.backend.clone(population.agent_sources(replacements))
                self._params_version += 1
                self._population_event("pbt", _replaced(population, replacements), replacements=replacements)
            else:
                changeable = sum(m.state is not MemberState.FROZEN for m in population.view().members)
                why = ("fewer than 2 members are not frozen" if changeable < 2 else
                       "no member scored better than the ones it would replace (a tie, or no episode finished)")
                self._population_event("pbt_skipped", f"PBT step: {why}; nothing replaced")
        if population.all_stopped() and self.state is SessionState.RUNNING:
            self._event("paused", "every member is frozen: paused; thaw one (or resume) to go on")
            self._set_state(SessionState.PAUSED, "every member is frozen")

    def _population_event(self, action: str, message: str, *, members: list[int] | None = None,
                          replacements: list[Replacement] = (), **data) -> None:
        """An event of kind "population": what changed and the whole table after it, so that
        population.jsonl alone replays every member's lineage. `seq` numbers the changes of
        the history; a resume's line restates the table at its checkpoint and changes nothing."""
        population = self.population
        if action != "resumed" and population.changes is not None:
            population.changes += 1
        if population.changes is not None:
            data["seq"] = population.changes
        view = self.population.view()
        table = [{"member": m.index, "values": dict(self.population.values(m.index)), "state": m.state.value,
                  "parent": m.parent} for m in view.members]
        changes = [{"target": r.target, "source": r.source, "values": dict(r.values), "previous": dict(r.previous)}
                   for r in replacements]
        self._event("population", message, action=action, members=members, replacements=changes, table=table,
                    **data)

    def _apply_member_hparams(self, changes: dict[str, object], members) -> None:
        population = self.population
        try:
            chosen = population.check_members(members)
            previous = population.set_values(changes, chosen)
        except HParamError as err:
            self._event("warning", f"edit refused: {err}")
            return
        values = check_changes(changes)
        if members is None:  # every member: the run's own values too
            self._hparams = self._hparams.with_updates(values)
        self._edits.append({"update": self._updates_done, "changes": values, "members": list(chosen)})
        who = "every member" if members is None else "member" + ("s " if len(chosen) > 1 else " ") + ", ".join(
            map(str, chosen))
        text = ", ".join(f"{k} -> {show_hparam(k, v)}" for k, v in values.items())
        self._event("hparams", f"set {text} for {who}", changes=values, members=list(chosen),
                    previous={str(m): p for m, p in previous.items()})
        self._population_event("edit", f"set {text} for {who}", members=list(chosen))
        self._publish()  # the table's new values, shown at once even while paused

    def _apply_member_command(self, command) -> None:
        population = self.population
        if population is None:
            self._event("warning", f"{type(command).__name__}: this run is not a population")
            return
        try:
            if isinstance(command, FreezeMembers):
                changed = population.set_frozen(command.members, command.frozen)
                verb = "froze" if command.frozen else "thawed"
                if changed:
                    self._population_event("freeze" if command.frozen else "thaw",
                                           f"{verb} member{'s' if len(changed) > 1 else ''} "
                                           f"{', '.join(map(str, changed))}", members=list(changed))
                if not command.frozen and changed and self.state is SessionState.PAUSED and self.nonfinite:
                    self.nonfinite = False
                if changed:
                    self._publish()
                return
            replacements = population.clone(command.source, command.targets, command.factor)
        except HParamError as err:
            self._event("warning", f"{type(command).__name__.lower()} refused: {err}")
            return
        self.backend.clone(population.agent_sources(replacements))
        self._params_version += 1
        self._population_event("clone", _replaced(population, replacements), replacements=replacements)
        self._publish()


def _replaced(population: Population, replacements: list[Replacement]) -> str:
    return "; ".join(
        f"member {r.target} <- member {r.source} ({population.describe(r.target)})" for r in replacements
    )
