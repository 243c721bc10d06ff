"""The learning-rate schedule as the host sees it: the rate an update trains at, by the
formula the compiled step uses (`trainers.hparams.annealed_rate`), and the line a resume says
when it changes that rate."""

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
