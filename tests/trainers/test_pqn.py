"""PQN: Q(lambda) targets against a plain-Python reference, epsilon-greedy statistics and
schedule, one update against a hand computation, live edits without recompiling, the
refusals, and that it learns CartPole."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from trainers import networks
from trainers.algorithms.pqn import losses
from trainers.algorithms.pqn.trainer import make_trainer
from trainers.hparams import DynamicHParams, StaticConfig, batch_split_problem

from helpers import assert_checkpoint_continues_bit_exactly, build, count_compiles, host_metrics, train_returns

TINY = dict(algo="pqn", num_envs=4, num_steps=16, num_minibatches=2, update_epochs=2, hidden_sizes=(16,),
            max_chunk_updates=8)


def hparams(**values):
    return DynamicHParams.create(anneal_lr=0.0, anneal_updates=100, **values)


# --- Q(lambda) targets ---------------------------------------------------------------------
def q_lambda_by_hand(reward, max_q, next_max_q, terminated, truncated, gamma, lam):
    """The textbook recursion, one env, plain Python: G_t = r_t + gamma * ((1 - lambda) *
    Q_{t+1} + lambda * G_{t+1}), cut at episode ends."""
    T = len(reward)
    out = [0.0] * T
    for t in reversed(range(T)):
        if terminated[t]:
            out[t] = reward[t]
        elif truncated[t] or t == T - 1:
            out[t] = reward[t] + gamma * next_max_q[t]
        else:
            out[t] = reward[t] + gamma * ((1 - lam) * next_max_q[t] + lam * out[t + 1])
    return out


def test_q_lambda_targets_match_the_recursion_with_terminal_and_truncated_steps():
    rng = np.random.default_rng(0)
    T = 9
    reward = rng.normal(size=T).astype(np.float32)
    max_q = rng.normal(size=T).astype(np.float32)
    terminated = np.array([0, 0, 1, 0, 0, 0, 0, 0, 0], bool)
    truncated = np.array([0, 0, 0, 0, 0, 1, 0, 0, 0], bool)
    final_q = rng.normal(size=T).astype(np.float32)  # max Q of each step's final observation
    # Where the step did not end an episode it reached obs[t + 1]; after the last step, the
    # rollout's final observation.
    next_max_q = np.where(terminated | truncated, final_q, np.append(max_q[1:], final_q[-1])).astype(np.float32)
    for gamma, lam in [(0.99, 0.65), (0.9, 0.0), (0.9, 1.0)]:
        want = q_lambda_by_hand(reward, max_q, next_max_q, terminated, truncated, gamma, lam)
        got = losses.q_lambda_targets(*map(jnp.asarray, (reward, max_q, next_max_q, terminated, truncated)),
                                      gamma, lam)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5, err_msg=f"{gamma}, {lam}")
    # lambda 0 is one-step Q-learning; a truncated step bootstraps from its final observation.
    got = np.asarray(losses.q_lambda_targets(*map(jnp.asarray, (reward, max_q, next_max_q, terminated, truncated)),
                                             0.9, 0.0))
    np.testing.assert_allclose(got[5], reward[5] + 0.9 * final_q[5], rtol=1e-6)
    np.testing.assert_allclose(got[2], reward[2], rtol=1e-6)


# --- exploration ---------------------------------------------------------------------------
@pytest.mark.parametrize("epsilon", [0.0, 0.3, 1.0])
def test_epsilon_greedy_sampling_has_the_epsilon_greedy_frequencies(epsilon):
    q = jnp.array([0.1, 2.0, -1.0, 0.5])
    logits = networks.epsilon_greedy_logits(q, jnp.float32(epsilon))
    n = 40_000
    noise = jax.random.gumbel(jax.random.PRNGKey(0), (n, 4))
    actions = np.asarray(networks.action_from_noise(noise, logits, jnp.zeros(()), True))
    freq = np.bincount(actions, minlength=4) / n
    want = np.full(4, epsilon / 4) + np.eye(4)[1] * (1 - epsilon)
    np.testing.assert_allclose(freq, want, atol=0.01)  # ~4 standard errors at n = 40k


def test_epsilon_falls_linearly_over_its_fraction_of_the_run_then_holds():
    eps = [float(losses.epsilon(1.0, 0.1, 0.2, 100.0, jnp.float32(i))) for i in (0, 10, 20, 50, 99)]
    np.testing.assert_allclose(eps, [1.0, 0.55, 0.1, 0.1, 0.1], rtol=1e-6)


# --- one update by hand --------------------------------------------------------------------
def test_one_update_is_one_radam_step_on_the_td_loss_computed_by_hand():
    """One epoch of one minibatch: the reported TD loss is the hand-computed loss at the
    rollout's parameters, and the new parameters are those minus lr times the clipped
    gradient (RAdam's first step is its bias-corrected momentum, the gradient itself)."""
    static = StaticConfig(**{**TINY, "num_minibatches": 1, "update_epochs": 1})
    trainer = make_trainer(static)
    lr, clip, gamma, lam = 1e-3, 0.5, 0.9, 0.7
    hp = hparams(lr=lr, max_grad_norm=clip, gamma=gamma, q_lambda=lam, eps_start=0.5, reward_scale=1.0)
    parallel, state, hp = build(static, seed=3, hp=hp)
    params = jax.tree.map(lambda x: np.asarray(x)[0], state.params)

    # The rollout the update collects, repeated outside it (same key split).
    one = jax.tree.map(lambda x: x[0], state)
    _, rollout_key, _ = jax.random.split(one.key, 3)
    # Each hand computation is compiled whole: run eagerly, JAX would compile every operation.
    collect = jax.jit(jax.vmap(lambda s: trainer.collect(s, rollout_key, hp), axis_name="devices"))
    collected = collect(jax.tree.map(lambda x: x[None], one))
    traj = jax.tree.map(lambda x: np.asarray(x[0]), collected.traj)
    q_values = jax.jit(lambda obs: trainer.apply(params, obs).policy_out)
    q_all = np.asarray(q_values(traj.obs))
    q_final = np.asarray(q_values(traj.final_obs)).max(-1)
    targets = np.stack([
        q_lambda_by_hand(traj.reward[:, e], q_all[:, e].max(-1), q_final[:, e], traj.terminated[:, e],
                         traj.truncated[:, e], gamma, lam) for e in range(static.num_envs)], axis=1)
    assert traj.terminated.any()  # the targets are cut at episode ends here too

    def loss(p):
        q = trainer.apply(p, jnp.asarray(traj.obs)).policy_out
        taken = jnp.take_along_axis(q, jnp.asarray(traj.action)[..., None], axis=-1)[..., 0]
        return 0.5 * jnp.mean(jnp.square(taken - jnp.asarray(targets, jnp.float32)))

    want_loss, grads = jax.jit(jax.value_and_grad(loss))(params)
    norm = float(optax.tree.norm(grads))
    scale = min(1.0, clip / norm)
    want_params = jax.tree.map(lambda p, g: p - lr * scale * g, params, grads)

    state, metrics = parallel.run_chunk(state, hp, 1)
    m = host_metrics(metrics)
    assert m["td_loss"][0] == pytest.approx(float(want_loss), rel=1e-4)
    assert m["grad_norm"][0] == pytest.approx(norm, rel=1e-4)
    assert m["epsilon"][0] == pytest.approx(0.5)
    got = jax.tree.map(lambda x: np.asarray(x)[0], state.params)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6), got, want_params)
    for name in ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_frac"):
        assert np.isnan(m[name][0]), name  # not PQN's quantities


def test_live_edits_do_not_recompile_and_take_effect():
    parallel, state, hp = build(StaticConfig(**TINY), hp=hparams())
    state, _ = parallel.run_chunk(state, hp, 2)  # compile once
    edits = [{"lr": 5e-4}, {"gamma": 0.9}, {"q_lambda": 0.3}, {"eps_start": 0.5}, {"eps_end": 0.01},
             {"eps_decay": 0.5}, {"max_grad_norm": 1.0}, {"reward_scale": 0.1}]
    results = []
    with count_compiles() as compiles:
        for changes in edits:
            hp = hp.with_updates(changes)
            state, metrics = parallel.run_chunk(state, hp, 1)
            results.append(host_metrics(metrics))
        state, metrics = parallel.run_chunk(state, hp, 3)  # another chunk length
        jax.block_until_ready(metrics)
    assert compiles.count == 0
    assert results[0]["lr"][0] == pytest.approx(5e-4)
    # Update index 5 of a decay over 0.5 x 100 updates, from 0.5 to 0.01.
    assert results[5]["epsilon"][0] == pytest.approx(0.5 + (0.01 - 0.5) * 7 / 50, rel=1e-5)


def test_a_checkpoint_continues_bit_exactly_without_recompiling():
    """Bit-exact on the same machine only: both continuations run one compiled program here."""
    from trainers import checkpoint

    parallel, state, hp = build(StaticConfig(**TINY), hp=hparams())
    state, _ = parallel.run_chunk(state, hp, 3)
    portable = checkpoint.to_portable(state)  # host copies: run_chunk donates its state
    data = checkpoint.encode(portable, {"update": 3})
    assert checkpoint.decode(data, portable)[1] == {"update": 3}
    resumed = assert_checkpoint_continues_bit_exactly(parallel, state, hp, data, portable)
    assert np.isfinite(resumed["td_loss"]).all()


def test_pqn_refuses_a_gru_and_continuous_actions_in_one_line():
    assert batch_split_problem(StaticConfig(**{**TINY, "network": "gru"})) == (
        "network", "pqn takes mlp or cnn (its Q-network is feed-forward), got 'gru'")
    with pytest.raises(ValueError, match=r"^algo: pqn takes discrete actions; Pendulum-v1 has continuous ones "
                                         r"\(ppo, reinforce and sac take them\)$"):
        make_trainer(StaticConfig(**{**TINY, "env_id": "Pendulum-v1"}))


# --- learning ------------------------------------------------------------------------------
LEARN = StaticConfig(algo="pqn", env_id="CartPole-v1", num_envs=32, num_steps=64, num_minibatches=16,
                     update_epochs=4, hidden_sizes=(256, 256), activation="relu", max_chunk_updates=40)
LEARN_HP = dict(lr=1e-4, max_grad_norm=10.0, reward_scale=0.1, gamma=0.99, q_lambda=0.95, eps_start=1.0,
                eps_end=0.2, eps_decay=0.2, anneal_lr=1.0)


def test_cartpole_returns_rise_fivefold_within_82k_steps():
    """PQN's defaults (purejaxql's CartPole configuration) for 40 updates of 32 envs x 64
    steps, scheduled as a 500k-step run (epsilon reaches 0.2 at update 49). A random policy
    scores about 22; seeds 0-7 here reached 165, 175, 190, 172, 173, 182, 186 and 177 as the
    mean over updates 31-40. A broken target, loss or exploration stays near random."""
    returns = train_returns(LEARN, 40, 7, DynamicHParams.create(anneal_updates=244, **LEARN_HP))
    assert np.nanmean(returns[:3]) < 40
    assert np.nanmean(returns[-10:]) >= 110


# --- a population ---------------------------------------------------------------------------
def test_a_population_sweeping_epsilon_explores_at_each_members_own_rate():
    """Two members with their own eps_start and lr, two seeds each, in one program: each
    member's epsilon and learning rate are its own, and member 0 trains as a single run
    with its values would (the same program's arithmetic, within rounding)."""
    from test_population import per_agent

    base = hparams(eps_decay=1.0)
    population = StaticConfig(**{**TINY, "num_members": 2, "num_seeds": 2})
    parallel, state, hp = build(population, seed=5, hp=per_agent(base, 2, eps_start=[1.0, 0.3], lr=[1e-3, 1e-4]))
    state, metrics = parallel.run_chunk(state, hp, 3)
    eps = np.asarray(metrics.per_update.epsilon)[:, :3]  # (agents, updates)
    np.testing.assert_allclose(eps[0], [1.0 + (0.2 - 1.0) * i / 100 for i in range(3)], rtol=1e-5)
    np.testing.assert_allclose(eps[2], [0.3 + (0.2 - 0.3) * i / 100 for i in range(3)], rtol=1e-5)
    np.testing.assert_allclose(np.asarray(metrics.per_update.lr)[:, 0], [1e-3, 1e-3, 1e-4, 1e-4], rtol=1e-6)

    single, single_state, single_hp = build(StaticConfig(**TINY), seed=5,
                                            hp=base._replace(eps_start=np.float32(1.0), lr=np.float32(1e-3)))
    single_state, one = single.run_chunk(single_state, single_hp, 3)
    np.testing.assert_allclose(np.asarray(metrics.per_update.td_loss)[0, :3], host_metrics(one)["td_loss"],
                               rtol=1e-4, atol=1e-6)


def test_sampled_evaluation_is_epsilon_greedy():
    """`rltui eval --sample` of a Q-learner: epsilon 1 acts uniformly at random (CartPole's
    random return is about 22), epsilon 0 as the greedy policy does."""
    from trainers.evaluate import evaluate

    trainer = make_trainer(StaticConfig(**TINY))
    params = trainer.network.init(jax.random.PRNGKey(0), jnp.zeros((1, trainer.spec.obs_size)))
    run = functools.partial(evaluate, (params, None), jax.random.PRNGKey(1), spec=trainer.spec,
                            step_fn=trainer.act_step, initial_hidden=None, episodes=64)
    greedy = np.asarray(run(greedy=True))
    np.testing.assert_array_equal(np.asarray(run(greedy=False, epsilon=0.0)), greedy)
    random = np.asarray(run(greedy=False, epsilon=1.0))
    assert 15 < random.mean() < 32 and not np.array_equal(random, greedy)
