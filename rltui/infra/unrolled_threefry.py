"""The threefry hash behind every `jax.random` draw, lowered for the CPU as straight-line code
where it hashes a few words.

JAX lowers Threefry-2x32's twenty rounds as a five-trip loop on a CPU (a smaller program to
compile) and unrolled on every other platform. A training chunk hashes keys at every env
step and every gradient step, most hashes of a few words, where the loop's per-trip
overhead costs far more than the rounds themselves; unrolled, XLA fuses each hash into the
code around it. It is the same function, so every random bit stays the same
(tests/cli/test_unrolled_threefry.py checks it against JAX's own lowering and the
function's published test vectors). The program around the draws compiles differently,
though, and XLA may fuse float arithmetic differently with it, so bit-identical states
either way are expected of a trainer but not promised (benchmarks/threefry_lowering.py
compares them).

The hash is Threefry-2x32 with 20 rounds (Salmon et al., "Parallel random numbers: as easy as
1, 2, 3", SC 2011): a key schedule of the two key words and their parity with a constant, a
key injection after every four rounds, and per-round rotation amounts that alternate
between two sets of four."""

from __future__ import annotations

import math

import numpy as np

# Rotation amounts of Threefry-2x32's rounds: groups of four alternate between the two rows.
ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
# The key schedule's third word is the two key words' xor with this constant.
KEY_PARITY = np.uint32(0x1BD11BDA)
GROUPS = 5  # of four rounds each: twenty rounds


# Hashes of at most this many word pairs run unrolled; larger ones keep a loop over the five
# groups. Small hashes (a rollout step's keys and actions, a sampled batch's indices) gain
# the most unrolled. Large ones unrolled are fused into the float arithmetic they feed (a
# batch's Gaussian samples), which makes a chunk slower (docs/benchmarks.md).
UNROLLED_UP_TO = 128


def _rotate_left(word, amount):
    return (word << amount) | (word >> (np.uint32(32) - amount))


def _group(x0, x1, amounts, inject0, inject1):
    """Four rounds with rotation `amounts`, then the key injection (`inject0`, `inject1`)."""
    for amount in amounts:
        x0 = x0 + x1
        x1 = _rotate_left(x1, amount) ^ x0
    return x0 + inject0, x1 + inject1


def threefry2x32(k0, k1, x0, x1):
    """Threefry-2x32 of the counter words (`x0`, `x1`) under the key words (`k0`, `k1`), all
    uint32 arrays, broadcastable; returns the two hashed words. Unrolled up to
    UNROLLED_UP_TO word pairs, else a loop over the groups of rounds."""
    import jax.numpy as jnp
    from jax import lax

    schedule = (k0, k1, k0 ^ k1 ^ KEY_PARITY)
    x0, x1 = x0 + schedule[0], x1 + schedule[1]
    # A symbolic size (a shape-polymorphic export) is not known to be small: the loop.
    pairs = math.prod(jnp.broadcast_shapes(*(jnp.shape(w) for w in (k0, k1, x0, x1))))
    if isinstance(pairs, int) and pairs <= UNROLLED_UP_TO:
        for group in range(GROUPS):
            # After each group the schedule's words move round by one, with the group's count.
            x0, x1 = _group(x0, x1, [np.uint32(a) for a in ROTATIONS[group % 2]], schedule[(group + 1) % 3],
                            schedule[(group + 2) % 3] + np.uint32(group + 1))
        return x0, x1

    def looped(group, carry):
        x0, x1, s0, s1, s2, amounts, next_amounts = carry
        x0, x1 = _group(x0, x1, [amounts[i] for i in range(4)], s1, s2 + (group + 1).astype(jnp.uint32))
        return x0, x1, s1, s2, s0, next_amounts, amounts

    # The schedule's words trade places in the loop's carry, and each joins both counter
    # words, so all five take one shape.
    x0, x1, *schedule = jnp.broadcast_arrays(x0, x1, *schedule)
    carry = (x0, x1, *schedule, jnp.asarray(ROTATIONS[0], jnp.uint32), jnp.asarray(ROTATIONS[1], jnp.uint32))
    return tuple(lax.fori_loop(0, GROUPS, looped, carry)[:2])


_installed = False


def install() -> None:
    """Lower JAX's threefry primitive with `threefry2x32` on the CPU from now on, in this
    process (programs traced afterwards). Idempotent."""
    global _installed
    if _installed:
        return
    from jax.extend.random import threefry2x32_p
    from jax.interpreters import mlir

    mlir.register_lowering(threefry2x32_p, mlir.lower_fun(threefry2x32, multiple_results=True), platform="cpu")
    _installed = True
