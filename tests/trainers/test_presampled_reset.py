"""Steps fed with randomness drawn ahead (`draw_step`) are gymnax's own steps: the same flags
and counters, and the same floats up to rounding."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from trainers.envs import make_env

ENVS = 4


def _run(spec, keys, actions, presampled: bool):
    """Step `ENVS` envs through `keys` (time, env) with fixed actions, as a rollout feeds them
    (drawn ahead when the spec can); every output per step, and the final env state."""
    step = jax.vmap(spec.env.step, in_axes=(0, 0, 0, None))

    def body(state, xs):
        key, action = xs
        if presampled and spec.draw_step is not None:
            key = jax.vmap(spec.draw_step)(key)
        obs, state, reward, terminated, truncated, info = step(key, state, action, spec.params)
        return state, (obs, reward, terminated, truncated, info["final_observation"], info["returned_episode_returns"])

    _, env_state = jax.vmap(spec.env.reset, in_axes=(0, None))(
        jax.random.split(jax.random.PRNGKey(1), ENVS), spec.params
    )
    final_state, outputs = jax.jit(lambda: jax.lax.scan(body, env_state, (keys, actions)))()
    return outputs + tuple(jax.tree.leaves(final_state))


# DeepSea overrides gymnax's `step` (it carries episode totals across resets): it keeps its own.
@pytest.mark.parametrize(
    "env_id", ["CartPole-v1", "Pendulum-v1", "Breakout-MinAtar", "CartPole-v1-pomdp", "DeepSea-bsuite"]
)
def test_presampled_steps_equal_gymnax_steps_across_episode_ends(env_id):
    spec = make_env(env_id)
    assert (spec.draw_step is None) == (env_id == "DeepSea-bsuite")
    horizon = 210 if env_id == "Pendulum-v1" else 60  # Pendulum only ends by its 200-step limit
    keys = jax.random.split(jax.random.PRNGKey(0), (horizon, ENVS))
    shape = (horizon, ENVS) if spec.discrete else (horizon, ENVS, spec.num_actions)
    actions = jax.random.randint(jax.random.PRNGKey(2), shape, 0, spec.num_actions if spec.discrete else 1)
    actions = actions if spec.discrete else jnp.asarray(actions, jnp.float32) * 2.0 - 1.0

    ours = _run(spec, keys, actions, presampled=True)
    gymnax = _run(spec, keys, actions, presampled=False)

    terminated, truncated = gymnax[2], gymnax[3]
    assert int(jnp.sum(terminated | truncated)) >= ENVS  # every env restarted at least once, on average
    for mine, theirs in zip(ours, gymnax):
        mine, theirs = np.asarray(mine), np.asarray(theirs)
        if np.issubdtype(mine.dtype, np.floating):
            # Two programs: XLA may fuse the same float ops differently and round an ulp
            # apart on another CPU; a wrong reset state is off by far more than this.
            np.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-5)
        else:  # flags, counters, actions: exactly gymnax's
            np.testing.assert_array_equal(mine, theirs)


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Breakout-MinAtar", "CartPole-v1-pomdp", "DeepSea-bsuite"])
def test_a_no_reset_key_steps_as_a_plain_key_but_keeps_the_state_that_ended_the_episode(env_id):
    """Every built-in env takes a `NoResetKey` (the watch view steps with them): the same
    transition as the plain key's, and where the episode ends, no reset: the observation is
    the final one, and the state is not the reset one the plain step returns."""
    from trainers.step_keys import NoResetKey

    spec = make_env(env_id)
    horizon = 60
    keys = jax.random.split(jax.random.PRNGKey(0), (horizon, ENVS))
    actions = jax.random.randint(jax.random.PRNGKey(2), (horizon, ENVS), 0, spec.num_actions)
    step = jax.vmap(spec.env.step, in_axes=(0, 0, 0, None))

    def body(state, xs):
        key, action = xs
        plain = step(key, state, action, spec.params)
        kept = step(NoResetKey(key), state, action, spec.params)
        inner = lambda out: jax.tree.leaves(out[1].env_state)  # below the logging wrapper
        same = [jnp.all(jnp.equal(a, b).reshape(ENVS, -1), axis=1) for a, b in zip(inner(plain), inner(kept))]
        return plain[1], {
            "done": plain[3] | plain[4], "same_state": jnp.stack(same).all(axis=0),
            "reward": (plain[2], kept[2]), "terminated": (plain[3], kept[3]), "truncated": (plain[4], kept[4]),
            "obs": (plain[5]["final_observation"], kept[0]),
            "final_observation": (plain[5]["final_observation"], kept[5]["final_observation"]),
        }

    _, state = jax.vmap(spec.env.reset, in_axes=(0, None))(jax.random.split(jax.random.PRNGKey(1), ENVS), spec.params)
    _, out = jax.jit(lambda: jax.lax.scan(body, state, (keys, actions)))()
    out = jax.tree.map(np.asarray, out)
    done, same = out.pop("done"), out.pop("same_state")
    assert done.sum() >= ENVS
    for name, (plain, kept) in out.items():
        np.testing.assert_allclose(kept, plain, rtol=1e-5, atol=1e-5, err_msg=name)
    assert same[~done].all() and not same[done].any()
