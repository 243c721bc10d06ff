"""An env rltui resets (a suite's or the user's own) restarts an ended episode from one
state per env drawn at the start of each rollout: its reset runs once per env and rollout,
not on every step."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct
from gymnax.environments import spaces

from trainers import networks
from trainers.env_import import register_env
from trainers.envs import make_env
from trainers.rollout import reset_envs, rollout

ENVS = 4
STEPS = 12
EPISODE = 3  # every episode lasts 3 steps: each env ends 4 in a rollout of 12


@struct.dataclass
class MarkerState:
    marker: jax.Array
    time: jax.Array


class Marker:
    """Each reset draws a marker from its key, shown in the observation with the time, so
    that the observation after an episode's end tells which reset the env restarted from.
    Episodes whose marker is below 0.5 terminate, the others are truncated. Every executed
    reset is counted on the host."""

    def __init__(self):
        self.resets = 0
        self.default_params = None

    def _count(self, marker):
        self.resets += int(np.size(marker))

    def reset(self, key, params):
        marker = jax.random.uniform(key)
        jax.debug.callback(self._count, marker)
        return jnp.stack([marker, 0.0]), MarkerState(marker, jnp.int32(0))

    def step(self, key, state, action, params):
        time = state.time + 1
        ended = time >= EPISODE
        obs = jnp.stack([state.marker, time.astype(jnp.float32)])
        low = state.marker < 0.5
        return obs, MarkerState(state.marker, time), jnp.float32(1.0), ended & low, ended & ~low, {}

    def observation_space(self, params):
        return spaces.Box(0.0, 1.0, (2,))

    def action_space(self, params):
        return spaces.Discrete(2)


def _apply(params, obs):
    """A uniform policy: the env does not read the action."""
    n = obs.shape[0]
    return networks.PolicyOutputs(jnp.zeros((n, 2)), jnp.zeros(()), jnp.zeros(n))


@pytest.fixture(scope="module")
def marker():
    env = Marker()
    return env, make_env(register_env(env))


def _run(spec, env_state, obs, key, env_ids=None):
    ids = jnp.arange(ENVS) if env_ids is None else env_ids
    run = jax.jit(lambda s, o, k: rollout(
        None, s, o, k, ids, num_global_envs=ENVS, spec=spec, apply_fn=_apply, num_steps=STEPS
    ))
    return jax.block_until_ready(run(env_state, obs, key))


def _start(spec):
    return reset_envs(jax.random.PRNGKey(0), jnp.arange(ENVS), ENVS, spec)


def test_a_rollout_runs_the_envs_reset_once_per_env_not_on_every_step(marker):
    env, spec = marker
    assert spec.draw_restarts is not None and spec.draw_step is None
    env_state, obs = _start(spec)
    jax.block_until_ready(obs)
    before = env.resets
    run = _run(spec, env_state, obs, jax.random.PRNGKey(1))
    done = np.asarray(run.traj.terminated | run.traj.truncated)
    assert done.sum() == ENVS * (STEPS // EPISODE)  # every env ended 4 episodes...
    assert env.resets - before == ENVS  # ...and its reset ran once
    _run(spec, run.env_state, run.obs, jax.random.PRNGKey(2))
    assert env.resets - before == 2 * ENVS  # once more per env for the next rollout


def test_ended_episodes_restart_from_the_state_their_rollout_drew(marker):
    _, spec = marker
    env_state, obs = _start(spec)
    first = _run(spec, env_state, obs, jax.random.PRNGKey(1))
    second = _run(spec, first.env_state, first.obs, jax.random.PRNGKey(2))
    start_markers = np.asarray(obs)[:, 0]
    drawn = []
    for run in (first, second):
        traj = run.traj
        done = np.asarray(traj.terminated | traj.truncated)
        after = np.concatenate([np.asarray(traj.obs)[1:], np.asarray(run.obs)[None]])  # each step's next obs
        final = np.asarray(traj.final_obs)
        restarted = after[done]  # (episodes, 2)
        np.testing.assert_array_equal(restarted[:, 1], 0.0)  # a fresh episode's first observation
        np.testing.assert_array_equal(final[done][:, 1], EPISODE)  # the final observation comes before it
        markers = after[:, :, 0]
        for e in range(ENVS):
            mine = markers[done[:, e], e]
            assert np.all(mine == mine[0])  # both restarts of a rollout: the same drawn state
        drawn.append(markers[-1])  # the last step ends an episode: each env's drawn marker
        terminated, truncated = np.asarray(traj.terminated), np.asarray(traj.truncated)
        assert not np.any(terminated & truncated)
        np.testing.assert_array_equal(truncated[done], final[done][:, 0] >= 0.5)  # kept apart, as the env says
    assert not np.any(np.isclose(drawn[0], start_markers))  # fresh, not the episode's first state
    assert not np.any(np.isclose(drawn[0], drawn[1]))  # fresh for each rollout
    assert len(set(np.round(drawn[0], 6))) == ENVS  # and its own for each env


def test_restarts_come_from_the_rollouts_key_alone(marker):
    """The same rollout whatever restart state the env state carries in (a checkpoint's
    resumes exactly) and however the envs are split over devices."""
    _, spec = marker
    env_state, obs = _start(spec)
    run = _run(spec, env_state, obs, jax.random.PRNGKey(1))
    again = _run(spec, env_state, obs, jax.random.PRNGKey(1))
    inner = env_state.env_state
    stale_state = inner.restart_state.replace(marker=inner.restart_state.marker + 7.0)
    stale = env_state.replace(env_state=inner._replace(restart_obs=inner.restart_obs + 7.0, restart_state=stale_state))
    from_stale = _run(spec, stale, obs, jax.random.PRNGKey(1))
    halves = [
        _run(spec, jax.tree.map(lambda x: x[ids], env_state), obs[ids], jax.random.PRNGKey(1), jnp.asarray(ids))
        for ids in (np.arange(2), np.arange(2, ENVS))
    ]
    for other in (again, from_stale):
        for a, b in zip(jax.tree.leaves(run.traj), jax.tree.leaves(other.traj)):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    split_obs = np.concatenate([np.asarray(h.traj.obs) for h in halves], axis=1)
    np.testing.assert_allclose(split_obs, np.asarray(run.traj.obs), rtol=1e-6)


def test_stepping_with_plain_keys_restarts_from_a_reset_of_each_step(marker):
    """Evaluation, check-env and watching step with plain keys: an ended episode restarts
    from a reset drawn from that step's key."""
    env, spec = marker
    _, env_state = jax.vmap(spec.env.reset, in_axes=(0, None))(jax.random.split(jax.random.PRNGKey(0), 2), None)
    step = jax.jit(jax.vmap(spec.env.step, in_axes=(0, 0, 0, None)))
    markers = []
    for i in range(2 * EPISODE):
        obs, env_state, *_ = step(jax.random.split(jax.random.PRNGKey(i), 2), env_state, jnp.zeros(2, jnp.int32), None)
        markers.append(np.asarray(obs)[:, 0])
    assert not np.any(np.isclose(markers[EPISODE - 1], markers[2 * EPISODE - 1]))  # two different resets
