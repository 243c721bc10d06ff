"""The `rltui` command, run as a user would: `python -m rltui ...` in a fresh directory."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
import tomllib
from pathlib import Path

import pytest

from rltui.config.keys import KEYS
from rltui.runfiles.discovery import RunState, state_of

REPO = Path(__file__).resolve().parents[2]

# A tiny CartPole run: 4 envs x 64 steps = 256 env steps per update.
TINY = ["--set", "num_envs=4", "--set", "num_steps=64", "--set", "num_minibatches=2", "--set", "update_epochs=1"]
TINY_STEPS = 256
METRIC_FIELDS = (
    "update", "env_steps", "wall_time", "episode_return", "sps", "policy_loss", "value_loss",
    "entropy", "approx_kl", "clip_frac", "grad_norm", "lr",
)


def cli_env(cache: Path | None = None, **extra: str) -> dict[str, str]:
    """The environment of an `rltui` subprocess; its JAX compilation cache is the session's
    (tests/conftest.py) unless `cache` names another."""
    env = dict(os.environ)
    for name in ("COLUMNS", "LINES", "FORCE_COLOR", "TTY_INTERACTIVE", "TTY_COMPATIBLE", "JAX_ENABLE_X64"):
        env.pop(name, None)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    env["JAX_PLATFORMS"] = "cpu"
    if cache is not None:
        env["XDG_CACHE_HOME"] = str(cache)
    env.update(extra)
    return env


def rltui(args, cwd: Path, *, cache: Path | None = None, timeout: float = 60, **env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rltui", *args],
        cwd=cwd, env=cli_env(cache, **env), capture_output=True, text=True, timeout=timeout,
    )


def python(
    code: str, cwd: Path, *, cache: Path | None = None, timeout: float = 60, args=()
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        cwd=cwd, env=cli_env(cache), capture_output=True, text=True, timeout=timeout,
    )


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def shared_cache() -> Path:
    """The session's JAX compilation cache (tests/conftest.py): same shapes, so later runs
    skip most of the compile."""
    return Path(os.environ["XDG_CACHE_HOME"])


# --- bad input: one line, exit 2, nothing created ---------------------------------------

BAD_INPUTS = [
    pytest.param(["--set", "learning_rate=3e-4"], "learning_rate", id="unknown-key"),
    pytest.param(["--set", "num_envs=four"], "num_envs", id="wrong-type-int"),
    pytest.param(["--set", "lr=fast"], "lr", id="wrong-type-float"),
    pytest.param(["--set", "anneal_lr=3"], "anneal_lr", id="wrong-type-bool"),
    pytest.param(["--set", "lr=0"], "lr", id="out-of-range-lr"),
    pytest.param(["--set", "gamma=1.5"], "gamma", id="out-of-range-gamma"),
    pytest.param(["--set", "lr=inf"], "lr", id="not-finite-lr"),
    pytest.param(["--set", "num_envs=0"], "num_envs", id="out-of-range-num-envs"),
    pytest.param(["--set", "env=CartPole-v9"], "env", id="unknown-env"),
    pytest.param(["--set", "num_minibatches=3"], "num_minibatches", id="minibatches-not-dividing"),
    pytest.param(["--set", "lr"], "--set", id="set-without-equals"),
    pytest.param(["--config", "bad.toml"], "--config", id="malformed-toml"),
    pytest.param(["--config", "missing.toml"], "--config", id="missing-config"),
    pytest.param(["--config", "table.toml"], "--config: table.toml: ppo", id="toml-table"),
    # A bad value in a file names the file: the same key may also come from --set.
    pytest.param(["--config", "wrong.toml"], "--config: wrong.toml: lr", id="toml-wrong-type"),
    pytest.param(["--set", "devices=2", "--set", "num_envs=3"], "num_envs", id="envs-not-divisible-by-devices"),
    # On CPU `devices` > 1 asks XLA for that many host devices, so 64 of them exist and
    # the default 4 environments cannot be split over them.
    pytest.param(["--set", "devices=64"], "num_envs", id="devices-64"),
]


@pytest.mark.parametrize("args,field", BAD_INPUTS)
def test_bad_input_is_one_line_exit_2(tmp_path, args, field):
    (tmp_path / "bad.toml").write_text('lr = 3e-4\nenv = "CartPole-v1"\nnum_envs = = 4\n', encoding="utf-8")
    (tmp_path / "table.toml").write_text("[ppo]\nlr = 3e-4\n", encoding="utf-8")
    (tmp_path / "wrong.toml").write_text('lr = "fast"\n', encoding="utf-8")
    result = rltui(["launch", "--no-ui", *args], tmp_path)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"rltui: error: {field}:"), lines[0]
    assert "Traceback" not in result.stderr + result.stdout
    assert not (tmp_path / "runs").exists()
    if args[-1] == "bad.toml":
        assert "line 3" in lines[0]
    if args[-1] == "missing.toml":
        assert "missing.toml" in lines[0]
    if args[-1] == "lr=inf":
        assert "not a finite number" in lines[0], lines[0]


def test_more_devices_than_available(tmp_path):
    """With the host device count fixed by the user, asking for more is refused."""
    result = rltui(
        ["launch", "--no-ui", "--set", "devices=64"], tmp_path,
        XLA_FLAGS="--xla_force_host_platform_device_count=2",
    )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("rltui: error: devices:"), lines[0]
    assert "64" in lines[0] and "2" in lines[0]
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "runs").exists()


def test_bad_input_is_rejected_before_jax_is_imported(tmp_path):
    result = python(
        """
        import sys
        from rltui.cli import main
        rc = main(["launch", "--no-ui", "--set", "lr=0"])
        print("RC", rc, "JAX", "jax" in sys.modules)
        """,
        tmp_path,
    )
    assert "RC 2 JAX False" in result.stdout, result.stdout + result.stderr


def test_a_warning_and_an_error_are_each_one_line_on_stderr(capsys):
    from rltui.errors import ExitCode, report, warn

    warn("--theme has no effect without the dashboard")
    assert report("lr: expected a number") == ExitCode.USAGE
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == ("rltui: warning: --theme has no effect without the dashboard\n"
                            "rltui: error: lr: expected a number\n")


# --- help and envs ------------------------------------------------------------------------


def test_top_level_help(tmp_path):
    result = rltui(["--help"], tmp_path, timeout=30)
    assert result.returncode == 0
    assert "launch" in result.stdout and "envs" in result.stdout
    assert "usage: rltui" in result.stdout


def test_launch_help_mentions_every_option_and_key(tmp_path):
    result = rltui(["launch", "--help"], tmp_path, timeout=30)
    assert result.returncode == 0
    text = result.stdout
    for option in ("--no-ui", "--config", "--set", "--run-dir", "--name", "--no-compile-cache"):
        assert option in text, option
    for key, info in KEYS.items():
        label = key + ("*" if info.live else "")
        assert f"  {label} " in text, key
    assert not (tmp_path / "runs").exists()
    # Whole numbers as written in a file; the defaults named as PPO's, the others' pointed to.
    assert re.search(r"  learning_starts\* .*\(default: 10000\)$", text, re.M)
    assert ("the defaults shown are the built-in ones, which ppo trains with: algo = reinforce, pqn, dqn or sac "
            "replaces some with its own") in " ".join(text.split())


def test_no_command_prints_help_and_exits_2(tmp_path):
    result = rltui([], tmp_path, timeout=30)
    assert result.returncode == 2
    assert "launch" in result.stdout


def test_envs_lists_environments(tmp_path):
    result = rltui(["envs"], tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    rows = {line.split()[0]: line for line in result.stdout.splitlines()[1:] if line.strip()}
    cartpole = rows["CartPole-v1"].split()
    assert cartpole[1] == "4"
    assert "discrete" in rows["CartPole-v1"] and "(2)" in rows["CartPole-v1"]
    assert "continuous" in rows["Pendulum-v1"]
    assert rows["Pendulum-v1"].split()[1] == "3"
    assert "Acrobot-v1" in rows
    # The algorithms with settings for an env stand apart from the settings after them.
    assert re.search(r" ppo, pqn, dqn {2,}preset: ", rows["CartPole-v1"]), rows["CartPole-v1"]


def test_watch_help_says_what_a_q_learners_view_shows(tmp_path):
    text = " ".join(rltui(["watch", "--help"], tmp_path, timeout=30).stdout.split())
    assert "or for pqn and dqn each action's Q(s, a) and their max" in text
    assert "--sample sample actions from the policy, epsilon-greedy at eps_end for pqn and dqn" in text


# --- a tiny real run ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("tiny")
    run_dir = cwd / "run"
    started = time.monotonic()
    result = rltui(
        ["launch", "--no-ui", "--run-dir", str(run_dir), "--no-compile-cache", "--set", "total_timesteps=4096", *TINY],
        cwd, timeout=400,
    )
    return cwd, run_dir, result, time.monotonic() - started


def test_tiny_run_succeeds(tiny_run):
    cwd, run_dir, result, _ = tiny_run
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    assert "Finished after 16 updates" in result.stderr
    # (joined: wrapping of long paths has its own test below)
    assert "Run files" in result.stderr and str(run_dir) in result.stderr.replace("\n", "")
    # how to train on: a finished run needs a larger total
    assert "To train on: rltui launch --resume" in result.stderr and "total_timesteps=" in result.stderr
    assert sorted(p.name for p in run_dir.iterdir()) == [
        "checkpoints",
        "config.toml",
        "events.jsonl",
        "metrics.jsonl",
        "rltui.lock",
    ]
    assert [p.name for p in (run_dir / "checkpoints").iterdir()] == ["checkpoint-000000016.msgpack"]
    assert not (cwd / "runs").exists()


def test_a_name_already_taken_gets_a_number_and_says_so(tmp_path, shared_cache):
    (tmp_path / "runs" / "mine").mkdir(parents=True)
    result = rltui(["launch", "--no-ui", "--name", "mine", "--set", f"total_timesteps={TINY_STEPS}", *TINY],
                   tmp_path, cache=shared_cache, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"rltui: {Path('runs', 'mine')} already exists; this run writes to {Path('runs', 'mine-2')}" in result.stderr
    assert (tmp_path / "runs" / "mine-2" / "metrics.jsonl").exists()
    assert list((tmp_path / "runs" / "mine").iterdir()) == []  # left as it was


def test_tiny_run_config_toml(tiny_run):
    _, run_dir, result, _ = tiny_run
    config = tomllib.loads((run_dir / "config.toml").read_text(encoding="utf-8"))
    assert config["env"] == "CartPole-v1"
    assert config["total_timesteps"] == 4096
    assert config["num_envs"] == 4 and config["num_steps"] == 64
    assert config["num_minibatches"] == 2 and config["update_epochs"] == 1
    unset = {name for name, key in KEYS.items() if key.default is None}  # TOML has no null: left out
    # PPO on CartPole: every key but the other algorithms' own and those for continuous actions.
    unread = {name for name, key in KEYS.items() if not key.matters_for("ppo", "discrete")}
    assert {"tau", "eps_start", "q_lambda", "log_std"} <= unread
    assert set(config) == set(KEYS) - unset - unread


def test_tiny_run_metrics_jsonl(tiny_run):
    _, run_dir, result, _ = tiny_run
    records = read_jsonl(run_dir / "metrics.jsonl")
    assert len(records) == 4096 // TINY_STEPS == 16
    assert [r["update"] for r in records] == list(range(1, 17))
    for r in records:
        missing = [f for f in METRIC_FIELDS if f not in r]
        assert not missing, missing
        assert r["env_steps"] == r["update"] * TINY_STEPS
        assert r["episode_return"] is None or isinstance(r["episode_return"], (int, float))
        for name in ("sps", "policy_loss", "value_loss", "entropy", "approx_kl", "clip_frac", "grad_norm", "lr"):
            assert isinstance(r[name], (int, float)), (name, r[name])
        assert r["sps"] > 0 and r["value_loss"] >= 0 and r["entropy"] >= 0 and r["grad_norm"] >= 0
        assert 0 <= r["clip_frac"] <= 1
    walls = [r["wall_time"] for r in records]
    assert walls[0] > 0
    assert all(b >= a for a, b in zip(walls, walls[1:])), walls
    # anneal_lr defaults on: the learning rate starts at lr and goes down
    lrs = [r["lr"] for r in records]
    assert lrs[0] == pytest.approx(2.5e-4, rel=1e-5)
    assert all(b < a for a, b in zip(lrs, lrs[1:]))
    # CartPole gives +1 per step: some episode finished, returns are positive
    returns = [r["episode_return"] for r in records if r["episode_return"] is not None]
    assert returns and all(v > 0 for v in returns)


def test_tiny_run_events_jsonl(tiny_run):
    _, run_dir, result, _ = tiny_run
    events = read_jsonl(run_dir / "events.jsonl")
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "compiled" and kinds[-1] == "finished", kinds
    assert "error" not in kinds and "nonfinite" not in kinds
    assert events[-1]["update"] == 16
    assert "16" in events[-1]["message"]


def test_tiny_run_event_lines_show_update_index(tiny_run):
    """Headless prints event lines as '[update N] message'."""
    _, run_dir, result, _ = tiny_run
    compiled = [line for line in result.stderr.splitlines() if "compiled in" in line]
    assert compiled, result.stderr
    assert compiled[0].lstrip().startswith("[update 0] compiled in"), compiled[0]


def test_second_run_into_same_dir_is_refused(tiny_run):
    cwd, run_dir, first, _ = tiny_run
    assert first.returncode == 0
    metrics_before = (run_dir / "metrics.jsonl").read_bytes()
    config_before = (run_dir / "config.toml").read_bytes()
    result = rltui(
        ["launch", "--no-ui", "--run-dir", str(run_dir), "--no-compile-cache", "--set", "total_timesteps=512", *TINY],
        cwd, timeout=120,
    )
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("rltui: error: --run-dir:"), result.stderr
    assert str(run_dir) in lines[0]
    assert (run_dir / "metrics.jsonl").read_bytes() == metrics_before
    assert (run_dir / "config.toml").read_bytes() == config_before


# --- the headless path does not import the dashboard -------------------------------------

_GUARD = """
import sys

class Guard:
    attempts = []
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("textual", "plotext"):
            Guard.attempts.append(name)
        return None

sys.meta_path.insert(0, Guard())

def leaked():
    return sorted({*Guard.attempts, *(m for m in sys.modules if m.split(".")[0] in ("textual", "plotext"))})
"""


def test_session_and_trainers_do_not_import_dashboard(tmp_path):
    result = python(
        _GUARD + """
import trainers, rltui.session, rltui.session.recorder, rltui.headless
import rltui.control.server, rltui.control.remote, rltui.session.interface
print("LEAKED", leaked())
""",
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "LEAKED []" in result.stdout, result.stdout + result.stderr


def guarded_main(args: list[str], cwd: Path, cache: Path | None = None) -> subprocess.CompletedProcess:
    """`rltui ARGS` in-process under the import guard; prints RC and LEAKED."""
    code = _GUARD + """
from rltui.cli import main
rc = main(sys.argv[1:])
print("RC", rc)
print("LEAKED", leaked())
"""
    return python(code, cwd, cache=cache, timeout=400, args=args)


def test_headless_run_does_not_import_dashboard(tmp_path, shared_cache):
    run_dir = tmp_path / "run"
    result = guarded_main(
        ["launch", "--no-ui", "--run-dir", str(run_dir), "--set", "total_timesteps=512", *TINY], tmp_path, shared_cache
    )
    assert "RC 0" in result.stdout, result.stdout + result.stderr[-3000:]
    assert "LEAKED []" in result.stdout, result.stdout
    assert len(read_jsonl(run_dir / "metrics.jsonl")) == 2


def test_run_reading_commands_do_not_import_dashboard(tmp_path):
    # compare (its table), export and info read runs without Textual or plotext, though
    # compare writes durations and step counts with rltui.formatting.
    from test_export import make_run

    run = make_run(tmp_path / "runs" / "a", 3)
    for args in (["compare", str(run)], ["export", str(run), "--csv", "-"], ["info", str(run.parent)]):
        result = guarded_main(args, tmp_path)
        assert "LEAKED []" in result.stdout, args + [result.stdout, result.stderr[-2000:]]


# --- signals -----------------------------------------------------------------------------


def _start_long_run(cwd: Path, cache: Path, extra=()) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "rltui", "launch", "--no-ui", *extra, "--set", "total_timesteps=2e6", *TINY],
        cwd=cwd, env=cli_env(cache), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _wait_for_metrics(proc: subprocess.Popen, path: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text(encoding="utf-8").strip():
            return
        if proc.poll() is not None:
            pytest.fail(f"run ended early with {proc.returncode}: {proc.communicate()[1][-3000:]}")
        time.sleep(0.2)
    pytest.fail("no metrics within timeout")


def _stop_with(sig: int, tmp_path: Path, cache: Path, extra, run_dir: Path):
    proc = _start_long_run(tmp_path, cache, extra)
    try:
        _wait_for_metrics(proc, run_dir / "metrics.jsonl")
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, stderr


def _assert_stopped_early(run_dir: Path, stderr: str) -> None:
    total = 2_000_000 // TINY_STEPS
    records = read_jsonl(run_dir / "metrics.jsonl")
    assert 1 <= len(records) < total
    assert [r["update"] for r in records] == list(range(1, len(records) + 1))
    events = read_jsonl(run_dir / "events.jsonl")
    kinds = [e["kind"] for e in events]
    assert "stopping" in kinds and kinds[-1] == "finished", (kinds, stderr[-3000:])
    assert events[-1]["update"] == len(records)
    updates = f"{len(records)} update" + ("" if len(records) == 1 else "s")
    assert f"Stopped after {updates} (" in stderr, stderr[-2000:]
    assert "Traceback" not in stderr


def test_sigterm_stops_cleanly(tmp_path, shared_cache):
    run_dir = tmp_path / "run"
    code, stderr = _stop_with(signal.SIGTERM, tmp_path, shared_cache, ["--run-dir", str(run_dir)], run_dir)
    assert code == 0, stderr[-3000:]
    _assert_stopped_early(run_dir, stderr)
    assert str(run_dir) in stderr.replace("\n", "")


def test_sigint_stops_cleanly(tmp_path, shared_cache):
    run_dir = tmp_path / "runs" / "ctrlc"
    code, stderr = _stop_with(signal.SIGINT, tmp_path, shared_cache, ["--name", "ctrlc"], run_dir)
    assert code == 0, stderr[-3000:]
    assert "Stopped" in stderr
    assert "next chunk boundary" in stderr
    assert "Traceback" not in stderr, stderr[-3000:]
    _assert_stopped_early(run_dir, stderr)
    assert "runs/ctrlc" in stderr


# --- the headless report, driven by a fake trainer (no JAX) -------------------------------

_FAKE_HEADLESS = """
import math, sys, time
from pathlib import Path
from rltui.headless import run_headless
from rltui.session import TrainingSession
from rltui.session.metrics import TRAINER_METRICS
from trainers.hparams import DynamicHParams

class Fake:
    steps_per_update = 8
    max_chunk_updates = 4
    def __init__(self, mode):
        self.mode, self.done = mode, 0
    def build(self, hp):
        pass
    def run_chunk(self, n, hp):
        if self.mode.startswith("slow"):  # a chunk in flight until the test lets it end
            (run_dir.parent / "started").touch()
            deadline = time.monotonic() + 60
            while not (run_dir.parent / "release").exists() and time.monotonic() < deadline:
                time.sleep(0.01)
        rows = []
        for _ in range(n):
            self.done += 1
            if self.mode == "error" and self.done == 3:
                raise ValueError("observation [obs] is not finite")
            row = {k: 1.0 for k in TRAINER_METRICS}
            if self.mode == "nan" and self.done == 3:
                row["policy_loss"] = math.nan
            rows.append(row)
        return rows
    def describe(self):
        return {}

class CtrlCAtTheEnd:
    # Two Ctrl+C once the end is written, before the process exits: the main thread
    # handles them while this (the session thread) waits.
    def on_state(self, state, message):
        if state.value == "finished":
            import os, signal
            for _ in range(2):
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.2)
            time.sleep(0.3)
    def on_metrics(self, snapshot):
        pass
    def on_event(self, event):
        pass

mode, run_dir = sys.argv[1], Path(sys.argv[2])
session = TrainingSession(Fake(mode), DynamicHParams.create(), 6)
if mode == "late-ctrl-c":
    session.add_listener(CtrlCAtTheEnd())
sys.exit(run_headless(session, run_dir, on_abort=lambda: (run_dir.parent / "aborted").touch(),
                      second_interrupt_quits=mode != "slow-api"))
"""


class Said:
    """What a process writes to a pipe, collected by a thread as it comes."""

    def __init__(self, stream):
        self._parts: list[str] = []
        self._reader = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._reader.start()

    def _read(self, stream) -> None:
        for line in stream:
            self._parts.append(line)

    @property
    def text(self) -> str:
        return "".join(self._parts)

    def wait_for(self, needle: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while needle not in self.text:
            assert time.monotonic() < deadline, f"{needle!r} never said: {self.text[-3000:]}"
            time.sleep(0.01)

    def all(self, timeout: float = 30) -> str:
        """Everything, once the pipe has closed."""
        self._reader.join(timeout)
        return self.text


def start_fake_chunk(tmp_path: Path, mode: str, run_dir: Path) -> tuple[subprocess.Popen, Said]:
    """The fake headless run in `mode` ("slow..."), once its first chunk is in flight: that
    chunk lasts until the test creates the file `release`."""
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_FAKE_HEADLESS), mode, str(run_dir)], cwd=tmp_path,
        env=cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    said = Said(proc.stderr)
    deadline = time.monotonic() + 30
    while not (tmp_path / "started").exists():
        assert time.monotonic() < deadline and proc.poll() is None, said.all()
        time.sleep(0.01)
    return proc, said


def fake_headless(tmp_path: Path, mode: str, run_dir: str) -> subprocess.CompletedProcess:
    return python(_FAKE_HEADLESS, tmp_path, args=[mode, run_dir], timeout=60)


def test_headless_long_run_dir_is_printed_unbroken(tmp_path):
    """Logs (stderr not a terminal) must hold the run dir as one copyable string."""
    run_dir = str(tmp_path / ("a-rather-long-run-directory-name-" * 3) / "seed-0")
    result = fake_headless(tmp_path, "ok", run_dir)
    assert result.returncode == 0, result.stderr
    assert "Finished after 6 updates" in result.stderr
    assert run_dir in result.stderr, result.stderr


def test_headless_run_dir_with_brackets_is_printed_verbatim(tmp_path):
    run_dir = str(tmp_path / "runs" / "[exp1]")
    result = fake_headless(tmp_path, "ok", run_dir)
    assert result.returncode == 0, result.stderr
    assert run_dir in result.stderr.replace("\n", ""), result.stderr


def test_headless_trainer_error_exits_1_with_the_message(tmp_path):
    result = fake_headless(tmp_path, "error", str(tmp_path / "r"))
    assert result.returncode == 1, result.stderr
    assert "Training failed" in result.stderr
    assert "observation [obs] is not finite" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_headless_nonfinite_stops_and_exits_3(tmp_path):
    result = fake_headless(tmp_path, "nan", str(tmp_path / "r"))
    assert result.returncode == 3, result.stderr
    assert "diverged" in result.stderr
    assert "Finished" not in result.stderr


def test_ctrl_c_after_the_end_leaves_a_clean_exit(tmp_path):
    # Once `main` has returned the run's files are complete; a Ctrl+C during the
    # interpreter's teardown must not turn exit 0 into "killed by SIGINT".
    result = python(
        """
        import atexit, os, signal, time
        import rltui.cli as cli

        def late_ctrl_c():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.2)

        cli.main = lambda argv=None: 0
        atexit.register(late_ctrl_c)
        cli.entry()
        """,
        tmp_path,
    )
    assert result.returncode == 0 and "KeyboardInterrupt" not in result.stderr, result.stderr


def test_output_into_a_pipe_closed_early_ends_quietly(tmp_path):
    # `rltui envs | head -1`: the reader is gone before rltui writes (gymnax's import
    # takes a second), so every write meets a closed pipe.
    proc = subprocess.Popen(
        [sys.executable, "-m", "rltui", "envs"], cwd=tmp_path, env=cli_env(),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    proc.stdout.close()
    stderr = proc.stderr.read()
    assert proc.wait(timeout=60) == 128 + signal.SIGPIPE, stderr
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr


def test_for_the_python_api_a_second_ctrl_c_still_waits_for_the_boundary(tmp_path):
    """A notebook's kernel gets Ctrl+C from its interrupt button: the API never quits the
    process, it stops at the chunk boundary and writes the final checkpoint."""
    run_dir = tmp_path / "r"
    proc, said = start_fake_chunk(tmp_path, "slow-api", run_dir)
    try:
        proc.send_signal(signal.SIGINT)
        said.wait_for("Stopping at the next chunk boundary")  # the first is handled: a stop is requested
        proc.send_signal(signal.SIGINT)
        said.wait_for("Still stopping at the next chunk boundary")  # the second is handled, the chunk still in flight
        (tmp_path / "release").touch()
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    stderr = said.all()
    assert "Still stopping at the next chunk boundary" in stderr, stderr
    assert "Ctrl+C again" not in stderr and "Aborted" not in stderr, stderr
    assert not (tmp_path / "aborted").exists()
    assert proc.returncode != 130, stderr


def test_ctrl_c_twice_after_the_final_checkpoint_leaves_the_run_finished(tmp_path):
    # The run's end is written, its listeners (loggers, say) still closing: a Ctrl+C says so,
    # a second quits at once, and neither makes the finished run an aborted one.
    run_dir = tmp_path / "r"
    result = fake_headless(tmp_path, "late-ctrl-c", str(run_dir))
    assert result.returncode == 0, result.stderr
    said = " ".join(result.stderr.split())
    assert "The run has ended and its files are complete; closing… (Ctrl+C again to quit now)" in said, said
    assert f"Quit; the run's files are complete. Run files: {run_dir}" in said, said
    assert "Aborted" not in said and "Stopping" not in said, said
    assert (tmp_path / "aborted").exists()  # the control socket is removed as on any quit
    assert not (run_dir / "events.jsonl").exists()  # no "aborted" event (this fake session records none)


def test_headless_second_ctrl_c_quits_at_once_and_cleans_up(tmp_path):
    run_dir = tmp_path / "r"
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "checkpoints" / "checkpoint-000000004.msgpack").write_bytes(b"")
    proc, said = start_fake_chunk(tmp_path, "slow", run_dir)
    try:
        proc.send_signal(signal.SIGINT)
        said.wait_for("Stopping at the next chunk boundary")  # the first is handled; the chunk is still in flight
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    stderr = said.all()
    assert proc.returncode == 130, stderr
    assert "next chunk boundary" in stderr, stderr
    assert ("Aborted without a final checkpoint; the latest checkpoint is from update 4. "
            f"Run files: {run_dir}") in " ".join(stderr.split()), stderr
    assert (tmp_path / "aborted").exists()  # launch removes the control socket there
    # the events log says how the run ended, so the runs view calls it aborted, not crashed
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert events[-1]["kind"] == "aborted"
    assert state_of(events, live=False) == RunState(
        "aborted", "aborted by a second Ctrl+C, without a final checkpoint; the latest checkpoint is from update 4")
    assert "Traceback" not in stderr


def test_launch_without_a_terminal_runs_headless(tmp_path, shared_cache):
    """`rltui launch` with output redirected (CI, a pipe) would draw a dashboard nobody can
    quit: it runs headless instead, and says so."""
    run_dir = tmp_path / "run"
    result = guarded_main(
        ["launch", "--run-dir", str(run_dir), "--set", "total_timesteps=512", *TINY], tmp_path, shared_cache
    )
    assert "RC 0" in result.stdout, result.stdout + result.stderr[-3000:]
    assert "running headless" in result.stderr, result.stderr[-3000:]
    assert "LEAKED []" in result.stdout, result.stdout
    assert len(read_jsonl(run_dir / "metrics.jsonl")) == 2
    assert not (run_dir / "control.sock").exists()


# --- hostile input: one line, exit 2, nothing written -----------------------------------------

HUGE_INT = "1" + "0" * 400
HUGE_INT_SHOWN = "1" + "0" * 37 + "..." + "0" * 39 + " (401 digits)"
LONG_ENV_SHOWN = "'" + "x" * 37 + "..." + "x" * 38 + "' (500,000 characters)"


def _hostile_files(cwd: Path) -> None:
    (cwd / "latin1.toml").write_bytes(b'lr = 3e-4\nenv = "\xff\xfe"\n')
    (cwd / "deep.toml").write_text("hidden_sizes = " + "[" * 100_000 + "]" * 100_000 + "\n", encoding="utf-8")
    (cwd / "big.toml").write_text(f"lr = {HUGE_INT}\n", encoding="utf-8")
    (cwd / "env.toml").write_text('env = "' + "x" * 500_000 + '"\n', encoding="utf-8")
    (cwd / "huge.toml").write_text('env = "' + "x" * 50_000_000 + '"\n', encoding="utf-8")


HOSTILE_LAUNCHES = [
    pytest.param(
        ["--config", "latin1.toml"],
        "--config: latin1.toml is not UTF-8 text (byte 0xff at offset 17); TOML files are UTF-8",
        id="not-utf8",
    ),
    pytest.param(
        ["--config", "deep.toml"],
        "--config: deep.toml is not readable as TOML: arrays are nested too deeply to read",
        id="nested-100k",
    ),
    pytest.param(
        ["--config", "big.toml"],
        f"--config: big.toml: lr: expected a number > 0, got {HUGE_INT_SHOWN}, which is not a finite number",
        id="huge-int-lr-toml",
    ),
    pytest.param(
        ["--set", f"lr={HUGE_INT}"],
        f"lr: expected a number > 0, got {HUGE_INT_SHOWN}, which is not a finite number",
        id="huge-int-lr-set",
    ),
    pytest.param(["--set", "seed=1e30"], "seed: expected an integer in [0, 4294967295], got 1e+30", id="seed-1e30"),
    pytest.param(
        ["--set", "num_envs=2147483648"],
        "num_envs: expected an integer in [1, 2147483647], got 2147483648",
        id="num-envs-beyond-int32",
    ),
    pytest.param(
        ["--config", "env.toml"],
        f"--config: env.toml: env: unknown environment {LONG_ENV_SHOWN}; run `rltui envs` to list the supported ones",
        id="env-500KB",
    ),
    pytest.param(
        ["--config", "huge.toml"],
        "--config: cannot read huge.toml: is 47.7 MiB, more than the 1 MiB rltui reads of a configuration",
        id="config-50MB",
    ),
    pytest.param(
        ["--name", "exp/one"],
        "--name: expected a name without '/' (one directory under runs/; --run-dir takes a path), got 'exp/one'",
        id="name-with-slash",
    ),
    pytest.param(
        ["--name", "a/../../escape"],
        "--name: expected a name without '/' (one directory under runs/; --run-dir takes a path), got 'a/../../escape'",
        id="name-escaping-runs",
    ),
    pytest.param(["--name", ".."], "--name: expected a directory name, got '..'", id="name-dotdot"),
    pytest.param(["--name", ""], "--name: expected a directory name, got ''", id="name-empty"),
]


@pytest.mark.parametrize("args,message", HOSTILE_LAUNCHES)
def test_hostile_launch_input_is_one_line_exit_2(tmp_path, args, message):
    cwd = tmp_path / "work"
    cwd.mkdir()
    _hostile_files(cwd)
    before = sorted(tmp_path.rglob("*"))
    result = rltui(["launch", "--no-ui", *args], cwd)
    assert (result.returncode, result.stderr) == (2, f"rltui: error: {message}\n")
    assert sorted(tmp_path.rglob("*")) == before  # no runs/, nothing beside it


def test_eval_seed_beyond_a_prng_key_is_one_line_exit_2(tmp_path):
    result = rltui(["eval", "missing.msgpack", "--seed", "99999999999999999999999"], tmp_path)
    assert (result.returncode, result.stderr) == (
        2, "rltui: error: --seed: expected an integer in [0, 4294967295], got 99999999999999999999999\n"
    )


# --- crafted checkpoints: info, eval and resume --------------------------------------------

CKPT = "checkpoint-000000016.msgpack"


def _craft(tiny_run, cwd: Path, edit) -> Path:
    """A copy of the tiny run whose checkpoint `edit(outer, metadata)` changed; both checksums
    recomputed unless `edit` returns False (a file edited by hand)."""
    import hashlib
    import shutil

    import msgpack

    from trainers import checkpoint

    _, run_dir, result, _ = tiny_run
    assert result.returncode == 0, result.stderr[-3000:]
    copy = cwd / "run"
    shutil.copytree(run_dir, copy)
    path = copy / "checkpoints" / CKPT
    outer = msgpack.unpackb(path.read_bytes(), raw=False)
    metadata = json.loads(outer["metadata"])
    if edit(outer, metadata) is not False:
        outer["sha256"] = hashlib.sha256(outer["state"]).hexdigest()
        outer["sha256_all"] = checkpoint.content_digest(outer["version"], outer["metadata"], outer["sha256"])
    path.write_bytes(msgpack.packb(outer, use_bin_type=True))
    return path


def _set_metadata(**changes):
    def edit(outer, metadata):
        metadata.update(changes)
        outer["metadata"] = json.dumps(metadata, sort_keys=True)
    return edit


def _metadata_text(text):
    return lambda outer, metadata: outer.update(metadata=text)


def _tamper_update(outer, metadata):
    metadata["update"] = 999
    outer["metadata"] = json.dumps(metadata, sort_keys=True)
    return False


def _string_version(outer, metadata):
    outer["version"] = "1"
    return False


def _nan_params(outer, metadata):
    import numpy as np
    from flax import serialization

    state = serialization.msgpack_restore(outer["state"])
    stack = [state["params"]]
    while stack:
        node = stack.pop()
        for key, value in node.items():
            if isinstance(value, dict):
                stack.append(value)
            else:
                node[key] = np.full_like(value, np.nan)
    outer["state"] = serialization.msgpack_serialize(state)


CRAFTED = [
    pytest.param(_metadata_text("[1,2]"), "checkpoint metadata is damaged: expected a table of fields, got [1, 2]",
                 id="metadata-list"),
    pytest.param(_set_metadata(config="x"),
                 "checkpoint metadata is damaged: config should be a table of configuration keys, got 'x'",
                 id="config-string"),
    pytest.param(_set_metadata(update="abc"),
                 "checkpoint metadata is damaged: update should be an integer >= 0, got 'abc'", id="update-string"),
    pytest.param(_set_metadata(actions="both"),
                 "checkpoint metadata is damaged: actions should be discrete or continuous, got 'both'",
                 id="actions-unknown"),
    pytest.param(_tamper_update, "checkpoint is corrupted or edited (checksum mismatch in its metadata)",
                 id="update-edited"),
    pytest.param(_string_version, "checkpoint is damaged: its format version is '1', not a whole number",
                 id="version-string"),
]


@pytest.mark.parametrize("edit,problem", CRAFTED)
def test_crafted_checkpoint_is_one_line_exit_2_everywhere(tmp_path, tiny_run, edit, problem, capsys):
    # In this process: the one line and the exit code come from `main`, which `rltui`'s entry
    # point calls (the one-line errors of a separate process are tested above).
    from rltui.cli import main

    path = _craft(tiny_run, tmp_path, edit)
    files = {p: p.read_bytes() for p in path.parents[1].rglob("*") if p.is_file()}
    for args, flag in ((["info", path], "checkpoint"), (["eval", path, "--episodes", "2"], "checkpoint"),
                       (["launch", "--no-ui", "--resume", path, "--set", "total_timesteps=8192"], "--resume")):
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        assert (code, err) == (2, f"rltui: error: {flag}: {CKPT}: {problem}\n"), args
        assert out == ""
    assert {p: p.read_bytes() for p in path.parents[1].rglob("*") if p.is_file()} == files


@pytest.mark.parametrize("actions,shows_log_std", [("continuous", True), ("discrete", False), (None, True)],
                         ids=["continuous", "discrete", "older-unsaid"])
def test_info_lists_the_keys_of_the_runs_action_space(tmp_path, tiny_run, capsys, actions, shows_log_std):
    # log_std and log_std_init matter only for continuous actions; a checkpoint that does not
    # say its action space (written before it did) shows them all.
    def edit(outer, metadata):
        metadata.pop("actions", None)
        metadata.update({"actions": actions} if actions else {})
        outer["metadata"] = json.dumps(metadata, sort_keys=True)

    from rltui.cli import main

    path = _craft(tiny_run, tmp_path, edit)
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert ("log_std_init" in out) == shows_log_std and ("log_std " in out) == shows_log_std, out
    assert (f"actions      {actions}" in out.splitlines()) == (actions is not None)


def test_checkpoint_with_nan_params_is_reported_and_refused(tmp_path, tiny_run):
    path = _craft(tiny_run, tmp_path, _nan_params)
    files = {p: p.read_bytes() for p in path.parents[1].rglob("*") if p.is_file()}
    info = rltui(["info", str(path)], tmp_path, timeout=120)
    assert info.returncode == 0, info.stderr
    assert "parameters   contain NaN/inf (cannot be evaluated or resumed)" in info.stdout.splitlines()
    problem = "checkpoint parameters contain NaN/inf: the run had diverged when it was saved; use an earlier checkpoint"
    evaluated = rltui(["eval", str(path), "--episodes", "2"], tmp_path, timeout=120)
    assert (evaluated.returncode, evaluated.stderr, evaluated.stdout) == (2, f"rltui: error: {problem}\n", "")
    resumed = rltui(
        ["launch", "--no-ui", "--resume", str(path), "--set", "total_timesteps=8192"], tmp_path, timeout=300
    )
    assert (resumed.returncode, resumed.stderr) == (2, f"rltui: error: --resume: {problem}\n")
    assert {p: p.read_bytes() for p in path.parents[1].rglob("*") if p.is_file()} == files


def _no_params(outer, metadata):
    from flax import serialization

    state = serialization.msgpack_restore(outer["state"])
    del state["params"]
    outer["state"] = serialization.msgpack_serialize(state)


def test_checkpoint_without_params_is_refused_by_info_as_by_eval(tmp_path, tiny_run, capsys):
    # Nothing in it to be finite: info says what eval says, rather than "parameters finite".
    from rltui.cli import main

    path = _craft(tiny_run, tmp_path, _no_params)
    for args in (["info", str(path)], ["info", str(path), "--json"], ["eval", str(path), "--episodes", "2"]):
        assert main(args) == 2, args
        assert capsys.readouterr() == ("", "rltui: error: checkpoint is damaged: it holds no policy parameters\n")


def test_info_shows_metadata_text_that_no_terminal_could_print(tmp_path, tiny_run, capsys):
    # JSON may escape a lone surrogate, a str that no UTF-8 stream writes: it shows escaped.
    def edit(outer, metadata):
        metadata.update(created="\ud800", device_kind="cpu \udfff")
        outer["metadata"] = json.dumps(metadata, sort_keys=True)

    from rltui.cli import main

    path = _craft(tiny_run, tmp_path, edit)
    assert main(["info", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "saved        final checkpoint, \\ud800" in lines and "device       cpu \\udfff x 1" in lines
    assert main(["info", str(path), "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert (record["created"], record["device_kind"]) == ("\\ud800", "cpu \\udfff")


def test_a_checkpoint_larger_than_the_bound_is_refused_unread(tmp_path, capsys):
    from rltui.cli import main

    path = tmp_path / "huge.msgpack"
    with open(path, "wb") as file:
        file.truncate(5 * 10**9)  # sparse: no disk, and no memory unless read
    for command in ("info", "eval"):
        assert main([command, str(path)]) == 2
        assert capsys.readouterr().err == \
            "rltui: error: checkpoint: huge.msgpack: is 4.7 GiB, more than the 4 GiB rltui reads of a checkpoint\n"


@pytest.mark.parametrize("command", ["info", "eval", "launch --resume"])
def test_info_of_a_folder_of_runs_says_so_and_names_some(tmp_path, capsys, command):
    # `rltui info runs`: not "runs holds no checkpoints" but what runs is and what to type.
    from test_export import make_run

    from rltui.cli import main

    runs = tmp_path / "runs"
    make_run(runs / "b", 2)
    make_run(runs / "a", 2)
    (runs / "b" / "checkpoints").mkdir()
    (runs / "b" / "checkpoints" / "checkpoint-000000002.msgpack").write_bytes(b"")  # b first: it has one
    (runs / "notes").mkdir()  # no run: not named
    flag = "--resume" if command.startswith("launch") else "checkpoint"
    extra = ["--no-ui"] if command.startswith("launch") else []
    assert main([*command.split(), str(runs), *extra]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"rltui: error: {flag}: {runs} is a folder of runs; pick one: rltui {command} {runs / 'NAME'} (b, a)"]
    assert main([*command.split(), str(runs / "a"), *extra]) == 2  # a run without checkpoints says just that
    assert capsys.readouterr().err.splitlines() == [f"rltui: error: {flag}: {runs / 'a'} holds no checkpoints"]


def test_info_says_whether_the_checksum_covers_the_metadata(tmp_path, tiny_run):
    _, run_dir, _, _ = tiny_run
    current = rltui(["info", str(run_dir)], tmp_path, timeout=120)
    assert current.returncode == 0, current.stderr
    assert "checksum     ok" in current.stdout.splitlines()
    assert "parameters   finite" in current.stdout.splitlines()
    # written before the checksum covered the metadata: loads, and says what is covered
    path = _craft(tiny_run, tmp_path, lambda outer, metadata: outer.pop("sha256_all") and False)
    older = rltui(["info", str(path)], tmp_path, timeout=120)
    assert older.returncode == 0, older.stderr
    assert "checksum     ok, covers the state only (older format)" in older.stdout.splitlines()
    evaluated = rltui(["eval", str(path), "--episodes", "2"], tmp_path, timeout=300)
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    assert "update 16, 2 episodes" in evaluated.stdout
