"""`rltui export RUN --policy FILE` and `rltui.load_policy(FILE)`: a checkpoint's policy
leaves rltui as one file, read as data, and acts as `rltui eval`'s policy does (greedy and
sampled, one observation or a batch, a GRU's hidden state passed explicitly), in this
process and a fresh one; `--onnx` writes the same greedy policy as an ONNX graph.

The checkpoints are written without training: random parameters (and observation
statistics) in a state of the run's shapes, which is all an exported policy reads."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rltui.cli import main

from test_cli import python

NO_ONNX = "the onnx extra is not installed: pip install 'rltui[onnx]'"
# Each kind of policy: its run's settings, over a small network (hidden_sizes [16]).
KINDS = {
    "ppo-mlp": ["normalize_obs=true"],
    "ppo-cnn": ["env='Breakout-MinAtar'", "network='cnn'"],
    "ppo-gru": ["network='gru'", "hidden_sizes=[16, 16]"],
    "ppo-continuous": ["env='Pendulum-v1'", "normalize_obs=true"],
    "reinforce": ["algo='reinforce'"],
    "pqn": ["algo='pqn'", "eps_end=0.5"],
    "dqn": ["algo='dqn'", "eps_end=0.5", "buffer_size=256", "batch_size=16"],
    "sac": ["algo='sac'", "env='Pendulum-v1'", "buffer_size=256", "batch_size=16"],
}


class Exported(NamedTuple):
    checkpoint: Path
    policy_file: Path
    config: object
    trainer: object
    acting: tuple  # (params, obs_stats) as the checkpoint holds them, one agent


def write_checkpoint(path: Path, items: list[str]):
    """A checkpoint of random parameters and statistics in a state of `items`' shapes;
    returns the config and the trainer."""
    from rltui.config.build import build_config
    from rltui.config.toml_text import parse_overrides
    from rltui.runfiles.checkpoints import portable_template, state_shapes
    from trainers import checkpoint
    from trainers.parallel import build

    config = build_config({}, parse_overrides(["hidden_sizes=[16]", *items]), use_preset=False)
    parallel = build(config.static_config(), jax.local_devices()[:1])
    portable = portable_template(state_shapes(config, parallel))
    rng = np.random.default_rng(len(path.name))
    params = jax.tree.map(lambda x: (rng.normal(size=x.shape) * 0.7).astype(x.dtype), portable.params)
    stats = portable.obs_stats
    if stats is not None:
        stats = stats.replace(mean=rng.normal(size=stats.mean.shape).astype(np.float32),
                              var=rng.uniform(0.3, 3.0, stats.var.shape).astype(np.float32))
    portable = portable.replace(params=params, obs_stats=stats)
    metadata = {"trainer": config.algo, "config": config.to_toml_dict(), "update": 7,
                "env_steps": 7 * config.steps_per_update, "reason": "periodic"}
    path.write_bytes(checkpoint.encode(portable, metadata))
    return config, parallel.trainer, (params, stats)


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> dict[str, Exported]:
    folder = tmp_path_factory.mktemp("policies")
    made = {}
    for kind, items in KINDS.items():
        checkpoint = folder / f"{kind}.msgpack"
        config, trainer, acting = write_checkpoint(checkpoint, items)
        policy_file = folder / f"{kind}.policy"
        assert main(["export", str(checkpoint), "--policy", str(policy_file)]) == 0
        made[kind] = Exported(checkpoint, policy_file, config, trainer, acting)
    return made


def observations(policy, count: int, seed: int = 0) -> np.ndarray:
    """Observations of the env's shape: MinAtar's are 0/1 channels, the others reals."""
    rng = np.random.default_rng(seed)
    if len(policy.obs_shape) == 3:
        return (rng.uniform(size=(count, *policy.obs_shape)) < 0.2).astype(np.float32)
    return rng.normal(size=(count, *policy.obs_shape)).astype(np.float32) * 2.0


def eval_actions(made: Exported, obs: np.ndarray, steps: int = 1) -> list[np.ndarray]:
    """Greedy actions of `rltui eval`'s policy (`trainers.evaluate._eval_step`: the trainer's
    `act_step`, vmapped over envs, then the env's action) on `obs`, `steps` times with the
    hidden state carried."""
    from trainers import networks
    from trainers.rollout import env_action

    trainer = made.trainer
    flat = jnp.asarray(obs.reshape(obs.shape[0], -1))
    hidden = trainer.initial_hidden(obs.shape[0])
    actions = []
    for _ in range(steps):
        hidden, out = jax.vmap(trainer.act_step, in_axes=(None, 0, 0))(made.acting, hidden, flat)
        actions.append(np.asarray(env_action(trainer.spec, networks.greedy_action(out.policy_out,
                                                                                  trainer.spec.discrete))))
    return actions


@pytest.mark.parametrize("kind", KINDS)
def test_a_loaded_policy_acts_as_evals_policy(exported, kind):
    import rltui

    made = exported[kind]
    policy = rltui.load_policy(made.policy_file)
    obs = observations(policy, 64)
    steps = 3 if policy.recurrent else 1
    want = eval_actions(made, obs, steps)
    if policy.recurrent:
        hidden = None
        for expected in want:
            step = policy(obs, hidden=hidden)
            hidden = step.hidden
            np.testing.assert_array_equal(np.asarray(step.action), expected)
    elif policy.discrete:
        np.testing.assert_array_equal(np.asarray(policy(obs)), want[0])
        assert len(set(want[0].tolist())) > 1  # the observations tell the actions apart
    else:
        np.testing.assert_allclose(np.asarray(policy(obs)), want[0], rtol=1e-5, atol=1e-5)
    header = policy.header
    assert (header["env"], header["algo"], header["update"]) == (made.config.env, made.config.algo, 7)
    assert header["checkpoint"] == made.checkpoint.name


def test_one_observation_and_a_batch_act_alike_in_the_envs_shape_or_flat(exported):
    import rltui

    policy = rltui.load_policy(exported["ppo-cnn"].policy_file)
    obs = observations(policy, 8)
    batch = np.asarray(policy(obs))
    assert batch.shape == (8,) and batch.dtype == np.int32
    assert [int(policy(o)) for o in obs] == batch.tolist()
    np.testing.assert_array_equal(np.asarray(policy(obs.reshape(8, -1))), batch)  # flat observations
    np.testing.assert_array_equal(np.asarray(policy(obs.reshape(2, 4, *policy.obs_shape))), batch.reshape(2, 4))
    with pytest.raises(ValueError, match=r"^obs: expected observations of shape \(10, 10, 4\) \(or 400 flat\)"):
        policy(obs[:, :5])


def test_sampled_actions_follow_the_policy_and_a_q_learner_explores_at_eps_end(exported):
    import rltui

    ppo = rltui.load_policy(exported["ppo-mlp"].policy_file)
    obs = observations(ppo, 2000)
    key = jax.random.PRNGKey(3)
    sampled = np.asarray(ppo(obs, key))
    np.testing.assert_array_equal(np.asarray(ppo(obs, key)), sampled)  # a key gives its actions again
    assert 0.02 < np.mean(sampled != np.asarray(ppo(obs))) < 0.98  # drawn from the policy, not greedy

    pqn = rltui.load_policy(exported["pqn"].policy_file)
    assert pqn.header["sample_epsilon"] == 0.5  # the run's eps_end, as `rltui eval --sample` acts
    obs = observations(pqn, 4000)
    greedy = np.asarray(pqn(obs))
    explored = np.mean(np.asarray(pqn(obs, jax.random.PRNGKey(4))) != greedy)
    assert explored == pytest.approx(0.5 / 2, abs=0.03)  # epsilon-greedy over CartPole's two actions

    gru = rltui.load_policy(exported["ppo-gru"].policy_file)
    step = gru(observations(gru, 4), jax.random.PRNGKey(0), hidden=gru.initial_hidden(4))
    assert step.action.shape == (4,) and step.hidden.shape == (4, 16)


def test_a_recurrent_policy_keeps_its_hidden_state_explicit(exported):
    import rltui

    policy = rltui.load_policy(exported["ppo-gru"].policy_file)
    assert policy.recurrent and policy.initial_hidden().shape == (16,)
    obs = observations(policy, 1)[0]
    first = policy(obs)  # no hidden: an episode's start
    np.testing.assert_array_equal(np.asarray(first.hidden),
                                  np.asarray(policy(obs, hidden=policy.initial_hidden()).hidden))
    assert not np.allclose(np.asarray(policy(obs, hidden=first.hidden).hidden), np.asarray(first.hidden))
    with pytest.raises(ValueError, match=r"^hidden: expected shape \(16,\)"):
        policy(obs, hidden=policy.initial_hidden(3))
    feed_forward = rltui.load_policy(exported["ppo-mlp"].policy_file)
    with pytest.raises(TypeError, match="feed-forward"):
        feed_forward(obs, hidden=first.hidden)


# One of each algorithm, and a recurrent and a continuous policy: a fresh process pays for
# each compile, so the plain MLP and the CNN are checked in this process only.
FRESH_PROCESS_KINDS = ("ppo-gru", "ppo-continuous", "reinforce", "pqn", "dqn")


def test_policies_round_trip_in_a_fresh_process(exported, tmp_path):
    """One process for them all: only the files and rltui.load_policy, no run directory."""
    import rltui

    inputs = {}
    for kind in FRESH_PROCESS_KINDS:
        made = exported[kind]
        policy = rltui.load_policy(made.policy_file)
        inputs[kind] = (str(made.policy_file), observations(policy, 16, seed=5).tolist())
    (tmp_path / "inputs.json").write_text(json.dumps(inputs))
    done = python("""
        import json, sys
        import numpy as np
        import rltui
        out = {}
        for kind, (path, obs) in json.load(open("inputs.json")).items():
            policy = rltui.load_policy(path)
            act = policy(np.asarray(obs, np.float32))
            out[kind] = np.asarray(act.action if policy.recurrent else act).tolist()
        assert "rltui.runfiles" not in sys.modules and "rltui.config" not in sys.modules
        print(json.dumps(out))
    """, tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert sorted(got) == sorted(FRESH_PROCESS_KINDS)
    for kind in FRESH_PROCESS_KINDS:
        want = eval_actions(exported[kind], np.asarray(inputs[kind][1], np.float32))[0]
        np.testing.assert_allclose(np.asarray(got[kind]), want, rtol=1e-5, atol=1e-5, err_msg=kind)


def test_several_agents_export_the_one_asked_for(tmp_path, capsys):
    import rltui

    checkpoint = tmp_path / "seeds.msgpack"
    config, trainer, (params, stats) = write_checkpoint(checkpoint, ["num_seeds=2"])
    assert main(["export", str(checkpoint), "--policy", str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("rltui: error: export: seeds.msgpack holds 2 agents (2 seeds); pick one with --agent 0..1 "
                   "(member-major, each member's seeds together)")
    assert not (tmp_path / "p").exists()
    assert main(["export", str(checkpoint), "--policy", str(tmp_path / "p"), "--agent", "1"]) == 0
    assert f", agent 1 (seed {config.seed + 1}) to {tmp_path / 'p'}" in capsys.readouterr().out  # which one it wrote
    policy = rltui.load_policy(tmp_path / "p")
    assert (policy.header["agent"], policy.header["seed"]) == (1, config.seed + 1)
    second = jax.tree.map(lambda x: x[1], params)
    np.testing.assert_array_equal(jax.tree.leaves(policy.arrays.params)[0], jax.tree.leaves(second)[0])


@pytest.mark.parametrize("args, problem", [
    (["--policy", "{policy}"], r"--policy: .*ppo-mlp\.policy already exists; give another file, or remove it first"),
    (["--onnx", "{gru}.onnx"], r"--onnx takes feed-forward policies \(mlp, cnn\); a GRU's hidden state is not "
                               r"exported"),
    (["--csv", "-", "--agent", "0"], r"--agent: goes with --policy or --onnx .*"),
    ([], r"export: say what to write: --tensorboard \[DIR\], --csv FILE, --policy FILE and/or --onnx FILE"),
], ids=["exists", "onnx-gru", "agent-alone", "nothing"])
def test_refusals_are_one_line(exported, tmp_path, capsys, args, problem):
    made = exported["ppo-mlp"]
    source = exported["ppo-gru"].checkpoint if "{gru}" in " ".join(args) else made.checkpoint
    args = [a.format(policy=made.policy_file, gru=tmp_path / "gru") for a in args]
    assert main(["export", str(source), *args]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and re_fullmatch(r"rltui: error: " + problem, err.strip()), err
    assert not (tmp_path / "gru.onnx").exists()


def re_fullmatch(pattern: str, text: str) -> bool:
    import re

    return re.fullmatch(pattern, text) is not None


def test_a_damaged_or_foreign_file_is_refused_in_one_line(exported, tmp_path):
    import msgpack

    import rltui
    from trainers import policy_file
    from trainers.policy_file import PolicyFileError

    good = exported["ppo-mlp"].policy_file.read_bytes()
    data = bytearray(good)
    data[-20] ^= 0xFF
    (tmp_path / "damaged").write_bytes(bytes(data))
    table = msgpack.unpackb(good, raw=False)
    for name, changes in (("newer", {"version": policy_file.VERSION + 1}), ("text", {"version": "1"}),
                          ("headless", {"header": None}), ("garbage", None)):
        (tmp_path / name).write_bytes(b"\x92\xff" if changes is None else msgpack.packb({**table, **changes}))
    for path, message in ((tmp_path / "damaged", r"policy file is corrupted or edited \(checksum mismatch\)"),
                          (exported["ppo-mlp"].checkpoint, "not an rltui policy file"),
                          (tmp_path / "missing", "cannot read"),
                          (tmp_path / "newer", f"policy file format version {policy_file.VERSION + 1} is newer than "
                                               "this rltui understands"),
                          (tmp_path / "text", "policy file is damaged: its format version is '1', not a whole number"),
                          (tmp_path / "headless", "policy file is missing its header"),
                          (tmp_path / "garbage", "not a readable policy file: truncated, damaged")):
        with pytest.raises(PolicyFileError, match=message) as caught:
            rltui.load_policy(path)
        assert "\n" not in str(caught.value)


def test_every_algorithm_that_acts_by_values_says_how_it_samples():
    """A sampled action of a Q-network is epsilon-greedy (`rltui eval --sample`, an exported
    policy): the algorithm's record says at which rate, so a new Q-learner cannot leave it out."""
    from rltui.config.build import build_config
    from trainers.algorithms import ALGORITHMS

    for name, record in ALGORITHMS.items():
        env = "CartPole-v1" if record.takes("discrete") else "Pendulum-v1"
        config = build_config({}, {"algo": name, "env": env}, use_preset=False)
        trainer = record.make_trainer(config.static_config(), 1)
        epsilon = record.sample_epsilon(config)
        assert (epsilon is not None) == trainer.acts_by_values, name


def test_onnx_without_its_extra_is_refused_naming_it(exported, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "jax2onnx", None)  # as if not installed
    assert main(["export", str(exported["ppo-mlp"].checkpoint), "--onnx", str(tmp_path / "p.onnx")]) == 2
    assert capsys.readouterr().err.strip() == ("rltui: error: --onnx needs jax2onnx and onnxruntime (jax2onnx is not "
                                               "installed): pip install 'rltui[onnx]'")
    assert not (tmp_path / "p.onnx").exists()


def test_an_env_object_whose_class_imports_trains_under_its_import_path():
    """Its run's config.toml then names an env that `rltui eval`, `watch` and `launch
    --resume` build in any process where the module imports; any other object keeps an id of
    its own, and a process without it says in one line how to make it so."""
    from test_custom_env import Bandit, BanditParams

    import rltui
    from trainers.env_import import EnvImportError, importable_path, load

    assert rltui.make_config(Bandit(), total_timesteps=512).env == "test_custom_env:Bandit"
    assert importable_path(Bandit(), Bandit().default_params) == "test_custom_env:Bandit"
    assert importable_path(Bandit(arms=3)) is None  # not what Bandit() builds
    assert importable_path(Bandit(), BanditParams(max_steps_in_episode=5)) is None  # nor its default_params

    class Local(Bandit):
        pass

    assert importable_path(Local()) is None  # a function's own class: no import reaches it
    assert rltui.make_config(Local(), total_timesteps=512).env.startswith("object:Local")
    with pytest.raises(EnvImportError) as caught:
        load("object:Elsewhere")
    message = str(caught.value)
    assert "\n" not in message and message.endswith(
        "to make it so, define its class in a module that imports (not the script run as __main__), building it "
        "with no arguments, or train with env='my_pkg.envs:make_env'")


def test_a_run_on_an_env_object_exports_from_the_process_that_has_it(tmp_path):
    from test_custom_env import Bandit

    import rltui

    class Local(Bandit):
        pass

    env_id = rltui.make_config(Local(), total_timesteps=512).env
    assert env_id.startswith("object:Local")
    write_checkpoint(tmp_path / "run.msgpack", [f"env='{env_id}'"])
    written = rltui.export_policy(tmp_path / "run.msgpack", tmp_path / "bandit.policy")
    policy = rltui.load_policy(written)
    assert policy.header["env"] == env_id and policy.obs_shape == (2, 1)
    assert policy(np.zeros((3, 2, 1), np.float32)).shape == (3,)
    with pytest.raises(rltui.ApiError, match=r"^path: .*bandit\.policy already exists"):
        rltui.export_policy(tmp_path / "run.msgpack", written)


@pytest.mark.parametrize("kind", ["ppo-mlp", "ppo-cnn", "ppo-continuous", "pqn"])
def test_the_onnx_graph_acts_as_the_loaded_policy(exported, tmp_path, kind):
    pytest.importorskip("jax2onnx", reason=NO_ONNX)
    onnxruntime = pytest.importorskip("onnxruntime", reason=NO_ONNX)
    import rltui

    made = exported[kind]
    target = tmp_path / f"{kind}.onnx"
    assert main(["export", str(made.checkpoint), "--onnx", str(target)]) == 0
    policy = rltui.load_policy(made.policy_file)
    obs = observations(policy, 1000, seed=9)
    session = onnxruntime.InferenceSession(target.read_bytes())
    assert [i.name for i in session.get_inputs()] == ["obs"]
    got = session.run(None, {"obs": obs})[0]
    want = np.asarray(policy(obs))
    assert got.dtype == want.dtype and got.shape == want.shape
    if policy.discrete:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-n", "0"]))
