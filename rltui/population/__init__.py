"""Populations: several differently configured agents trained in one compiled program.

`sweep` turns the `sweep` table into members (plain Python and NumPy, checked before JAX
starts); `memory` estimates the device memory of a run's agents (a population's, or a single
run's one) and of `rltui eval`'s episodes, and refuses what does not fit (imports JAX when
called).
"""

from rltui.population.sweep import MAX_AGENTS, Sweep, pbt_replace_count, plan_sweep

__all__ = ["MAX_AGENTS", "Sweep", "pbt_replace_count", "plan_sweep"]
