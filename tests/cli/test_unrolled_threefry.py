"""The CPU lowering of JAX's threefry hash that every rltui process installs
(`rltui.infra.unrolled_threefry`): the same bits as JAX's own, as straight-line code."""

import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np

from rltui.infra.unrolled_threefry import UNROLLED_UP_TO, threefry2x32

# Threefry-2x32 with 20 rounds, the published known answers (Random123's test vectors):
# (key words, counter words) -> hashed words.
KNOWN_ANSWERS = [
    ((0x00000000, 0x00000000), (0x00000000, 0x00000000), (0x6B200159, 0x99BA4EFE)),
    ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
    ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0)),
]


def spec_hash(k0, k1, x0, x1):
    """Threefry-2x32-20 as the spec writes it, in numpy (uint32 arithmetic wraps)."""
    with np.errstate(over="ignore"):  # wrapping is the point
        return _spec_rounds(k0, k1, x0, x1)


def _spec_rounds(k0, k1, x0, x1):
    rotations = [13, 15, 26, 6, 17, 29, 16, 24]
    ks = [k0, k1, k0 ^ k1 ^ np.uint32(0x1BD11BDA)]
    x0, x1 = x0 + ks[0], x1 + ks[1]
    for round_ in range(20):
        r = np.uint32(rotations[round_ % 8])
        x0 = x0 + x1
        x1 = ((x1 << r) | (x1 >> (np.uint32(32) - r))) ^ x0
        if round_ % 4 == 3:
            s = round_ // 4 + 1
            x0, x1 = x0 + ks[s % 3], x1 + ks[(s + 1) % 3] + np.uint32(s)
    return x0, x1


def test_the_hash_gives_the_published_answers_unrolled_and_looped():
    for key, count, answer in KNOWN_ANSWERS:
        for pairs in (1, UNROLLED_UP_TO + 1):  # either side of the unrolled limit
            words = [jnp.full((pairs,), w, jnp.uint32) for w in count]
            hashed = threefry2x32(jnp.uint32(key[0]), jnp.uint32(key[1]), *words)
            assert [np.unique(np.asarray(w)).tolist() for w in hashed] == [[answer[0]], [answer[1]]]
    assert [int(w) for w in spec_hash(*(np.uint32(w) for w in (0, 0, 0, 0)))] == list(KNOWN_ANSWERS[0][2])


def test_the_hash_matches_the_spec_for_any_key_counter_and_shape():
    rng = np.random.default_rng(0)
    shapes = [(), (1,), (7,), (3, 5), (UNROLLED_UP_TO,), (UNROLLED_UP_TO + 1,), (1000,)]
    for shape in shapes:
        k0, k1 = rng.integers(0, 2**32, size=(2, *shape), dtype=np.uint32)  # a key per word pair, as vmap gives
        x0, x1 = rng.integers(0, 2**32, size=(2, *shape), dtype=np.uint32)
        for hash_ in (threefry2x32, jax.jit(threefry2x32)):
            ours = hash_(*(jnp.asarray(w) for w in (k0, k1, x0, x1)))
            np.testing.assert_array_equal(np.stack([np.asarray(w) for w in ours]), np.stack(spec_hash(k0, k1, x0, x1)))
    # One key for many counters, as an unbatched draw gives.
    x0, x1 = rng.integers(0, 2**32, size=(2, 300), dtype=np.uint32)
    ours = threefry2x32(jnp.uint32(5), jnp.uint32(9), jnp.asarray(x0), jnp.asarray(x1))
    np.testing.assert_array_equal(np.stack([np.asarray(w) for w in ours]),
                                  np.stack(spec_hash(np.uint32(5), np.uint32(9), x0, x1)))


def test_a_shape_polymorphic_export_still_traces():
    """A symbolic size is not known to be small: the loop, not a failure."""
    from rltui.infra import unrolled_threefry

    unrolled_threefry.install()
    program = jax.jit(lambda key, x: jax.random.uniform(key, x.shape))
    (batch,) = jax.export.symbolic_shape("b")
    exported = jax.export.export(program, platforms=["cpu"])(
        jax.ShapeDtypeStruct((2,), jnp.uint32), jax.ShapeDtypeStruct((batch,), jnp.float32))
    draws = exported.call(jax.random.PRNGKey(0), jnp.zeros(5))
    assert draws.shape == (5,) and np.all((np.asarray(draws) >= 0) & (np.asarray(draws) < 1))


DRAWS = textwrap.dedent("""
    import jax, numpy as np
    from rltui.infra import runtime

    def small(key):  # hashes of at most UNROLLED_UP_TO word pairs
        a, b = jax.random.split(jax.random.fold_in(key, 3))
        return (jax.random.uniform(a, (33,)), jax.random.randint(b, (5,), 0, 9), jax.random.normal(a, (2, 3)),
                jax.random.permutation(b, 50), jax.random.split(key, 4))

    def draws(key):
        keys = jax.random.split(key, 300)  # a vmapped draw hashes under a key per row
        return (small(key), jax.random.bits(key, (1001,)), jax.random.normal(key, (300,)),
                jax.vmap(lambda k: jax.random.uniform(k, (3,)))(keys), jax.vmap(small)(keys[:7]))

    key = jax.random.PRNGKey(12)
    loops = lambda: jax.jit(lambda k: small(k)).lower(key).as_text().count("stablehlo.while")
    before, looped = jax.tree.map(np.asarray, jax.jit(lambda k: draws(k))(key)), loops()
    runtime.configure_jax(host_devices=0, compile_cache=False)
    after, unrolled = jax.tree.map(np.asarray, jax.jit(lambda k: draws(k))(key)), loops()
    assert looped > 0 and unrolled == 0, (looped, unrolled)
    assert all((x == y).all() for x, y in zip(jax.tree.leaves(before), jax.tree.leaves(after)))
    print("same bits")
""")


def test_an_rltui_process_draws_the_same_bits_and_small_draws_without_a_loop():
    """`configure_jax` installs the lowering: programs traced afterwards have no threefry loop
    for small draws, and every draw, small or large, is exactly what it was before (in a
    process of its own: the lowering is process-wide)."""
    done = subprocess.run([sys.executable, "-c", DRAWS], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "same bits" in done.stdout
