"""Which build of the chunk program to run, decided by timing both on this machine.

XLA's CPU compiler orders a program's instructions for concurrency by default
(`xla_cpu_scheduler_type`), which suits batches whose ops split over several worker
threads; on small batches the pool hands the program between its threads at every call and
idle workers spin. The memory-optimised order is the other one XLA offers. Which runs a
chunk faster depends on the batch, the network, the worker pool and the machine, so
`choose` compiles both and times a short chunk of each, alternating (A, B, B, A), and keeps
the faster; the default build stays unless the other is clearly faster. Both builds
compute the same arithmetic, only independent instructions change places, so the results
do not depend on the choice (a test checks that they are bit-equal).

The choice is skipped (the default build, one compile) where it cannot matter: not on a
CPU, with a pool of one XLA CPU worker (nothing runs concurrently, so there is no
hand-over to avoid), in a multi-process run (every process must run the same schedule of
collectives), and when one update is too large for a call's boundaries to show: known
from the batch alone (MAX_SAMPLES samples per update, where timing would cost seconds),
or seen when one timed update takes longer than a timed chunk would."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

# The XLA option and the value that selects the alternative schedule.
SCHEDULER_OPTION = "xla_cpu_scheduler_type"


@dataclasses.dataclass(frozen=True)
class Build:
    name: str
    options: dict[str, Any]


DEFAULT = Build("concurrency-optimised", {})
ALTERNATIVE = Build("memory-optimised", {SCHEDULER_OPTION: "CPU_SCHEDULER_TYPE_MEMORY_OPTIMIZED"})

# The size of XLA's CPU worker pool, set by whoever started the backend and knows it
# (`rltui.runtime.start_backend`); None: not known, so the choice is timed.
cpu_workers: int | None = None

# Wall time of one timed chunk: long enough to hold the per-call effects a session's
# chunks see, short enough that four of them cost little at start-up.
PROBE_SECONDS = 0.1
# From this many samples (envs x steps x agents) per update, no timing: one update is long
# whatever the network, and each timed update would be work thrown away.
MAX_SAMPLES = 65536
# The alternative is kept only when its time per update is below this fraction of the
# default's: closer than that is within what a shared machine moves between two calls.
MARGIN = 0.97


@dataclasses.dataclass(frozen=True)
class Choice:
    """What `choose` decided and what deciding cost."""

    build: Build
    # Seconds per update of each build's best timed chunk (empty when skipped).
    per_update: dict[str, float]
    # Updates in each timed chunk (0 when skipped).
    probe_updates: int
    # Start-up time the choice added: the second compile and every chunk it ran.
    extra_seconds: float
    # Why the default was kept without timing, or "" when both were timed.
    skipped: str


def choose(
    compile_build: Callable[[Build], Any],
    run: Callable[[Any, int], None],
    *,
    max_updates: int,
    platform: str,
    process_count: int = 1,
    workers: int | None = None,
    samples_per_update: int = 0,
    timer: Callable[[], float] = time.perf_counter,
) -> tuple[Any, Choice]:
    """The program to run and the `Choice`. `compile_build(build)` returns a compiled
    program; `run(program, num_updates)` runs one chunk on a throwaway state and waits for
    it. `timer` is injectable so that tests can force timings."""
    default = compile_build(DEFAULT)
    if platform != "cpu":
        return default, Choice(DEFAULT, {}, 0, 0.0, f"not a CPU ({platform})")
    if process_count > 1:
        return default, Choice(DEFAULT, {}, 0, 0.0, "several processes")
    if workers == 1:
        return default, Choice(DEFAULT, {}, 0, 0.0, "one XLA CPU worker")
    if samples_per_update >= MAX_SAMPLES:
        return default, Choice(DEFAULT, {}, 0, 0.0, f"{samples_per_update} samples per update")
    start = timer()
    run(default, 1)  # pays the first call's one-off costs
    began = timer()
    run(default, 1)
    one = timer() - began
    if one >= PROBE_SECONDS:
        return default, Choice(DEFAULT, {}, 0, timer() - start, f"one update takes {one:.2f} s")
    programs = {DEFAULT.name: default, ALTERNATIVE.name: compile_build(ALTERNATIVE)}
    run(programs[ALTERNATIVE.name], 1)
    updates = max(1, min(max_updates, int(PROBE_SECONDS / max(one, 1e-6))))
    best = {name: float("inf") for name in programs}
    for name in (DEFAULT.name, ALTERNATIVE.name, ALTERNATIVE.name, DEFAULT.name):
        began = timer()
        run(programs[name], updates)
        best[name] = min(best[name], (timer() - began) / updates)
    chosen = ALTERNATIVE if best[ALTERNATIVE.name] < MARGIN * best[DEFAULT.name] else DEFAULT
    return programs[chosen.name], Choice(chosen, best, updates, timer() - start, "")
