"""The CPU lowering of JAX's threefry hash that every rltui process installs
(`rltui.infra.unrolled_threefry`): the same bits as JAX's own, as straight-line code."""

import subprocess
import sys
import textwrap

import jax.numpy as jnp
import numpy as np
from jax.extend.random import threefry_2x32

from rltui.infra.unrolled_threefry import threefry2x32


def test_the_hash_gives_jaxs_bits_for_any_key_and_counter():
    rng = np.random.default_rng(0)
    for shape in [(), (1,), (7,), (3, 5), (1000,)]:
        key = rng.integers(0, 2**32, size=2, dtype=np.uint32)
        count = rng.integers(0, 2**32, size=(2, *shape), dtype=np.uint32)
        ours = threefry2x32(jnp.uint32(key[0]), jnp.uint32(key[1]), jnp.asarray(count[0]), jnp.asarray(count[1]))
        theirs = threefry_2x32(jnp.asarray(key), jnp.asarray(count.reshape(-1))).reshape(count.shape)
        np.testing.assert_array_equal(np.stack([np.asarray(w) for w in ours]), np.asarray(theirs))
    # The words that wrap around: all ones in the key and the counter.
    top = jnp.uint32(2**32 - 1)
    high, low = jnp.full((4,), top), jnp.arange(4, dtype=jnp.uint32)
    ours = threefry2x32(top, top, high, low)
    theirs = threefry_2x32(jnp.stack([top, top]), jnp.concatenate([high, low]))
    np.testing.assert_array_equal(np.concatenate([np.asarray(w) for w in ours]), np.asarray(theirs))


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
