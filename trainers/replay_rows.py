"""The rows of a replay buffer that a checkpoint stores: the filled ones.

A buffer is allocated at its full capacity when a run starts and fills over the run, so a
checkpoint written early would otherwise be mostly zeros (a buffer of 1e8 transitions is
gigabytes while it holds thousands). A flashbax trajectory buffer that has not yet wrapped
holds rows 0 to `current_index` of each env and zeros after them (as `init` made them), so
the file keeps those rows only and reading it puts the zeros back: the state restored is the
one saved, array for array.

Works on host arrays of a `replay.ReplayState`: experience leaves (env, row, ...), or
(seed, env, row, ...) with several agents, whose counters then carry the seed axis, in a
checkpoint's layout; with a leading device axis on every leaf as training holds them (the
session cuts the rows before the copy a checkpoint makes).
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np


def _rows_axis(buffer: Any) -> int:
    """The experience leaves' row axis: after the seed axis (if any) and the env axis."""
    return np.ndim(buffer.is_full) + 1


def _capacity(buffer: Any) -> int:
    return np.shape(jax.tree.leaves(buffer.experience)[0])[_rows_axis(buffer)]


def filled_rows(buffer: Any, capacity: int) -> int:
    """Rows holding transitions in any agent's buffer of `capacity` rows per env: the most
    any agent holds. An agent that holds fewer (a population's frozen member) has zeros in
    the rows after its own, stored as they are."""
    per_agent = np.where(np.asarray(buffer.is_full), capacity, np.asarray(buffer.current_index))
    return int(np.max(per_agent))


def filled_part(replay: Any, capacity: int | None = None) -> tuple[Any, bool]:
    """`replay` (host arrays, in checkpoint layout or with a leading device axis as training
    holds them) with only the filled rows of its buffer, as views, and whether any were left
    out. `capacity`: the buffer's rows per env, where its arrays may have been cut already."""
    buffer = replay.buffer
    axis = _rows_axis(buffer)
    capacity = _capacity(buffer) if capacity is None else capacity
    rows = filled_rows(buffer, capacity)
    if rows >= capacity:
        return replay, False
    cut = lambda leaf: leaf[(slice(None),) * axis + (slice(0, rows),)]
    return replay.replace(buffer=buffer.replace(experience=jax.tree.map(cut, buffer.experience))), True


def full_capacity(stored: Any, template: Any) -> Any:
    """`stored` (a checkpoint's `filled_part`) with its buffer back at the capacity of
    `template`'s (a state of the same trainer, or its shapes), the rows after the filled
    ones zero. A leaf whose shape is not the filled part of the template's is left as it is,
    for the shape check that follows to name."""
    buffer, like = stored.buffer, template.buffer
    axis, capacity = _rows_axis(like), _capacity(like)
    rows = filled_rows(buffer, capacity)

    def restore(leaf, want):
        leaf = np.asarray(leaf)
        others = lambda shape: tuple(shape[:axis]) + tuple(shape[axis + 1:])
        if not (leaf.ndim == len(want.shape) and leaf.shape[axis] == rows < capacity
                and others(leaf.shape) == others(want.shape)):
            return leaf
        full = np.zeros(want.shape, want.dtype)  # untouched pages cost no memory until written
        full[(slice(None),) * axis + (slice(0, rows),)] = leaf
        return full

    if jax.tree.structure(buffer.experience) != jax.tree.structure(like.experience):
        return stored
    return stored.replace(buffer=buffer.replace(experience=jax.tree.map(restore, buffer.experience, like.experience)))


def emptied(replay: Any) -> Any:
    """`replay` with its buffer's transitions left out and its other counters kept (the
    gradient steps taken, the credit toward the next): written as a buffer that holds
    nothing, it is read back at its capacity, empty, and the run refills it."""
    buffer = replay.buffer
    buffer = buffer.replace(current_index=np.zeros_like(np.asarray(buffer.current_index)),
                            is_full=np.zeros_like(np.asarray(buffer.is_full)))
    return replay.replace(buffer=buffer)
