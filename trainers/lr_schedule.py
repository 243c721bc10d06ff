"""The schedules a resume can change, as the host sees them: the learning rate an update
trains at and the exploration rate epsilon it acts at (a Q-learner's), by the formulas the
compiled step uses (`trainers.hparams.annealed_rate`, `algorithms.pqn.losses.epsilon`), and
the line a resume says when it changes either."""

from __future__ import annotations

import math
from collections.abc import Mapping

from trainers.hparams import annealed_rate


def rate_at(hparams: Mapping[str, float], index: int) -> float:
    """The learning rate of the update with 0-based `index` under `hparams` (plain floats)."""
    return float(annealed_rate(float(hparams.get("lr", 0.0)), float(hparams.get("anneal_lr", 0.0)),
                               float(hparams.get("anneal_updates", 1.0)), float(index)))


def schedule_notice(metadata: dict, now: Mapping[str, float], update: int, *, members: bool = False) -> str | None:
    """One line when a resume from the checkpoint of `update` (its `metadata`) under the
    hyperparameters `now` changes the rate the next update trains at (a new total_timesteps
    stretches the annealing, a new lr or anneal_lr): the rate before and after, and where
    the schedule goes; None when it goes on as it was. `members`: a population's, whose
    members' rates change alike."""
    saved = {k: v for k, v in (metadata.get("hparams") or {}).items() if isinstance(v, (int, float))}
    if "lr" not in saved:
        return None
    before, after = rate_at(saved, update), rate_at(now, update)
    if math.isclose(before, after, rel_tol=1e-6, abs_tol=1e-12):
        return None
    last = f" (update {update:,} trained at {rate_at(saved, update - 1):.3g})" if update > 0 else ""
    if float(now.get("anneal_lr", 0.0)) > 0:
        end = int(now.get("anneal_updates", 1))
        where = f", annealing linearly to 0 at update {end:,}, as a run planned for that total from the start would"
    else:
        where = ", constant from then on"
    alike = "; each member's rate changes alike" if members else ""
    return f"the learning rate schedule changes: update {update + 1:,} trains at {after:.3g}{last}{where}{alike}"


def epsilon_at(hparams: Mapping[str, float], index: int) -> float:
    """Epsilon of the update with 0-based `index` under `hparams` (plain floats)."""
    import numpy as np

    from trainers.algorithms.pqn.losses import epsilon

    return float(epsilon(float(hparams["eps_start"]), float(hparams["eps_end"]), float(hparams["eps_decay"]),
                         float(hparams.get("anneal_updates", 1.0)), float(index), xp=np))


def epsilon_notice(metadata: dict, now: Mapping[str, float], update: int, *, members: bool = False) -> str | None:
    """One line when a resume from the checkpoint of `update` (its `metadata`) under the
    hyperparameters `now` changes the epsilon the next update explores at (a new
    total_timesteps stretches the decay, or a new eps_start, eps_end or eps_decay): epsilon
    before and after, and where the decay goes; None when it goes on as it was, or the run
    has no epsilon. `members`: as `schedule_notice`."""
    from trainers.algorithms import ALGORITHMS

    names = ("eps_start", "eps_end", "eps_decay")
    explores = ALGORITHMS.get(metadata.get("trainer"))
    if explores is None or not any(key.name == "eps_start" for key in explores.keys):
        return None  # an algorithm without epsilon: its hyperparameters carry the keys unused
    saved = {k: v for k, v in (metadata.get("hparams") or {}).items() if isinstance(v, (int, float))}
    if any(name not in saved or name not in now for name in names):
        return None
    before, after = epsilon_at(saved, update), epsilon_at(now, update)
    if math.isclose(before, after, rel_tol=1e-6, abs_tol=1e-9):
        return None
    last = f" (update {update:,} explored at {epsilon_at(saved, update - 1):.3g})" if update > 0 else ""
    end = max(1, int(float(now["eps_decay"]) * float(now.get("anneal_updates", 1.0))))
    if end > update:
        way = "falling" if float(now["eps_end"]) < float(now["eps_start"]) else "rising"
        where = (f", {way} linearly to {float(now['eps_end']):.3g} at update {end:,}, as a run planned for that "
                 f"total from the start would")
    else:
        where = ", constant from then on"
    alike = "; each member's epsilon changes alike" if members else ""
    start = f"the exploration schedule changes: update {update + 1:,} explores at epsilon {after:.3g}"
    return f"{start}{last}{where}{alike}"
