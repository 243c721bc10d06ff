"""A run keeps its training whatever happens around it (issue 21): its output going away,
a full disk, a hang-up, a Ctrl+C during start-up. Real `rltui` runs in subprocesses, with
faults injected at the write calls where a full disk would show."""

from __future__ import annotations

import errno
import json
import os
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from rltui.runfiles.names import METRICS_DISCARDED as DISCARDED
from rltui.session import recorder as recorder_module
from rltui.session.events import SessionEvent
from rltui.session.recorder import RunRecorder, truncate_metrics

from test_cli import cli_env

REPO = Path(__file__).resolve().parents[2]
TINY = ["--set", "num_envs=4", "--set", "num_steps=64", "--set", "num_minibatches=2", "--set", "update_epochs=1"]
TINY_STEPS = 256  # env steps per update


def launch_args(run_dir: Path, updates: int, *extra: str) -> list[str]:
    return ["launch", "--no-ui", "--run-dir", str(run_dir), "--set", f"total_timesteps={updates * TINY_STEPS}",
            *TINY, *extra]


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def checkpoint_names(run_dir: Path) -> list[str]:
    return sorted(p.name for p in (run_dir / "checkpoints").glob("checkpoint-*.msgpack"))


@pytest.fixture(scope="module")
def cache() -> Path:
    """The session's JAX compilation cache (tests/conftest.py): same shapes, so later runs compile fast."""
    return Path(os.environ["XDG_CACHE_HOME"])


def wait_for_metrics(proc: subprocess.Popen, path: Path, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text(encoding="utf-8").strip():
            return
        if proc.poll() is not None:
            pytest.fail(f"run ended early with {proc.returncode}")
        time.sleep(0.1)
    pytest.fail("no metrics within timeout")


# --- 1. the output goes away: training goes on ------------------------------------------


@pytest.mark.parametrize("when", ["after the first line", "mid-run"])
def test_closed_output_keeps_training_to_the_end(tmp_path, cache, when):
    # `rltui launch --no-ui ... 2>&1 | head -1`: the reader leaves; the run goes on as under
    # nohup, to its final checkpoint and exit code 0, and its events say the output went.
    # Mid-run, training must outlast the reader by far (a warm compile cache makes 120
    # updates a fraction of a second), so that the display writes again while it trains.
    run_dir, updates = tmp_path / "run", 120 if when == "after the first line" else 3000
    proc = subprocess.Popen(
        [sys.executable, "-m", "rltui", *launch_args(run_dir, updates, "--set", "checkpoint_every_updates=10")],
        cwd=tmp_path, env=cli_env(cache), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    try:
        proc.stdout.readline()
        if when == "mid-run":
            wait_for_metrics(proc, run_dir / "metrics.jsonl")
        proc.stdout.close()
        assert proc.wait(timeout=300) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    records = read_jsonl(run_dir / "metrics.jsonl")
    assert [r["update"] for r in records] == list(range(1, updates + 1))
    assert checkpoint_names(run_dir)[-1] == f"checkpoint-{updates:09d}.msgpack"
    events = read_jsonl(run_dir / "events.jsonl")
    assert {"kind": "warning", "message": "output closed; training goes on"}.items() <= next(
        e for e in events if e["kind"] == "warning").items()
    assert events[-1]["kind"] == "finished" and events[-1]["update"] == updates


# --- 3. a full disk ----------------------------------------------------------------------

_FULL_DISK_AFTER = """
import errno, sys
from rltui.runfiles import checkpoints

good = int(sys.argv.pop(1))
calls = []

def write_all(f, data):  # the disk fills after `good` checkpoints
    calls.append(1)
    if len(calls) > good:
        raise OSError(errno.ENOSPC, "No space left on device")
    f.write(data)

checkpoints.write_all = write_all
sys.argv[0] = "rltui"
from rltui.cli import entry
entry()
"""


@pytest.mark.parametrize("good, on_disk", [
    (0, "no checkpoint on disk"),
    (1, "the latest checkpoint on disk is checkpoint-"),
])
def test_full_disk_at_the_final_checkpoint_exits_1_saying_what_is_on_disk(tmp_path, cache, good, on_disk):
    # A checkpoint every update: the first chunk is one update, so the first write is the
    # checkpoint of update 1 and the final one comes later, however the rest is chunked.
    run_dir = tmp_path / "run"
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_FULL_DISK_AFTER), str(good),
         *launch_args(run_dir, 40, "--set", "checkpoint_every_updates=1")],
        cwd=tmp_path, env=cli_env(cache), capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    lines = [line for line in result.stderr.splitlines() if "final checkpoint failed" in line]
    assert len(lines) == 1, result.stderr[-3000:]
    assert lines[0].startswith("Finished after 40 updates, but the final checkpoint failed (No space left on device); ")
    assert on_disk in lines[0]
    assert "earlier checkpoints kept" not in result.stderr
    names = checkpoint_names(run_dir)
    assert len(names) == good
    if names:  # the line names the checkpoint that is there, and its update
        update = int(names[-1][len("checkpoint-"):-len(".msgpack")])
        assert f"{names[-1]} (update {update})" in lines[0]
    events = read_jsonl(run_dir / "events.jsonl")
    assert events[-1]["kind"] == "finished" and events[-1]["data"]["checkpoint_failed"] == "No space left on device"


class FullDiskFile:
    """A text file on a disk that fills after `room` characters: writes past it raise ENOSPC,
    keeping what fitted, as a real one does."""

    def __init__(self, path, mode="r", encoding=None, room=40):
        self._file = open(path, mode, encoding=encoding)
        self.name, self.room = str(path), room

    def write(self, text):
        if len(text) > self.room:
            self._file.write(text[: self.room])
            self._file.flush()
            self.room = 0
            raise OSError(errno.ENOSPC, "No space left on device")
        self.room -= len(text)
        return self._file.write(text)

    def __getattr__(self, name):
        return getattr(self._file, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._file.close()


def test_recorder_on_a_full_disk_names_the_file_and_closes_quietly(tmp_path, monkeypatch):
    monkeypatch.setattr(recorder_module, "open_private", FullDiskFile)
    recorder = RunRecorder(tmp_path)
    event = SessionEvent("warning", 3, "a message longer than the room left on this disk", 1.0)
    with pytest.raises(OSError) as raised:
        recorder.on_event(event)
    assert str(raised.value) == f"cannot write {tmp_path / 'events.jsonl'}: No space left on device"
    recorder.on_event(event)  # the file is written no more: no second error
    recorder.close()  # no traceback after the run's last line


def test_resume_truncation_moves_aside_the_records_no_reader_counts_as_updates(tmp_path):
    from rltui.runfiles.reader import read_jsonl, sound_record

    records = [{"update": 1}, {"update": -1}, {"update": 2.5}, {"update": True}, {"update": 2}, {"update": 9}]
    lines = [json.dumps(r) + "\n" for r in records]
    (tmp_path / "metrics.jsonl").write_text("".join(lines), encoding="utf-8")
    truncate_metrics(tmp_path, 4)
    kept = read_jsonl(tmp_path / "metrics.jsonl", problems := [], sound_record)
    assert kept == [{"update": 1}, {"update": 2}] and problems == []  # what curves and export read, whole
    assert (tmp_path / DISCARDED).read_text(encoding="utf-8") == "".join(lines[1:4] + lines[5:])


def test_resume_truncation_on_a_full_disk_leaves_both_files_and_names_one(tmp_path, monkeypatch):
    lines = [json.dumps({"update": u, "episode_return": 1.0}) + "\n" for u in range(1, 11)]
    (tmp_path / "metrics.jsonl").write_text("".join(lines), encoding="utf-8")
    monkeypatch.setattr(recorder_module, "open_private", FullDiskFile)
    with pytest.raises(OSError) as raised:
        truncate_metrics(tmp_path, 4)
    message = str(raised.value)
    assert message.startswith("cannot write ") and message.endswith(": No space left on device")
    assert DISCARDED in message and "[Errno" not in message
    assert not (tmp_path / DISCARDED).exists()  # not a part of the records
    assert (tmp_path / "metrics.jsonl").read_text(encoding="utf-8") == "".join(lines)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.jsonl"]  # no temp file left
    monkeypatch.undo()
    truncate_metrics(tmp_path, 4)  # with room again: as if the first attempt never happened
    assert (tmp_path / DISCARDED).read_text(encoding="utf-8") == "".join(lines[4:])
    assert (tmp_path / "metrics.jsonl").read_text(encoding="utf-8") == "".join(lines[:4])


# --- 5. a hang-up, a Ctrl+C during start-up ------------------------------------------------


def _assert_stopped_with_a_final_checkpoint(run_dir: Path, total: int) -> None:
    records = read_jsonl(run_dir / "metrics.jsonl")
    assert 1 <= len(records) < total
    events = read_jsonl(run_dir / "events.jsonl")
    kinds = [e["kind"] for e in events]
    assert "stopping" in kinds and kinds[-1] == "finished", kinds
    assert checkpoint_names(run_dir)[-1] == f"checkpoint-{len(records):09d}.msgpack"
    assert not (run_dir / "control.sock").exists()


def test_sighup_stops_a_headless_run_with_a_final_checkpoint(tmp_path, cache):
    run_dir, total = tmp_path / "run", 8000
    proc = subprocess.Popen(
        [sys.executable, "-m", "rltui", *launch_args(run_dir, total)],
        cwd=tmp_path, env=cli_env(cache), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        wait_for_metrics(proc, run_dir / "metrics.jsonl")
        proc.send_signal(signal.SIGHUP)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, stderr[-3000:]
    assert "Stopped after" in stderr and "Traceback" not in stderr
    _assert_stopped_with_a_final_checkpoint(run_dir, total)


def test_sighup_stops_a_dashboard_run_with_a_final_checkpoint(tmp_path, cache):
    # The terminal closes: its master side goes, and the kernel sends SIGHUP.
    run_dir, total = tmp_path / "run", 8000
    master, terminal = os.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "rltui", *[a for a in launch_args(run_dir, total) if a != "--no-ui"]],
        cwd=tmp_path, stdin=terminal, stdout=terminal, stderr=terminal, start_new_session=True,
        env=cli_env(cache, COLUMNS="100", LINES="30", TERM="xterm-256color"),
    )
    os.close(terminal)
    try:
        deadline = time.monotonic() + 180
        while not (run_dir / "metrics.jsonl").exists() or not (run_dir / "metrics.jsonl").read_text().strip():
            assert time.monotonic() < deadline and proc.poll() is None, "no metrics"
            while select.select([master], [], [], 0.05)[0]:  # keep the terminal drained
                try:
                    if not os.read(master, 65536):
                        break
                except OSError:
                    break
        os.close(master)
        master = None
        proc.send_signal(signal.SIGHUP)
        code = proc.wait(timeout=120)
    finally:
        if master is not None:
            os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == 0
    _assert_stopped_with_a_final_checkpoint(run_dir, total)


_CTRL_C_AT = """
import os, signal, sys
# What Ctrl+C does to a process comes from whoever started it: a terminal leaves SIGINT to
# Python's default handler, while a test runner's worker can pass it on ignored.
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
where = sys.argv.pop(1)
if where == "start-up":  # after the run directory is made, before the session exists
    import rltui.commands.launch as launch
    build = launch.build_session
    def build_session(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)
        return build(*args, **kwargs)
    launch.build_session = build_session
else:  # during the compile, once the run's Ctrl+C handler is in place
    from rltui.session.backend import JaxBackend
    compile_ = JaxBackend.build
    def build(self, hparams):
        os.kill(os.getpid(), signal.SIGINT)
        compile_(self, hparams)
    JaxBackend.build = build
sys.argv[0] = "rltui"
from rltui.cli import entry
entry()
"""


@pytest.mark.parametrize("where", ["start-up", "compile"])
def test_ctrl_c_before_training_is_one_line_exit_130_and_leaves_no_run_dir(tmp_path, cache, where):
    run_dir = tmp_path / "run"
    args = launch_args(run_dir, 20)
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_CTRL_C_AT), where, *args],
        cwd=tmp_path, env=cli_env(cache), capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 130, result.stderr[-3000:]
    assert "Traceback" not in result.stderr and "KeyboardInterrupt" not in result.stderr, result.stderr[-3000:]
    last = result.stderr.splitlines()[-1]
    assert last.startswith("rltui: interrupted; nothing was trained, so ") and last.endswith(" was removed"), last
    assert not run_dir.exists()
    # and the same --run-dir is free again
    again = subprocess.run([sys.executable, "-m", "rltui", *launch_args(run_dir, 2)], cwd=tmp_path, env=cli_env(cache),
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
