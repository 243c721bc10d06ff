"""Every command rltui suggests, run as printed: the line a headless run ends with (to train
on, to go on, after a divergence with and without a checkpoint) and the example an error
gives. Run directories have spaces in their names, so the quoting is tested too.

Subprocesses on the tiny CartPole config of test_resume_cli, sharing its compile cache."""

from __future__ import annotations

import os
import shlex
import signal
from pathlib import Path

import pytest
from test_resume_cli import STEPS, TINY, assert_ok, read_jsonl, rltui, start, stop, updates, wait_for

ANNEALED = [item for pair in zip(TINY[::2], TINY[1::2]) if pair[1] != "anneal_lr=false" for item in pair]
DIVERGE = ["--set", "lr=1e30", "--set", "max_grad_norm=1e30"]  # the parameters are NaN after update 1
DIVERGED = 3  # the exit code of a run that diverged


@pytest.fixture(scope="module")
def cache() -> Path:
    """The session's JAX compilation cache (tests/conftest.py): same shapes, so later runs compile fast."""
    return Path(os.environ["XDG_CACHE_HOME"])


def suggested(output: str, marker: str) -> list[str]:
    """The arguments of the one `rltui launch ...` command on the line that holds `marker`."""
    (line,) = [line for line in output.splitlines() if marker in line]
    words = shlex.split(line[line.index("rltui launch "):])
    assert words[:2] == ["rltui", "launch"], line
    return words[1:]


def events(run_dir: Path, kind: str) -> list[dict]:
    return [e for e in read_jsonl(run_dir / "events.jsonl") if e["kind"] == kind]


def lr_at(run_dir: Path, update: int) -> float:
    (record,) = [r for r in read_jsonl(run_dir / "metrics.jsonl") if r["update"] == update]
    return record["lr"]


def test_the_printed_train_on_command_trains_on_and_says_how_the_learning_rate_changes(tmp_path, cache):
    run_dir = tmp_path / "my runs" / "anneal run"
    first = rltui(["launch", "--no-ui", "--run-dir", run_dir, *ANNEALED, "--set", f"total_timesteps={4 * STEPS}"],
                  tmp_path, cache)
    assert_ok(first)
    train_on = rltui(suggested(first.stderr, "To train on:"), tmp_path, cache)
    assert_ok(train_on)
    assert updates(run_dir) == list(range(1, 9))
    # Annealed over the new total, as a run of 8 updates from the start: said in one line.
    (said,) = [line for line in train_on.stderr.splitlines() if "learning rate" in line]
    assert said == ("rltui: the learning rate schedule changes: update 5 trains at 0.000125 (update 4 trained at "
                    "6.25e-05), annealing linearly to 0 at update 8, as a run planned for that total from the start "
                    "would")
    assert lr_at(run_dir, 4) == pytest.approx(2.5e-4 / 4, rel=1e-5)
    assert lr_at(run_dir, 5) == pytest.approx(2.5e-4 / 2, rel=1e-5)

    # A resume that does not go beyond the checkpoint gives an example that does.
    refused = rltui(["launch", "--no-ui", "--resume", run_dir], tmp_path, cache)
    assert refused.returncode == 2, refused.stderr[-3000:]
    example = refused.stderr[refused.stderr.index("e.g. ") + len("e.g. "):].split()
    assert_ok(rltui(["launch", "--no-ui", "--resume", run_dir, *example], tmp_path, cache))
    assert updates(run_dir)[-1] == 16


def test_a_resume_that_keeps_the_schedule_says_nothing_of_it(tmp_path, cache):
    run_dir = tmp_path / "stopped run"
    log = tmp_path / "stderr.txt"
    proc = start(["launch", "--no-ui", "--run-dir", run_dir, *ANNEALED, "--set", f"total_timesteps={3000 * STEPS}"],
                 tmp_path, cache, log)
    try:
        wait_for(lambda: updates(run_dir), proc, "the first update", log)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 0, log.read_text()[-3000:]
    finally:
        stop(proc)
    stopped_at = updates(run_dir)[-1]
    assert stopped_at < 3000
    go_on = rltui(suggested(log.read_text(), "To go on:"), tmp_path, cache, timeout=300)
    assert_ok(go_on)
    assert "learning rate" not in go_on.stderr
    assert updates(run_dir) == list(range(1, 3001))
    assert [e["update"] for e in events(run_dir, "resumed")] == [stopped_at]


def test_a_run_that_diverged_after_a_checkpoint_is_offered_a_resume_at_a_lower_rate(tmp_path, cache):
    run_dir = tmp_path / "to diverge"
    assert_ok(rltui(["launch", "--no-ui", "--run-dir", run_dir, *TINY, "--set", f"total_timesteps={4 * STEPS}"],
                    tmp_path, cache))
    diverged = rltui(["launch", "--no-ui", "--resume", run_dir, *DIVERGE, "--set", f"total_timesteps={8 * STEPS}"],
                     tmp_path, cache)
    assert diverged.returncode == DIVERGED, diverged.stderr[-3000:]
    args = suggested(diverged.stderr, "To go on from update 4, at half the learning rate:")
    assert args[-4:] == ["--set", "lr=5e+29", "--set", f"total_timesteps={8 * STEPS}"]
    again = rltui(args, tmp_path, cache)
    assert again.returncode in (0, DIVERGED), again.stderr[-3000:]  # it works; the rate is the user's to choose
    assert [e["update"] for e in events(run_dir, "resumed")] == [4, 4]
    assert any(e["data"]["changes"] == {"lr": 5e29} for e in events(run_dir, "hparams")), events(run_dir, "hparams")


def test_a_run_that_diverged_before_its_first_checkpoint_is_offered_a_new_start(tmp_path, cache):
    run_dir = tmp_path / "diverges at once"
    diverged = rltui(["launch", "--no-ui", "--run-dir", run_dir, *TINY, *DIVERGE, "--set",
                      f"total_timesteps={4 * STEPS}"], tmp_path, cache)
    assert diverged.returncode == DIVERGED, diverged.stderr[-3000:]
    assert not (run_dir / "checkpoints").is_dir() or not list((run_dir / "checkpoints").iterdir())
    assert "--resume" not in diverged.stderr
    args = suggested(diverged.stderr, "It diverged before its first checkpoint; to start again at half the")
    again = rltui(args, tmp_path, cache)
    assert again.returncode in (0, DIVERGED), again.stderr[-3000:]
    (new_run,) = (tmp_path / "runs").iterdir()  # a run of its own, from the same configuration
    assert updates(new_run)[:1] == [1]
    assert (new_run / "config.toml").read_text() == (run_dir / "config.toml").read_text().replace(
        "lr = 1e+30", "lr = 5e+29")


def test_the_directory_in_use_message_names_an_attach_command_a_shell_reads_back(tmp_path):
    import os

    from rltui.runfiles.rundir import _in_use_message

    path = tmp_path / "a run's dir"
    fd = os.open(tmp_path / "lock", os.O_RDWR | os.O_CREAT)
    try:
        message = _in_use_message(path, fd)
    finally:
        os.close(fd)
    command = message[message.index("(rltui attach ") + 1:message.index(", then k)")]
    assert shlex.split(command) == ["rltui", "attach", str(path)]


def test_the_schedule_line_says_what_the_next_update_trains_at():
    from trainers.lr_schedule import schedule_notice

    saved = {"hparams": {"lr": 2.5e-4, "anneal_lr": 1.0, "anneal_updates": 976.0}}
    stretched = {"lr": 2.5e-4, "anneal_lr": 1.0, "anneal_updates": 1952.0}
    assert schedule_notice(saved, stretched, 976) == (
        "the learning rate schedule changes: update 977 trains at 0.000125 (update 976 trained at 2.56e-07), "
        "annealing linearly to 0 at update 1,952, as a run planned for that total from the start would")
    assert schedule_notice(saved, dict(saved["hparams"]), 500) is None  # resumed as it was: nothing to say
    constant = {"lr": 1e-4, "anneal_lr": 0.0, "anneal_updates": 976.0}
    assert schedule_notice(saved, constant, 500, members=True) == (
        "the learning rate schedule changes: update 501 trains at 0.0001 (update 500 trained at 0.000122), "
        "constant from then on; each member's rate changes alike")


def test_the_exploration_line_says_what_epsilon_the_next_update_explores_at():
    from trainers.lr_schedule import epsilon_notice

    hparams = {"eps_start": 1.0, "eps_end": 0.01, "eps_decay": 0.5, "anneal_updates": 10_000.0}
    saved = {"trainer": "dqn", "hparams": hparams}
    stretched = {**hparams, "anneal_updates": 40_000.0}
    # At update 10,000 epsilon had reached 0.01; over the longer run it is half way down.
    assert epsilon_notice(saved, stretched, 10_000) == (
        "the exploration schedule changes: update 10,001 explores at epsilon 0.505 (update 10,000 explored at "
        "0.01), falling linearly to 0.01 at update 20,000, as a run planned for that total from the start would")
    assert epsilon_notice(saved, dict(hparams), 10_000) is None  # resumed as it was: nothing to say
    assert epsilon_notice({**saved, "trainer": "ppo"}, stretched, 10_000) is None  # PPO has no epsilon
    lower = {**hparams, "eps_end": 0.001}
    assert epsilon_notice(saved, lower, 10_000) == (
        "the exploration schedule changes: update 10,001 explores at epsilon 0.001 (update 10,000 explored at "
        "0.01), constant from then on")


@pytest.mark.parametrize("anneal_lr", [1.0, 0.0])
def test_the_rate_a_resume_names_is_the_rate_the_compiled_step_trains_at(anneal_lr):
    import jax.numpy as jnp

    from trainers.base import annealed_lr
    from trainers.hparams import DynamicHParams
    from trainers.lr_schedule import rate_at

    hparams = DynamicHParams.create(lr=3e-4, anneal_lr=anneal_lr, anneal_updates=976.0)
    for index in (0, 1, 487, 975, 976, 2000):
        trained = float(annealed_lr(hparams, jnp.asarray(index, dtype=jnp.int32)))
        # The step computes in float32: near the end, 1 - index/976 keeps about 4 significant figures.
        assert rate_at(hparams.as_floats(), index) == pytest.approx(trained, rel=1e-4, abs=1e-12)
