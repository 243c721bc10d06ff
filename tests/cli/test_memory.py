"""Memory refused before it is asked for: a run whose network or batch cannot fit, a
checkpoint whose config names such a network (resume, eval, watch), and `rltui eval` of
more episodes at once than fit. Each refusal is one line, exit 2, and allocates nothing."""

import re
from pathlib import Path

import pytest

from rltui.config.build import build_config
from rltui.config.toml_text import parse_overrides
from rltui.errors import UsageError

from test_cli import rltui

HUGE = "hidden_sizes=[1000000000]"
SMALL = ["num_envs=4", "num_steps=16", "num_minibatches=2", "update_epochs=1"]


def write_checkpoint(path: Path, state_items: list[str], config_items: list[str]) -> Path:
    """A checkpoint holding a fresh (zero) state of the config of `state_items`, whose
    metadata says the config of `config_items`: made without training or initialising."""
    import jax

    from rltui.runfiles.checkpoints import portable_template, state_shapes
    from trainers import checkpoint
    from trainers.parallel import build

    state_config = build_config({}, parse_overrides(state_items), use_preset=False)
    config = build_config({}, parse_overrides(config_items), use_preset=False)
    parallel = build(state_config.static_config(), jax.local_devices()[:1])
    metadata = {"trainer": config.algo, "config": config.to_toml_dict(), "update": 1,
                "env_steps": config.steps_per_update, "reason": "periodic"}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(checkpoint.encode(portable_template(state_shapes(state_config, parallel)), metadata))
    return path


def one_line(result) -> str:
    assert result.returncode == 2, (result.returncode, result.stderr[-3000:])
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("rltui: error: "), result.stderr[-3000:]
    return lines[0]


def files_under(folder: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_a_network_too_large_for_memory_is_refused_before_a_run_directory_exists(tmp_path):
    result = rltui(["launch", "--no-ui", "--set", HUGE, "--run-dir", str(tmp_path / "run")], tmp_path, timeout=120)
    line = one_line(result)
    assert re.fullmatch(r"rltui: error: this run needs about [\d,]+ GiB, more than the [\d.,]+ GiB free on cpu "
                        r"\(mostly the activations of hidden_sizes \[1000000000\] over [\d,]+ rows at once\); "
                        r"lower num_envs, num_steps or hidden_sizes", line), line
    assert not (tmp_path / "run").exists() and not (tmp_path / "runs").exists()


def test_a_replay_buffer_too_large_is_refused_in_one_line_before_any_notice(tmp_path):
    # DQN on CartPole has a preset, whose notice would otherwise come before the refusal.
    result = rltui(["launch", "--no-ui", "--set", "algo=dqn", "--set", "buffer_size=2000000000", "--run-dir",
                    str(tmp_path / "run")], tmp_path, timeout=120)
    line = one_line(result)
    assert "(mostly the replay buffer of buffer_size 2,000,000,000); lower buffer_size" in line, line
    assert not (tmp_path / "run").exists()


def test_a_checkpoint_naming_a_huge_network_is_refused_by_resume_eval_and_watch(tmp_path):
    # The state in the file is small: only its config names the huge network.
    path = write_checkpoint(tmp_path / "run" / "checkpoints" / "checkpoint-000000001.msgpack", SMALL,
                            [*SMALL, HUGE])
    files = files_under(tmp_path / "run")
    info = rltui(["info", str(path)], tmp_path, timeout=120)
    assert info.returncode == 0, info.stderr[-3000:]
    assert re.search(r"^  hidden_sizes +\[1000000000\]$", info.stdout, re.MULTILINE), info.stdout
    resumed = one_line(rltui(["launch", "--no-ui", "--resume", str(path)], tmp_path, timeout=120))
    assert resumed.startswith("rltui: error: this run needs about ") and "hidden_sizes [1000000000]" in resumed
    evaluated = one_line(rltui(["eval", str(path), "--episodes", "2"], tmp_path, timeout=120))
    assert re.fullmatch(r"rltui: error: the checkpoint's network \(hidden_sizes \[1000000000\]\) needs about "
                        r"[\d.,]+ GiB to evaluate one episode, more than the [\d.,]+ GiB free on cpu", evaluated)
    watched = one_line(rltui(["watch", str(path), "--record", str(tmp_path / "out.svg")], tmp_path, timeout=120))
    assert re.fullmatch(r"rltui: error: the checkpoint's network \(hidden_sizes \[1000000000\]\) needs about "
                        r"[\d.,]+ GiB to act, more than the [\d.,]+ GiB free on cpu", watched)
    assert files_under(tmp_path / "run") == files and not (tmp_path / "out.svg").exists()


def test_eval_of_more_episodes_than_fit_names_the_most_that_do(tmp_path):
    path = write_checkpoint(tmp_path / "run" / "checkpoints" / "checkpoint-000000001.msgpack", SMALL, SMALL)
    line = one_line(rltui(["eval", str(path), "--episodes", "1000000000"], tmp_path, timeout=120))
    match = re.fullmatch(r"rltui: error: --episodes: 1,000,000,000 episodes at once need about [\d,.]+ GiB, "
                         r"more than the [\d.,]+ GiB free on cpu; at most ([\d,]+) fit", line)
    assert match, line
    assert 0 < int(match[1].replace(",", "")) < 1_000_000_000


def _evaluation():
    """`compile_for(episodes)` of a small network's evaluation, and its device."""
    import jax

    from rltui.watch.params import acting_template
    from trainers.evaluate import evaluate
    from trainers.parallel import build

    config = build_config({}, parse_overrides(SMALL), use_preset=False)
    parallel = build(config.static_config(), jax.local_devices()[:1])
    trainer = parallel.trainer

    def compile_for(episodes: int):
        run = jax.jit(lambda acting, key: evaluate(acting, key, spec=trainer.spec, step_fn=trainer.act_step,
                                                   initial_hidden=None, episodes=episodes))
        return run.lower(acting_template(config, parallel), jax.random.PRNGKey(0)).compile()

    return compile_for, parallel.devices[0]


def test_the_most_episodes_an_evaluation_names_fit_and_more_do_not():
    from rltui.config.memory import check_evaluation_fits

    compile_for, device = _evaluation()
    analysis = compile_for(10_000).memory_analysis()
    free = analysis.argument_size_in_bytes + (analysis.temp_size_in_bytes + analysis.output_size_in_bytes) // 3
    with pytest.raises(UsageError, match=r"at most ([\d,]+) fit$") as caught:
        check_evaluation_fits(compile_for, 10_000, device, policy="p", free_bytes=lambda _: free)
    most = int(re.search(r"at most ([\d,]+) fit$", str(caught.value))[1].replace(",", ""))
    assert 3_000 < most < 3_400
    check_evaluation_fits(compile_for, most, device, policy="p", free_bytes=lambda _: free)  # fits
    with pytest.raises(UsageError, match=r"at most [\d,]+ fit$"):
        check_evaluation_fits(compile_for, most + 100, device, policy="p", free_bytes=lambda _: free)


def test_a_single_run_is_refused_naming_what_to_lower():
    from test_sweep import FakeDevice

    from rltui.config.memory import CHECKPOINT_COPIES, check_population_fits, checkpoint_bytes, estimate_agent_bytes
    from trainers.envs import make_env

    def refusal(*items: str) -> str:
        static = build_config({}, parse_overrides([*SMALL, *items]), use_preset=False).static_config()
        spec = make_env(static.env_id)
        # On a CPU device: training, and the copies of a checkpoint while it is saved.
        need = (static.num_agents * estimate_agent_bytes(static, spec)
                + CHECKPOINT_COPIES * checkpoint_bytes(static, spec))
        check_population_fits(static, spec, [FakeDevice()], free_bytes=lambda _: need)  # fits, just
        with pytest.raises(UsageError) as caught:
            check_population_fits(static, spec, [FakeDevice()], free_bytes=lambda _: need - 1)
        assert caught.value.exit_code == 2
        return str(caught.value)

    assert refusal("hidden_sizes=[4096,4096]").endswith(
        "(mostly the parameters and optimizer state of hidden_sizes [4096, 4096]); lower hidden_sizes")
    assert refusal("num_envs=4096", "num_steps=1024", "num_minibatches=64").endswith(
        "(mostly the rollout of num_envs 4,096 x num_steps 1,024); lower num_envs or num_steps")
    population = refusal("num_seeds=4", "hidden_sizes=[4096,4096]")
    assert re.fullmatch(r"population of 4 agents needs about [\d.]+ GiB, more than the [\d.]+ GiB free on cpu "
                        r"\(mostly .*\); lower num_seeds or hidden_sizes", population), population


def test_the_python_api_refuses_a_network_too_large_before_anything_is_written(tmp_path):
    import rltui

    with pytest.raises(rltui.ApiError, match=r"^this run needs about .*; lower num_envs, num_steps or hidden_sizes$"):
        rltui.train(env="CartPole-v1", hidden_sizes=[1000000000], run_dir=tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()


def test_a_run_whose_checkpoints_rltui_could_not_read_back_is_refused_at_launch(tmp_path, monkeypatch):
    from test_sweep import FakeDevice

    from rltui.assembly import check_agents_fit
    from rltui.config.memory import checkpoint_bytes
    from trainers import checkpoint
    from trainers.envs import make_env

    config = build_config({}, parse_overrides([*SMALL, "num_seeds=3"]), use_preset=False)
    static = config.static_config()
    written = write_checkpoint(tmp_path / "c.msgpack", [*SMALL, "num_seeds=3"], [*SMALL, "num_seeds=3"]).stat().st_size
    estimate = checkpoint_bytes(static, make_env(static.env_id))
    assert written * 0.8 < estimate <= written  # the arrays, without the file's few bytes of metadata
    monkeypatch.setattr(checkpoint, "MAX_BYTES", estimate)
    check_agents_fit(config, [FakeDevice()])  # fits, just
    monkeypatch.setattr(checkpoint, "MAX_BYTES", estimate - 1)
    with pytest.raises(UsageError) as caught:
        check_agents_fit(config, [FakeDevice()])
    assert caught.value.exit_code == 2
    assert re.fullmatch(r"this run's checkpoints would be about [\d.]+ GiB, more than the [\d.e-]+ GiB rltui writes "
                        r"and reads back; lower num_seeds, num_envs or hidden_sizes", str(caught.value)), caught.value
