"""Loggers (`loggers = ["tensorboard", "wandb"]`): event files read back with TensorBoard's
own reader and compared with metrics.jsonl, resume and rollback without duplicate steps,
W&B offline, a failing logger switched off with one warning, and bad values refused."""

from __future__ import annotations

import errno
import itertools
import json
import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rltui.config.build import build_config
from rltui.config.keys import ConfigError
from rltui.loggers.base import check_loggers
from rltui.loggers.layout import record_scalars
from rltui.loggers.listener import LoggerListener, open_loggers
from rltui.session.events import SessionEvent, SessionState

tensorboardX = pytest.importorskip("tensorboardX", reason="the tensorboard extra is not installed")
from rltui.loggers.tensorboard import CONFIG_TAG, TensorBoardLogger, read_events  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
STEPS = 128  # env steps per update in these tests


def record(update: int, seeds: int = 1, offset: float = 0.0) -> dict:
    """A metrics.jsonl record; episode_return is null in odd updates, as when no episode ended."""
    out = {
        "update": update, "env_steps": update * STEPS, "wall_time": 0.5 * update, "sps": 256.0,
        "episode_return": None if update % 2 else 10.0 * update + offset, "policy_loss": -0.01 * update + offset,
        "lr": 3e-4,
    }
    if seeds > 1:
        out["seeds"] = {"episode_return": [None if update % 2 else update + i + offset for i in range(seeds)]}
    return out


def accumulate(directory: Path):
    """TensorBoard's own reader on a run directory (an independent check of the framing)."""
    accumulator_module = pytest.importorskip(
        "tensorboard.backend.event_processing.event_accumulator", reason="tensorboard (the reader) is not installed"
    )
    accumulator = accumulator_module.EventAccumulator(str(directory), size_guidance={"scalars": 0, "tensors": 0})
    accumulator.Reload()
    return accumulator


def series(accumulator, tag: str) -> list[tuple[int, float]]:
    return [(e.step, e.value) for e in accumulator.Scalars(tag)]


def texts(accumulator, tag: str) -> list[tuple[int, str]]:
    return [(e.step, b"".join(e.tensor_proto.string_val).decode()) for e in accumulator.Tensors(tag + "/text_summary")]


def assert_matches(accumulator, records: list[dict]) -> None:
    """Every tag holds exactly the records' values at their env steps."""
    expected: dict[str, list[tuple[int, float]]] = {}
    for rec in records:
        for tag, value in record_scalars(rec).run.items():
            expected.setdefault(tag, []).append((rec["env_steps"], value))
    assert set(accumulator.Tags()["scalars"]) == set(expected)
    for tag, points in expected.items():
        got = series(accumulator, tag)
        assert [s for s, _ in got] == [s for s, _ in points], tag
        for (_, a), (_, b) in zip(got, points):
            assert math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9), (tag, a, b)


CONFIG = {"env": "CartPole-v1", "lr": 3e-4, "hidden_sizes": [16], "loggers": ["tensorboard"], "anneal_lr": False}


# --- the layout both loggers share -----------------------------------------------------------


def test_series_are_grouped_as_each_metric_declares_and_hparams_are_the_keys_read():
    from rltui.loggers.layout import hparam_keys
    from trainers.metrics_spec import METRICS

    tags = record_scalars({**record(2, seeds=2), "eval_return": 50.0, "epsilon": 0.5, "td_loss": 0.1}).run
    assert set(tags) == {"train/episode_return", "train/episode_return/seed_0", "train/episode_return/seed_1",
                         "loss/policy_loss", "schedule/lr", "train/sps", "eval/eval_return", "schedule/epsilon",
                         "loss/td_loss"}  # update and wall_time are each point's step and time, not series
    assert {spec.tag.split("/")[0] for spec in METRICS} == {"train", "loss", "eval", "schedule"}
    ppo, pqn = hparam_keys("ppo"), hparam_keys("pqn")
    assert {"lr", "clip_eps", "gae_lambda", "env", "seed"} <= set(ppo) and len(ppo) < 30
    assert "q_lambda" in pqn and not {"clip_eps", "ent_coef"} & set(pqn)
    assert not {"loggers", "chunk_seconds", "checkpoint_minutes", "sweep", "total_timesteps"} & set(ppo)


# --- the TensorBoard logger ---------------------------------------------------------------


def test_event_files_hold_every_metric_per_seed_config_and_events(tmp_path):
    tb = tmp_path / "tb"
    logger = TensorBoardLogger(tb, CONFIG)
    records = [record(u, seeds=3) for u in range(1, 11)]
    logger.write_records(records[:4])
    logger.write_event(4 * STEPS, "paused", "paused at update 4")
    logger.write_event(4 * STEPS, "hparams", "set lr=0.001")
    logger.write_records(records[4:])
    logger.write_event(10 * STEPS, "finished", "finished 10 updates")
    logger.close()

    acc = accumulate(tb)
    assert_matches(acc, records)
    assert series(acc, "train/episode_return/seed_2")[0] == (2 * STEPS, pytest.approx(4.0))
    assert {"train/episode_return", "loss/policy_loss", "schedule/lr", "train/sps"} <= set(acc.Tags()["scalars"])
    assert texts(acc, "events") == [
        (4 * STEPS, "**paused**: paused at update 4\n\n**hparams**: set lr=0.001"),
        (10 * STEPS, "**finished**: finished 10 updates"),
    ]
    [(step, config)] = texts(acc, CONFIG_TAG)
    assert step == 0 and 'env = "CartPole-v1"' in config
    # A session's hyperparameters, and no experiment: TensorBoard would take one run's for all.
    assert list(acc.PluginTagToContent("hparams")) == ["_hparams_/session_start_info"]


def test_rollback_cuts_back_so_no_step_repeats(tmp_path):
    tb = tmp_path / "tb"
    logger = TensorBoardLogger(tb, CONFIG)
    logger.write_records([record(u) for u in range(1, 11)])
    logger.write_event(6 * STEPS, "checkpoint", "saved checkpoint 6")
    logger.write_records([record(u) for u in range(11, 13)])
    # The session rolls back to the checkpoint of update 6, then trains on.
    logger.write_event(6 * STEPS, "rolled back", "rolled back from update 12 to the checkpoint of update 6")
    after = [record(u, offset=0.5) for u in range(7, 10)]
    logger.write_records(after)
    logger.close()

    acc = accumulate(tb)
    assert_matches(acc, [record(u) for u in range(1, 7)] + after)
    assert texts(acc, "events") == [
        (6 * STEPS, "**checkpoint**: saved checkpoint 6\n\n**rolled back**: rolled back from update 12 to the "
                    "checkpoint of update 6"),
    ]


def test_resume_goes_on_in_the_same_run_without_duplicates(tmp_path):
    tb = tmp_path / "tb"
    first = TensorBoardLogger(tb, CONFIG)
    first.write_records([record(u) for u in range(1, 9)])  # the process is killed after update 8...
    first.flush()  # ...without closing: whatever was flushed is on disk
    # ...and resumed from its checkpoint of update 5.
    second = TensorBoardLogger(tb, {**CONFIG, "total_timesteps": 4096})
    second.write_event(5 * STEPS, "resumed", "resumed from update 5")
    resumed = [record(u, offset=1.0) for u in range(6, 12)]
    second.write_records(resumed)
    second.close()

    acc = accumulate(tb)
    assert_matches(acc, [record(u) for u in range(1, 6)] + resumed)
    assert len(texts(acc, CONFIG_TAG)) == 1  # the configuration once, at step 0
    steps = [e.step for e in read_events(tb) if any(v.tag == "loss/policy_loss" for v in e.summary.value)]
    assert steps == sorted(set(steps))


def test_a_file_cut_short_by_a_crash_reads_up_to_the_cut(tmp_path):
    tb = tmp_path / "tb"
    logger = TensorBoardLogger(tb, CONFIG)
    logger.write_records([record(u) for u in range(1, 5)])
    logger.close()
    [path] = list(tb.iterdir())
    path.write_bytes(path.read_bytes()[:-7])
    steps = [e.step for e in read_events(tb) if e.summary.value and e.step > 0]
    assert steps == [STEPS, 2 * STEPS, 3 * STEPS]
    resumed = TensorBoardLogger(tb, CONFIG)  # goes on after the damaged record
    resumed.write_records([record(4)])
    resumed.close()
    assert_matches(accumulate(tb), [record(u) for u in range(1, 5)])


def test_a_long_event_file_resumes_and_rolls_back_a_record_at_a_time(tmp_path):
    # However long a run's event file grows, a resume or a rollback reads it in the memory of
    # one record, not of the file: here a file of 256 records of 2 KiB.
    import tracemalloc

    from tensorboardX.summary import text as text_summary

    from rltui.loggers.tensorboard import EventFileWriter

    tb = tmp_path / "tb"
    TensorBoardLogger(tb, CONFIG).close()
    writer = EventFileWriter(tb)
    for update in range(1, 257):
        writer.write_summary(text_summary("notes", f"{update:04d}" * 512), update * STEPS, 0.0)
    writer.close()
    size = sum(p.stat().st_size for p in tb.iterdir())
    assert size > 512 << 10
    tracemalloc.start()
    try:
        resumed = TensorBoardLogger(tb, CONFIG)  # reads every file to learn where it left off
        resumed.write_records([record(200)])  # at a step written before: cuts every file back
        resumed.close()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < size / 8
    steps = [e.step for e in read_events(tb) if any(v.tag == "notes/text_summary" for v in e.summary.value)]
    assert steps == [update * STEPS for update in range(1, 200)]


def test_an_event_record_past_its_bound_is_refused_in_one_line_naming_the_file(tmp_path, monkeypatch):
    from rltui.infra import read_limits
    tb = tmp_path / "tb"
    logger = TensorBoardLogger(tb, CONFIG)
    logger.write_records([record(1)])
    logger.close()
    [path] = list(tb.iterdir())
    monkeypatch.setattr(read_limits, "EVENT_RECORD_BYTES", 64)  # the configuration's text is longer
    warnings: list[str] = []
    listener = open_loggers(("tensorboard",), tb, CONFIG, STEPS, warnings.append)
    listener.on_state(SessionState.FINISHED, None)
    assert len(warnings) == 1
    assert re.fullmatch(rf"logger tensorboard could not start \(ReadLimitError: {re.escape(str(path))} holds a "
                        r"record of [\d.]+ (bytes|KiB), more than the 64 bytes rltui reads of one event\); the run "
                        r"goes on without it", warnings[0]), warnings[0]


def test_a_wandb_run_id_that_cannot_be_read_is_named_in_the_warning(tmp_path, monkeypatch):
    import types

    monkeypatch.setitem(sys.modules, "wandb", types.ModuleType("wandb"))
    monkeypatch.delenv("WANDB_RUN_ID", raising=False)
    (tmp_path / "wandb-run-id").mkdir()  # no regular file
    warnings: list[str] = []
    listener = open_loggers(("wandb",), tmp_path, CONFIG, STEPS, warnings.append)
    listener.on_state(SessionState.FINISHED, None)
    assert warnings == [f"logger wandb could not start (ReadLimitError: {tmp_path / 'wandb-run-id'} is not a "
                        "regular file); the run goes on without it"]


# --- the listener: a failing logger goes off, training goes on ------------------------------


class Failing:
    label = "broken"

    def __init__(self):
        self.calls = 0
        self.closed = False

    def write_records(self, records):
        self.calls += 1
        raise OSError(errno.ENOSPC, "No space left on device")

    def write_event(self, step, kind, message):
        pass

    def flush(self):
        pass

    def close(self):
        self.closed = True


class Snapshot:
    def __init__(self, records):
        self.new_records = records


class Rec:
    def __init__(self, update):
        self.update = update

    def to_json(self):
        return record(self.update)


def test_a_failing_logger_warns_once_and_is_switched_off(tmp_path):
    warnings: list[str] = []
    broken = Failing()
    good = TensorBoardLogger(tmp_path / "tb", CONFIG)
    listener = LoggerListener([broken, good], warnings.append, STEPS)
    for update in range(1, 4):
        listener.on_metrics(Snapshot((Rec(update),)))
    listener.on_event(SessionEvent("paused", 3, "paused at update 3", 1.5))
    listener.on_state(SessionState.FINISHED, None)

    assert broken.calls == 1 and broken.closed
    assert warnings == ["logger broken failed (OSError: [Errno 28] No space left on device); "
                        "it is off for the rest of this run"]
    assert listener.active == ()  # closed at the end of the session
    assert_matches(accumulate(tmp_path / "tb"), [record(u) for u in range(1, 4)])


class FullDisk:
    """An event file on a disk that has filled: every write raises ENOSPC; the rest is the
    real file's, so that a flush once it is closed raises as a real one does."""

    def __init__(self, file):
        self._file = file
        self.writes = 0

    def write(self, data):
        self.writes += 1
        raise OSError(errno.ENOSPC, "No space left on device")

    def __getattr__(self, name):
        return getattr(self._file, name)


def test_a_tensorboard_directory_that_fills_gives_one_line_and_is_written_no_more(tmp_path):
    warnings: list[str] = []
    logger = TensorBoardLogger(tmp_path / "tb", CONFIG)
    disk = logger._run.writer._file = FullDisk(logger._run.writer._file)  # the disk fills mid-run
    listener = LoggerListener([logger], warnings.append, STEPS)
    for update in range(1, 4):
        listener.on_metrics(Snapshot((Rec(update),)))
        listener.on_event(SessionEvent("paused", update, f"paused at update {update}", 1.5))
    listener.on_state(SessionState.FINISHED, None)

    assert warnings == ["logger tensorboard failed (OSError: [Errno 28] No space left on device); "
                        "it is off for the rest of this run"]
    assert disk.writes == 1 and disk.closed
    assert listener.active == ()


class Blocked:
    """A logger's start that hangs until released, as W&B's does with no network."""

    def __init__(self):
        self.release = threading.Event()
        self.started = threading.Event()
        self.logger = Recording()

    def __call__(self):
        self.started.set()
        self.release.wait(60)
        return self.logger


class Recording:
    label = "slow"

    def __init__(self):
        self.records: list[int] = []
        self.closed = threading.Event()

    def write_records(self, records):
        self.records += [r["update"] for r in records]

    def write_event(self, step, kind, message):
        pass

    def flush(self):
        pass

    def close(self):
        self.closed.set()


def test_a_logger_slow_to_start_holds_up_nothing_and_is_given_up_on_in_one_line():
    now = [0.0]
    warnings: list[str] = []
    blocked = Blocked()
    good = Recording()
    listener = LoggerListener([good], warnings.append, STEPS, starting=[("wandb", blocked)], start_timeout=30,
                              clock=lambda: now[0])
    assert blocked.started.wait(60)
    for update in range(1, 4):  # chunks go on while it starts: each call returns at once
        now[0] = 10.0 * update
        listener.on_metrics(Snapshot((Rec(update),)))
    assert not blocked.release.is_set()
    assert warnings == ["logger wandb did not start within 30 s; the run goes on without it"]
    assert listener.active == ("slow",)
    listener.on_metrics(Snapshot((Rec(4),)))
    blocked.release.set()  # it starts at last, too late: closed, and handed nothing
    assert blocked.logger.closed.wait(60)
    listener.on_state(SessionState.FINISHED, None)
    assert blocked.logger.records == [] and good.records == [1, 2, 3, 4] and good.closed.is_set()
    assert len(warnings) == 1


class NoNetwork(Recording):
    """W&B at the end of a run whose network has gone: writing out never finishes."""

    label = "wandb"

    def __init__(self):
        super().__init__()
        self.release = threading.Event()

    def close(self):
        self.release.wait(60)
        super().close()


def test_a_logger_that_cannot_write_out_holds_the_end_of_a_run_half_a_minute_at_most():
    # The process holds the run directory's lock until then, for a `--resume` to wait on.
    ticks = itertools.count(0.0, 30.0)  # each look at the clock finds 30 s gone
    stuck = NoNetwork()
    listener = LoggerListener([stuck], lambda message: None, STEPS, clock=lambda: next(ticks))
    closer = threading.Thread(target=listener.on_state, args=(SessionState.FINISHED, None), daemon=True)
    closer.start()
    closer.join(20)
    ended = not closer.is_alive()
    stuck.release.set()
    assert ended, "still waiting for the logger after 30 s"


def test_a_logger_that_starts_in_time_gets_every_record_from_the_first():
    blocked = Blocked()
    warnings: list[str] = []
    listener = LoggerListener([], warnings.append, STEPS, starting=[("wandb", blocked)], clock=lambda: 0.0)
    for update in range(1, 3):
        listener.on_metrics(Snapshot((Rec(update),)))
    blocked.release.set()
    listener.on_state(SessionState.FINISHED, None)
    assert blocked.logger.records == [1, 2] and blocked.logger.closed.is_set() and warnings == []


def test_a_logger_error_over_several_lines_is_said_in_one():
    warnings: list[str] = []

    def unreachable():
        raise ConnectionError("Timed out while retrying: connection refused\nConsider increasing init_timeout:\n  ...")

    listener = LoggerListener([], warnings.append, STEPS, starting=[("wandb", unreachable)])
    listener.on_state(SessionState.FINISHED, None)
    assert warnings == ["logger wandb could not start (ConnectionError: Timed out while retrying: connection "
                        "refused); the run goes on without it"]


def test_a_logger_that_cannot_start_is_reported_and_left_out(tmp_path, monkeypatch):
    warnings: list[str] = []
    (tmp_path / "run").write_text("a file where the run directory should be")
    listener = open_loggers(("jsonl", "tensorboard"), tmp_path / "run", CONFIG, STEPS, warnings.append)
    listener.on_state(SessionState.FINISHED, None)  # it starts on a thread of its own
    assert listener.active == ()
    assert len(warnings) == 1 and warnings[0].startswith("logger tensorboard could not start")


# --- bad values, refused before anything starts ---------------------------------------------


def test_loggers_key_accepts_lists_and_refuses_unknown_names():
    assert build_config({}, {"loggers": "tensorboard"}).loggers == ("tensorboard",)
    assert build_config({"loggers": ["jsonl", "wandb", "wandb"]}).loggers == ("jsonl", "wandb")
    assert build_config().loggers == ()
    with pytest.raises(ConfigError, match=r"^loggers: expected a list of names from jsonl, tensorboard, wandb"):
        build_config({}, {"loggers": ["tensorbord"]})


def test_a_missing_extra_names_the_pip_command(monkeypatch):
    import rltui.loggers.base as loggers

    monkeypatch.setattr(loggers.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ConfigError) as err:
        check_loggers(("jsonl", "tensorboard"))
    assert str(err.value) == (
        'loggers: tensorboard needs the tensorboardX package, which is not installed; '
        'install it with pip install "rltui[tensorboard]"'
    )


def cli_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    env["JAX_PLATFORMS"] = "cpu"
    return env


def test_cli_refuses_a_missing_extra_before_anything_starts(tmp_path):
    # find_spec is made to miss wandb in the child only: the CLI runs as a user's would.
    code = (
        "import importlib.util, sys; real = importlib.util.find_spec;"
        "importlib.util.find_spec = lambda n, *a: None if n == 'wandb' else real(n, *a);"
        "from rltui.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, "launch", "--no-ui", "--set", "loggers=[\"tensorboard\", \"wandb\"]",
         "--run-dir", str(tmp_path / "run")],
        cwd=tmp_path, env=cli_env(), capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        'rltui: error: loggers: wandb needs the wandb package, which is not installed; '
        'install it with pip install "rltui[wandb]"'
    ]
    assert not (tmp_path / "run").exists()
    assert "jax" not in result.stderr


# --- a real run: launch, resume, rollback-free history, compared with metrics.jsonl ----------

TINY = ["--set", "num_envs=4", "--set", "num_steps=32", "--set", "num_minibatches=2", "--set", "update_epochs=1",
        "--set", "hidden_sizes=[16]", "--set", "anneal_lr=false", "--set", "num_seeds=2"]


def read_metrics(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_a_run_and_its_resume_write_tensorboard_equal_to_metrics_jsonl(tmp_path):
    run = tmp_path / "run"
    common = ["--no-ui", *TINY, "--set", "loggers=tensorboard", "--set", "checkpoint_every_updates=1",
              "--set", "keep_checkpoints=100"]
    first = subprocess.run(
        [sys.executable, "-m", "rltui", "launch", *common, "--set", f"total_timesteps={8 * STEPS}",
         "--run-dir", str(run)],
        cwd=tmp_path, env=cli_env(), capture_output=True, text=True, timeout=300,
    )
    assert first.returncode == 0, first.stderr
    acc = accumulate(run)  # the run's own name in `tensorboard --logdir runs/`
    assert_matches(acc, read_metrics(run))
    assert "train/episode_return/seed_1" in acc.Tags()["scalars"]
    assert [kind for _, text in texts(acc, "events") for kind in ("compiled", "finished") if kind in text]

    # Resume from an earlier checkpoint than the last (chunk boundaries, where checkpoints
    # are written, depend on timing): metrics.jsonl and the event files both go back to it
    # and on from there.
    earlier = sorted(run.glob("checkpoints/checkpoint-*.msgpack"))[0]
    assert int(earlier.stem.split("-")[1]) < 8, earlier.name
    second = subprocess.run(
        [sys.executable, "-m", "rltui", "launch", *common, "--set", f"total_timesteps={12 * STEPS}",
         "--resume", str(earlier)],
        cwd=tmp_path, env=cli_env(), capture_output=True, text=True, timeout=300,
    )
    assert second.returncode == 0, second.stderr
    records = read_metrics(run)
    assert [r["update"] for r in records] == list(range(1, 13))
    assert_matches(accumulate(run), records)


# W&B whose server never answers, as with no network: its start waits for ever.
_WANDB_NO_ANSWER = """
import importlib.machinery, sys, threading, types
wandb = sys.modules["wandb"] = types.ModuleType("wandb")
wandb.__spec__ = importlib.machinery.ModuleSpec("wandb", None)
wandb.Settings = dict
wandb.init = lambda **options: threading.Event().wait()
from rltui.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _launch_until_a_warning(tmp_path: Path, command: list[str], env: dict[str, str]) -> tuple[list[dict], str]:
    """A long headless run with W&B, stopped (Ctrl+C) once it has logged a warning: its
    warning events, and what it printed."""
    run = tmp_path / "run"
    proc = subprocess.Popen(
        [*command, "launch", "--no-ui", *TINY, "--set", "loggers=wandb", "--set", f"total_timesteps={100000 * STEPS}",
         "--run-dir", str(run)],
        cwd=tmp_path, env={**cli_env(), **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not (run / "events.jsonl").exists() or '"warning"' not in (run / "events.jsonl").read_text():
            assert time.monotonic() < deadline and proc.poll() is None, "no warning"
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, stderr
    events = map(json.loads, (run / "events.jsonl").read_text().splitlines())
    return [e for e in events if e["kind"] == "warning"], stderr


def test_a_wandb_that_never_answers_holds_up_no_training_and_is_given_up_on_in_one_line(tmp_path):
    warnings, stderr = _launch_until_a_warning(tmp_path, [sys.executable, "-c", _WANDB_NO_ANSWER],
                                               {"WANDB_INIT_TIMEOUT": "2"})
    assert [w["message"] for w in warnings] == ["logger wandb did not start within 2 s; the run goes on without it"]
    assert warnings[0]["update"] >= 1  # training ran while it waited
    assert [line for line in stderr.splitlines() if "logger wandb" in line] == [
        f"[update {warnings[0]['update']}] {warnings[0]['message']}"]
    assert "Stopped after" in stderr  # and the run ended, its logger still waiting


def test_wandb_with_no_server_says_so_in_one_line(tmp_path):
    pytest.importorskip("wandb", reason="the wandb extra is not installed")
    warnings, stderr = _launch_until_a_warning(tmp_path, [sys.executable, "-m", "rltui"], {
        "WANDB_API_KEY": "k" * 40, "WANDB_ERROR_REPORTING": "false", "WANDB_INIT_TIMEOUT": "2",
        "WANDB_BASE_URL": "http://127.0.0.1:9",  # nothing listens there: no network beyond this machine
    })
    # Whichever gives up first, W&B or rltui, says so.
    said = r"logger wandb (did not start within 2 s|could not start \(CommError: [^\n]*\)); the run goes on without it"
    assert len(warnings) == 1 and re.fullmatch(said, warnings[0]["message"]), warnings
    assert [line for line in stderr.splitlines() if "logger wandb" in line] == [
        f"[update {warnings[0]['update']}] {warnings[0]['message']}"]
    assert "Traceback" not in stderr


# --- Weights & Biases, offline ---------------------------------------------------------------


def test_wandb_offline_writes_its_run_directory(tmp_path, monkeypatch):
    pytest.importorskip("wandb", reason="the wandb extra is not installed")
    for name in list(os.environ):
        if name.startswith("WANDB_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("WANDB_MODE", "offline")  # never the network
    monkeypatch.setenv("WANDB_SILENT", "true")
    from rltui.loggers.wandb_logger import WandbLogger
    from rltui.runfiles.names import WANDB_RUN_ID as ID_FILE

    logger = WandbLogger(tmp_path, CONFIG)
    logger.write_records([record(u, seeds=2) for u in range(1, 6)])
    logger.write_event(5 * STEPS, "paused", "paused at update 5")
    logger.close()
    import wandb

    wandb.teardown()  # ends wandb's service process, which writes the record log out
    run_id = (tmp_path / ID_FILE).read_text().strip()
    [run_dir] = list((tmp_path / "wandb").glob(f"offline-run-*-{run_id}"))
    [log] = list(run_dir.glob(f"run-{run_id}.wandb"))
    data = log.read_bytes()  # W&B's own record log, synced later by `wandb sync`
    for needle in (b"CartPole-v1", b"train/episode_return/seed_1", b"env_steps", b"paused at update 5"):
        assert needle in data, needle

    again = WandbLogger(tmp_path, CONFIG)  # a resumed run goes on in the same W&B run
    again.close()
    assert len(list((tmp_path / "wandb").glob(f"offline-run-*-{run_id}"))) >= 1
    assert (tmp_path / ID_FILE).read_text().strip() == run_id
