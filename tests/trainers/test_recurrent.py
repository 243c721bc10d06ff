"""network = "gru": hidden state per env, reset at episode ends, replayed exactly in the update."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from trainers import checkpoint, networks, recurrent
from trainers.evaluate import evaluate
from trainers.hparams import DynamicHParams, StaticConfig
from trainers.parallel import DataParallel
from trainers.parallel import build as parallel_build

from helpers import TINY, build, count_compiles, edit_every_hparam, host_metrics

# 4 envs x 64 steps in one minibatch: the first-minibatch test needs one minibatch and
# steps enough to end an episode in every update; every test here shares this trainer.
GRU = StaticConfig(**{**TINY, "num_envs": 4, "num_steps": 64, "num_minibatches": 1, "network": "gru",
                      "max_chunk_updates": 32})
MLP = StaticConfig(**{**TINY, "num_envs": 4})


def single_device(state):
    return jax.tree.map(lambda x: x[0], state)


def run_rollout(trainer, state, hidden, obs, num_steps):
    """The trainer's recurrent rollout on one device, outside pmap (all envs are local)."""
    ids = jnp.arange(trainer.static.num_envs)
    fn = jax.jit(
        lambda params, env_state, obs, hidden, key: recurrent.recurrent_rollout(
            params, env_state, obs, hidden, key, ids, num_global_envs=trainer.static.num_envs,
            spec=trainer.spec, step_fn=trainer.policy_step, num_steps=num_steps,
        )
    )
    return fn(state.params, state.env_state, obs, hidden, state.key)


def test_an_envs_hidden_state_never_influences_another_env():
    parallel, state, _ = build(GRU)
    trainer, state = parallel.trainer, single_device(state)
    hidden = jax.random.normal(jax.random.PRNGKey(1), state.hidden.shape)
    base = run_rollout(trainer, state, hidden, state.obs, 64)
    j = 2
    poked = run_rollout(trainer, state, hidden.at[j].set(-hidden[j]), state.obs.at[j].add(0.5), 64)
    _, _, _, _, traj, step_hidden = base
    _, _, _, _, traj2, step_hidden2 = poked
    for name in ("action", "log_prob", "value", "reward", "terminated", "truncated"):
        a, b = np.asarray(getattr(traj, name)), np.asarray(getattr(traj2, name))
        others = [i for i in range(GRU.num_envs) if i != j]
        np.testing.assert_array_equal(a[:, others], b[:, others], err_msg=name)
    assert not np.array_equal(np.asarray(traj.log_prob[:, j]), np.asarray(traj2.log_prob[:, j]))
    np.testing.assert_array_equal(np.delete(np.asarray(step_hidden), j, 1), np.delete(np.asarray(step_hidden2), j, 1))

    # and in the update's replay
    done = traj.terminated | traj.truncated
    replay = jax.jit(trainer.sequence_outputs)
    out = replay(state.params, traj.obs, done, hidden)
    out2 = replay(state.params, traj.obs, done, hidden.at[j].set(-hidden[j]))
    np.testing.assert_array_equal(np.delete(np.asarray(out[2]), j, 1), np.delete(np.asarray(out2[2]), j, 1))


REPLAY_ROUNDING = 1e-4


def test_replay_reproduces_the_rollouts_log_probs_and_values():
    """Re-running the GRU over each env's stored sequence, from the segment's start state
    with the same resets, gives the rollout's outputs: also per minibatch of envs.

    The replay is another program than the rollout (a sequence scan, other batch shapes), so
    its float32 sums round in another order, more so on another CPU, and rounding carries
    through 100 recurrent steps: 1e-4 allows for that and stays ten times below what a
    missing reset or a wrong start state gives (the controls below, over 1e-3)."""
    parallel, state, _ = build(GRU)
    trainer, state = parallel.trainer, single_device(state)
    start = jax.random.normal(jax.random.PRNGKey(2), state.hidden.shape)
    _, _, _, _, traj, step_hidden = run_rollout(trainer, state, start, state.obs, 100)
    done = traj.terminated | traj.truncated
    assert done.any(axis=0).sum() >= 2  # episodes ended mid-rollout: the resets are exercised

    def log_probs_values(obs, done, start, action):
        policy_out, log_std, value = trainer.sequence_outputs(state.params, obs, done, start)
        return networks.log_prob(policy_out, log_std, action, trainer.spec.discrete), value

    log_prob, value = jax.jit(log_probs_values)(traj.obs, done, start, traj.action)
    np.testing.assert_allclose(log_prob, traj.log_prob, atol=REPLAY_ROUNDING)
    np.testing.assert_allclose(value, traj.value, atol=REPLAY_ROUNDING)

    # The update's minibatches: whole env sequences with their own start states.
    indices = recurrent.env_minibatches(jax.random.PRNGKey(3), jnp.arange(4), 4, 2)
    assert sorted(np.asarray(indices).ravel().tolist()) == [0, 1, 2, 3]
    (obs, mb_done, action), mb_start = recurrent.split_by_env((traj.obs, done, traj.action), start, indices)
    for m in range(2):
        mb_log_prob, mb_value = jax.jit(log_probs_values)(obs[m], mb_done[m], mb_start[m], action[m])
        np.testing.assert_allclose(mb_log_prob, traj.log_prob[:, indices[m]], atol=REPLAY_ROUNDING)
        np.testing.assert_allclose(mb_value, traj.value[:, indices[m]], atol=REPLAY_ROUNDING)

    # Controls: without the resets, or from zeros instead of the stored start, it differs.
    no_reset, _ = jax.jit(log_probs_values)(traj.obs, jnp.zeros_like(done), start, traj.action)
    assert np.max(np.abs(np.asarray(no_reset - traj.log_prob))) > 1e-3
    from_zero, _ = jax.jit(log_probs_values)(traj.obs, done, jnp.zeros_like(start), traj.action)
    assert np.max(np.abs(np.asarray(from_zero - traj.log_prob))) > 1e-3


def _first_minibatch_kl(parallel: DataParallel):
    hp = DynamicHParams.create(lr=1e-2, anneal_lr=0.0)  # a policy that soon depends on its memory
    state, metrics = parallel.run_chunk(parallel.init(parallel.seed_keys(0), hp), hp, 20)
    return host_metrics(metrics)


def test_first_minibatch_of_the_update_sees_the_rollout_policy(monkeypatch):
    """One epoch, one minibatch: the loss is computed before any step, so the replayed
    log-probs equal the rollout's: ratio 1, approx_kl 0, nothing clipped. A replay that
    ignores the resets is caught."""
    m = _first_minibatch_kl(build(GRU)[0])
    assert np.all(m["episodes"][1:] > 0)
    assert np.all(np.abs(m["approx_kl"]) < 1e-7), m["approx_kl"]
    assert np.all(m["clip_frac"] == 0)

    replay = recurrent.replay
    monkeypatch.setattr(recurrent, "replay", lambda f, p, s, o, d: replay(f, p, s, o, jnp.zeros_like(d)))
    broken = _first_minibatch_kl(parallel_build(GRU, jax.local_devices()[:1]))  # not the shared trainer
    assert np.mean(broken["approx_kl"][-10:]) > 1e-5


def test_hidden_state_is_carried_across_chunks_and_reset_at_episode_ends():
    parallel, state, hp = build(GRU)
    state, _ = parallel.run_chunk(state, hp, 2)
    assert np.any(np.asarray(state.hidden) != 0)  # carried from the last rollout, not zeroed
    trainer, single = parallel.trainer, single_device(state)
    _, _, last_hidden, _, traj, _ = run_rollout(trainer, single, single.hidden, single.obs, 100)
    ended = np.asarray(traj.terminated[-1] | traj.truncated[-1])
    np.testing.assert_array_equal(np.all(np.asarray(last_hidden) == 0, axis=-1), ended)


def test_hparam_edits_do_not_recompile_the_gru_trainer():
    parallel, state, hp = build(GRU, fresh=True)
    state, _ = parallel.run_chunk(state, hp, 2)
    with count_compiles() as compiles:
        for edited in edit_every_hparam(hp):
            state, metrics = parallel.run_chunk(state, edited, 1)
        state, metrics = parallel.run_chunk(state, edited, 3)
        jax.block_until_ready(metrics)
    assert compiles.count == 0


def test_gru_checkpoint_round_trip_continues_bit_exactly():
    """Bit-exact on the same machine: both continuations run the same compiled program here."""
    parallel, state, hp = build(GRU)
    state, _ = parallel.run_chunk(state, hp, 3)
    portable = checkpoint.to_portable(state)
    assert portable.hidden.shape == (GRU.num_envs, GRU.hidden_sizes[0]) and np.any(portable.hidden != 0)
    data = checkpoint.encode(portable, {})
    restored, _ = checkpoint.decode(data, portable)
    for a, b in zip(jax.tree.leaves(portable), jax.tree.leaves(restored)):
        np.testing.assert_array_equal(a, b)

    state, straight = parallel.run_chunk(parallel.put(checkpoint.from_portable(portable, 1), like=state), hp, 3)
    with count_compiles() as compiles:
        placed = parallel.put(checkpoint.from_portable(restored, 1), like=state)
        _, resumed = parallel.run_chunk(placed, hp, 3)
        jax.block_until_ready(resumed)
    assert compiles.count == 0
    for key, values in host_metrics(straight).items():
        np.testing.assert_array_equal(values, host_metrics(resumed)[key], err_msg=key)

    # a checkpoint of the MLP does not fit the GRU trainer, and the reverse
    mlp, mlp_state, _ = build(MLP)
    mlp_portable = checkpoint.to_portable(mlp_state)
    with pytest.raises(checkpoint.CheckpointError, match="does not fit"):
        checkpoint.decode(checkpoint.encode(mlp_portable, {}), portable)
    with pytest.raises(checkpoint.CheckpointError, match="does not fit"):
        checkpoint.decode(data, mlp_portable)


def test_reinforce_trains_a_gru_policy():
    static = StaticConfig(**{**TINY, "num_envs": 4, "num_steps": 64, "algo": "reinforce", "network": "gru"})
    parallel, state, hp = build(static)
    before = jax.tree.map(np.asarray, parallel.unreplicate(state.params))
    state, metrics = parallel.run_chunk(state, hp, 3)
    m = host_metrics(metrics)
    assert np.all(np.isfinite(m["policy_loss"])) and np.all(np.isfinite(m["approx_kl"]))
    after = jax.tree.map(np.asarray, parallel.unreplicate(state.params))
    assert any(not np.array_equal(a, b) for a, b in zip(jax.tree.leaves(before), jax.tree.leaves(after)))
    assert np.any(np.asarray(state.hidden) != 0)


@pytest.mark.parametrize("network", ["mlp", "gru"])
def test_evaluate_runs_whole_episodes_with_either_network(network):
    parallel, state, _ = build(GRU if network == "gru" else MLP)
    trainer, params = parallel.trainer, single_device(state).params
    run = jax.jit(lambda key: evaluate(params, key, spec=trainer.spec, step_fn=trainer.policy_step,
                                       initial_hidden=trainer.initial_hidden(3), episodes=3))
    returns = np.asarray(run(jax.random.PRNGKey(0)))
    assert returns.shape == (3,) and np.all((returns >= 8) & (returns <= 500))
    np.testing.assert_array_equal(returns, np.asarray(run(jax.random.PRNGKey(0))))
