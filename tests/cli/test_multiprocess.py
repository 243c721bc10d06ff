"""One run over two processes (`jax.distributed` on 127.0.0.1, one CPU device each), steered
through process 0's control socket; a missing peer; the flags' validation; and the row
codec that carries commands between processes."""

from __future__ import annotations

import queue
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from rltui.errors import ExitCode
from rltui.runfiles.discovery import find_socket
from rltui.session import Pause, Resume, Rollback, SaveCheckpoint, SetHParams, Stop
from rltui.session.distributed import ROW_BYTES, LocalSync, ProcessSync, decode_row, encode_row

from control_client import LineClient
from test_cli import TINY, cli_env, read_jsonl, rltui

START_TIMEOUT = 240.0  # two processes compiling on a busy 2-core machine
MULTI = ["--coordinator", "127.0.0.1:7777", "--num-processes", "2", "--process-id", "0"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start(cwd: Path, process_id: int, port: int, *extra: str) -> subprocess.Popen:
    cwd.mkdir(parents=True, exist_ok=True)
    args = [
        "launch", "--no-ui", "--run-dir", "run", *TINY, *extra,
        "--coordinator", f"127.0.0.1:{port}", "--num-processes", "2", "--process-id", str(process_id),
    ]
    return subprocess.Popen(
        [sys.executable, "-m", "rltui", *args], cwd=cwd, env=cli_env(),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def finish(proc: subprocess.Popen, timeout: float) -> tuple[int, str]:
    _, err = proc.communicate(timeout=timeout)
    return proc.returncode, err


def wait_for_socket(run_dir: Path, procs: list[subprocess.Popen]) -> Path:
    deadline = time.monotonic() + START_TIMEOUT
    metrics = run_dir / "metrics.jsonl"
    while time.monotonic() < deadline:
        assert all(p.poll() is None for p in procs), "a process ended before training"
        path = find_socket(run_dir)
        if path is not None and metrics.exists() and metrics.read_text().strip():
            return path
        time.sleep(0.2)
    raise AssertionError("process 0 never started training")


def stopped(client, procs: list[subprocess.Popen]) -> list[tuple[int, str]]:
    """After a stop sent on `client`: wait for the run to finish, then each process's (exit code, stderr)."""
    client.until(lambda m: m["type"] == "state" and m["state"] == "finished")
    client.close()
    return [finish(proc, 120) for proc in procs]


def kill_all(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def one(pattern: str, text: str) -> str:
    found = re.findall(pattern, text)
    assert len(found) == 1, (pattern, text[-3000:])
    return found[0]


def test_two_processes_train_one_run_and_obey_process_0s_socket(tmp_path):
    port = free_port()
    procs = [start(tmp_path / f"p{i}", i, port, "--set", "total_timesteps=2e6") for i in range(2)]
    try:
        client = LineClient(wait_for_socket(tmp_path / "p0" / "run", procs), timeout=60)
        client.send({"type": "command", "id": 1, "command": "set_hparams", "changes": {"lr": 1e-3}})
        assert client.reply()["type"] == "ok"
        client.until(lambda m: m["type"] == "event" and m["kind"] == "hparams")
        client.send({"type": "command", "id": 2, "command": "pause"})
        client.until(lambda m: m["type"] == "event" and m["kind"] == "paused")
        time.sleep(3.5)  # several heartbeats: the other process waits at the boundary meanwhile
        client.send({"type": "command", "id": 3, "command": "resume"})
        client.until(lambda m: m["type"] == "event" and m["kind"] == "resumed")
        client.send({"type": "command", "id": 4, "command": "stop"})
        (code0, err0), (code1, err1) = stopped(client, procs)
    finally:
        kill_all(procs)
    assert code0 == 0, err0[-3000:]
    assert code1 == 0, err1[-3000:]
    # The edit, the pause and the stop took effect on the same update in both processes.
    for pattern in (r"\[update (\d+)\] set lr 0\.00025 -> 0\.001", r"\[update (\d+)\] paused at update",
                    r"\[update (\d+)\] resumed at update", r"Stopped after (\d+) updates"):
        assert one(pattern, err0) == one(pattern, err1), pattern
    digest = r"process \d of 2: parameters sha256 ([0-9a-f]{64})"
    assert one(digest, err0) == one(digest, err1)
    assert "run files are written by process 0" in err1
    # Process 0 wrote the run files and the final checkpoint; process 1 wrote nothing.
    run_dir = tmp_path / "p0" / "run"
    edits = [e for e in read_jsonl(run_dir / "events.jsonl") if e["kind"] == "hparams"]
    assert [e["data"]["changes"] for e in edits] == [{"lr": 1e-3}]
    assert list((run_dir / "checkpoints").glob("checkpoint-*.msgpack"))
    assert list((tmp_path / "p1").iterdir()) == []


def test_a_population_trains_over_two_processes_alike_pbt_and_member_commands_included(tmp_path):
    port = free_port()
    population = ["--sweep", "lr=[1e-4,1e-3,3e-3]", "--set", "pbt_every_updates=4", "--set", "pbt_fraction=0.34",
                  "--set", "total_timesteps=2e6"]
    procs = [start(tmp_path / f"p{i}", i, port, *population) for i in range(2)]
    try:
        client = LineClient(wait_for_socket(tmp_path / "p0" / "run", procs), timeout=60)
        client.send({"type": "command", "id": 1, "command": "freeze", "members": [1]})
        client.until(lambda m: m["type"] == "event" and m["kind"] == "population" and m["data"]["action"] == "freeze")
        client.send({"type": "command", "id": 2, "command": "clone", "source": 0, "targets": [2], "factor": 1.5})
        client.until(lambda m: m["type"] == "event" and m["kind"] == "population" and m["data"]["action"] == "clone")
        client.until(lambda m: m["type"] == "event" and m["kind"] == "population" and m["data"]["action"] == "pbt")
        client.send({"type": "command", "id": 3, "command": "stop"})
        (code0, err0), (code1, err1) = stopped(client, procs)
    finally:
        kill_all(procs)
    assert code0 == 0, err0[-3000:]
    assert code1 == 0, err1[-3000:]
    # Every change to the population happened on the same update, alike, in both processes.
    changes = lambda err: re.findall(r"\[update \d+\] (?:froze|member \d+ <-).*", err)
    assert changes(err0) == changes(err1)
    assert any("froze member 1" in line for line in changes(err0))
    digest = r"process \d of 2: parameters sha256 ([0-9a-f]{64})"
    assert one(digest, err0) == one(digest, err1)
    lines = read_jsonl(tmp_path / "p0" / "run" / "population.jsonl")
    actions = [line["action"] for line in lines]  # PBT steps may fall between the commands
    assert actions[0] == "start" and actions.index("freeze") < actions.index("clone")


def test_a_missing_peer_is_reported_within_the_timeout(tmp_path):
    started = time.monotonic()
    proc = start(tmp_path, 1, free_port(), "--peer-timeout", "3")
    try:
        code, err = finish(proc, 90)
    finally:
        kill_all([proc])
    assert code == ExitCode.PEER_LOST, err[-3000:]
    assert time.monotonic() - started < 90
    last = err.strip().splitlines()[-1]
    assert last.startswith("rltui: error: process 1 of 2: the JAX distributed runtime ended it")
    assert "did not join 127.0.0.1:" in last and "within 3 s" in last
    assert not (tmp_path / "run").exists()


BAD_FLAGS = [
    pytest.param(["--no-ui", "--coordinator", "h:1"], "--num-processes, --process-id: ", id="alone"),
    pytest.param(["--no-ui", *MULTI[:4]], "--process-id: --coordinator", id="no-id"),
    pytest.param(["--no-ui", "--coordinator", "nohost", *MULTI[2:]], "--coordinator: expected HOST:PORT", id="no-port"),
    pytest.param(["--no-ui", "--coordinator", "h:99999", *MULTI[2:]], "--coordinator: expected", id="bad-port"),
    pytest.param(["--no-ui", *MULTI[:5], "2"], "--process-id: must be in [0, 2)", id="id-too-big"),
    pytest.param(["--no-ui", *MULTI[:5], "-1"], "--process-id: must be in [0, 2)", id="id-negative"),
    pytest.param(["--no-ui", *MULTI[:2], "--num-processes", "0", "--process-id", "0"], "--num-processes", id="zero"),
    pytest.param(MULTI, "headless only; add --no-ui", id="dashboard"),
    pytest.param(["--no-ui", *MULTI, "--resume", "x"], "--resume: not available", id="resume"),
    pytest.param(
        ["--no-ui", "--peer-timeout", "5"], "--peer-timeout: only for a multi-process run", id="timeout-alone"
    ),
    pytest.param(["--no-ui", *MULTI, "--peer-timeout", "0"], "--peer-timeout: must be at least 1", id="timeout-zero"),
]


@pytest.mark.parametrize("args,message", BAD_FLAGS)
def test_bad_multiprocess_flags_are_one_line_exit_2(tmp_path, args, message):
    proc = rltui(["launch", *args], tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rltui: error: ") and message in lines[0], lines
    assert list(tmp_path.iterdir()) == []


def test_help_states_the_flags_and_the_timeout(tmp_path):
    out = " ".join(rltui(["launch", "--help"], tmp_path).stdout.split())
    for flag in ("--coordinator HOST:PORT", "--num-processes N", "--process-id I", "--peer-timeout SECONDS"):
        assert flag in out
    assert "default 60" in out and "exit code 4" in out


# --- the row codec, and the exchange with a stand-in for the collective ------------------

def test_rows_carry_every_command_and_the_chunk_size():
    commands = [Pause(), SetHParams({"lr": 1e-3, "gamma": 0.98}), SaveCheckpoint(), Rollback(), Resume(), Stop()]
    row = encode_row(commands, 37, stop=True)
    assert row.shape == (ROW_BYTES,) and row.dtype == np.uint8
    assert decode_row(row) == (commands, 37, True)


class FakeAllgather(ProcessSync):
    """Process `process_id`, with the other process's rows given in advance."""

    def __init__(self, process_id: int, others: list[np.ndarray]):
        super().__init__(process_id, heartbeat=0.05)
        self.others = others
        self.sent: list[np.ndarray] = []

    def _allgather(self, row):
        self.sent.append(row)
        other = self.others.pop(0)
        return np.stack([row, other] if self.process_id == 0 else [other, row])


def inbox(*commands) -> queue.Queue:
    q = queue.Queue()
    for command in commands:
        q.put(command)
    return q


def test_process_0s_commands_and_chunk_size_win_and_any_stop_stops_all():
    peer = FakeAllgather(1, [encode_row([Pause()], 12, stop=False)])
    boundary = peer.boundary(inbox(SetHParams({"lr": 1.0})), paused=False, chunk_size=3)
    assert boundary.commands == (Pause(),) and boundary.chunk_size == 12
    leader = FakeAllgather(0, [encode_row([], 5, stop=True)])
    boundary = leader.boundary(inbox(SetHParams({"lr": 1.0})), paused=False, chunk_size=3)
    assert boundary.commands == (SetHParams({"lr": 1.0}), Stop()) and boundary.chunk_size == 3


def test_process_0_sends_heartbeats_while_paused_and_splits_long_batches():
    leader = FakeAllgather(0, [encode_row([], 1, stop=False)] * 10)
    started = time.monotonic()
    assert leader.boundary(inbox(), paused=True, chunk_size=1).commands == ()
    assert 0.04 < time.monotonic() - started < 5
    many = [SetHParams({"lr": float(i)}) for i in range(400)]  # more than one row holds
    batches = [leader.boundary(inbox(*many), paused=False, chunk_size=1).commands]
    while len(batches) < 10 and batches[-1]:
        batches.append(leader.boundary(inbox(), paused=False, chunk_size=1).commands)
    assert 0 < len(batches[0]) < 400 and [c for batch in batches for c in batch] == many


def test_local_sync_is_the_queue_itself():
    sync = LocalSync()
    assert sync.boundary(inbox(Pause(), Stop()), paused=False, chunk_size=4).commands == (Pause(), Stop())
    assert sync.boundary(inbox(), paused=False, chunk_size=4).chunk_size == 4
    assert sync.agree(True) and not sync.agree(False)
