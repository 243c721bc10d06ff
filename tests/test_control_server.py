"""The control socket, spoken to by hand (tests/control_client.py) over a fake session:
round trips, bad input, permissions, disconnects, slow clients, stale and long paths."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import tempfile
import threading
import time
from pathlib import Path

import pytest

from control_client import LineClient, served, wait_for
from fakes import FakeSession
from rltui.session import Pause, Resume, SaveCheckpoint, SessionState, SetHParams, Stop
from rltui.session.commands import Rollback
from rltui.session.control_paths import MAX_SOCKET_PATH, POINTER_NAME, SOCKET_NAME, find_socket
from rltui.session.control_server import ControlServer, ControlServerError


def test_hello_then_the_history_once_then_only_new_records(tmp_path):
    with served(tmp_path) as (fake, server):
        fake.on_thread(fake.advance, 5)
        fake.on_thread(fake.event, "warning", "before you came")
        client = LineClient(server.path)
        hello = client.recv()
        assert hello["type"] == "hello" and hello["protocol"] == 1
        assert hello["state"] == "running" and hello["total_updates"] == 100 and hello["pid"] == os.getpid()
        assert hello["config"]["env"] == "CartPole-v1" and hello["describe"]["algo"] == "ppo"
        assert hello["hparams"]["lr"] == pytest.approx(2.5e-4)
        history = client.recv()
        assert history["type"] == "snapshot" and history["update"] == 5
        assert [r["update"] for r in history["records"]] == [1, 2, 3, 4, 5]
        assert history["records"][4]["episode_return"] is None  # NaN travels as null
        assert client.recv()["message"] == "before you came"
        fake.on_thread(fake.advance, 3)
        live = client.until(lambda m: m["type"] == "snapshot")
        assert live["update"] == 8 and [r["update"] for r in live["records"]] == [6, 7, 8]
        client.close()


def test_after_a_rollback_a_new_client_gets_the_history_the_run_goes_on_from(tmp_path):
    with served(tmp_path) as (fake, server):
        fake.on_thread(fake.advance, 10)
        fake.on_thread(fake.rollback_to, 6)
        fake.on_thread(fake.advance, 2)
        client = LineClient(server.path)
        assert client.recv()["type"] == "hello"
        history = client.recv()
        assert history["update"] == 8 and [r["update"] for r in history["records"]] == list(range(1, 9))
        client.close()


def test_commands_round_trip_in_order(tmp_path):
    with served(tmp_path) as (fake, server):
        client = LineClient(server.path)
        sent = [
            ({"command": "pause"}, Pause()),
            ({"command": "set_hparams", "changes": {"lr": 1e-3, "gamma": 0.98}}, SetHParams({"lr": 1e-3, "gamma": 0.98})),
            ({"command": "save"}, SaveCheckpoint()),
            ({"command": "rollback"}, Rollback()),
            ({"command": "resume"}, Resume()),
        ]
        for number, (fields, _) in enumerate(sent):
            client.send({"type": "command", "id": number, **fields})
            assert client.reply() == {"type": "ok", "id": number, "command": fields["command"]}
        wait_for(lambda: len(fake.commands) == len(sent))
        assert fake.commands == [command for _, command in sent]
        edit = client.until(lambda m: m["type"] == "event" and m["kind"] == "hparams")
        assert edit["data"]["changes"] == {"lr": 1e-3, "gamma": 0.98}
        client.send({"type": "command", "command": "stop", "id": "last"})
        assert client.reply()["id"] == "last"
        assert client.until(lambda m: m["type"] == "state" and m["state"] == "finished")
        client.send({"type": "command", "command": "pause", "id": 9})
        assert "ended" in client.reply()["error"]
        client.close()


BAD = [
    (b"not json\n", "not JSON"),
    (b"[1, 2]\n", "expected a JSON object"),
    (b'{"no": "type"}\n', 'missing "type"'),
    (b'{"type": "dance", "id": 3}\n', "unknown message type 'dance'"),
    (b'{"type": "command", "command": "fly", "id": 4}\n', "unknown command 'fly'"),
    (b'{"type": "command", "command": "set_hparams", "changes": {"lr": "fast"}}\n', "lr: expected a number"),
    (b'{"type": "command", "command": "set_hparams", "changes": {}}\n', "needs \"changes\""),
    (b'{"type": "command", "command": "set_hparams", "changes": {"lr": -1}}\n', "lr: expected a number > 0"),
    (b'{"type": "command", "command": "set_hparams", "changes": {"num_envs": 8}}\n', "not editable"),
    (b"\xff\xfe\n", "not UTF-8"),
    (b'{"type": "hello", "protocol": 2}\n', "protocol version 2 not supported"),
]


def test_malformed_and_unknown_messages_get_an_error_and_the_run_goes_on(tmp_path):
    with served(tmp_path) as (fake, server):
        client = LineClient(server.path)
        for line, expected in BAD:
            client.send(line)
            reply = client.reply()
            assert reply["type"] == "error" and expected in reply["error"], (line, reply)
        assert reply["id"] is None
        client.send(b'{"type": "command", "command": "fly", "id": 4}\n')
        assert client.reply()["id"] == 4  # the request it answers
        client.send({"type": "hello", "protocol": 1})
        assert client.reply()["type"] == "ok"
        assert fake.commands == [] and fake.state is SessionState.RUNNING
        client.send({"type": "command", "command": "pause"})  # the same connection still works
        assert client.reply()["type"] == "ok"
        wait_for(lambda: fake.state is SessionState.PAUSED)
        client.close()


def test_an_endless_line_is_refused_and_that_client_closed(tmp_path):
    with served(tmp_path) as (fake, server):
        client = LineClient(server.path)
        client.send(b"x" * 70_000)
        assert "longer than" in client.reply()["error"]
        assert client.recv() is None  # and hung up: the next message boundary cannot be found
        other = LineClient(server.path)
        assert other.recv()["type"] == "hello"
        assert fake.commands == []
        client.close()
        other.close()


def test_a_client_leaving_mid_message_leaves_the_run_untouched(tmp_path):
    with served(tmp_path) as (fake, server):
        for partial in (b'{"type": "command", "command": "st', b"", b'{"type": "command", "command": "stop"}'):
            client = LineClient(server.path)
            if partial:
                client.send(partial)
            client.close()  # no newline: never a whole message
        wait_for(lambda: server.client_count == 0)
        fake.on_thread(fake.advance, 2)
        client = LineClient(server.path)
        assert client.recv()["state"] == "running"
        assert fake.commands == [] and fake.state is SessionState.RUNNING
        client.close()


def test_socket_is_owner_only_and_removed_on_close(tmp_path):
    with served(tmp_path) as (_, server):
        path = tmp_path / SOCKET_NAME
        assert server.path == path and stat.S_ISSOCK(path.stat().st_mode)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert [p.name for p in tmp_path.iterdir()] == [SOCKET_NAME]  # no temporary names left
    assert not path.exists()


def test_remove_socket_alone_before_an_abrupt_exit(tmp_path):
    # A second Ctrl+C exits at once, without `close`: the socket file must still go, and
    # a newer run's socket in its place must stay.
    with served(tmp_path) as (_, server):
        server.remove_socket()
        assert not (tmp_path / SOCKET_NAME).exists()
        newer = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        newer.bind(str(tmp_path / SOCKET_NAME))
        server.remove_socket()
        assert (tmp_path / SOCKET_NAME).exists()
        newer.close()


def test_a_slow_client_is_dropped_without_slowing_training(tmp_path):
    with served(tmp_path, max_backlog=64 * 1024) as (fake, server):
        stuck = LineClient(server.path)  # connects and never reads
        reader = LineClient(server.path)
        wait_for(lambda: server.client_count == 2)
        seen = []
        thread = threading.Thread(target=lambda: seen.append(reader.until(lambda m: m.get("update") == 2000)))
        thread.start()
        started = time.monotonic()
        for _ in range(40):
            fake.on_thread(fake.advance, 50)  # ~40 kB per snapshot, 1.6 MB in all
        assert time.monotonic() - started < 5  # the session thread never waited for a client
        thread.join(10)
        assert seen and seen[0]["update"] == 2000  # the client that reads got everything
        wait_for(lambda: server.client_count == 1)  # the one that did not was let go
        stuck.close()
        reader.close()


def test_a_stale_socket_is_replaced(tmp_path):
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(tmp_path / SOCKET_NAME))
    stale.close()  # a crashed run's socket: the file stays, nobody listens
    with served(tmp_path) as (_, server):
        client = LineClient(server.path)
        assert client.recv()["type"] == "hello"
        assert stat.S_IMODE((tmp_path / SOCKET_NAME).stat().st_mode) == 0o600
        client.close()


def test_a_live_run_s_socket_is_never_taken_over(tmp_path):
    with served(tmp_path) as (_, server):
        second = ControlServer(FakeSession(), tmp_path)
        with pytest.raises(ControlServerError, match="another run is listening"):
            second.start()
        client = LineClient(server.path)
        assert client.recv()["type"] == "hello"  # the first run still serves
        client.close()


def test_a_run_dir_too_long_for_a_socket_gets_a_pointer(tmp_path, monkeypatch, request):
    # A runtime dir with a short path (tmp_path can itself be too long for a socket, e.g.
    # under pytest-xdist's per-worker directories).
    runtime = Path(tempfile.mkdtemp(prefix="rt"))  # mode 0700
    request.addfinalizer(lambda: shutil.rmtree(runtime, ignore_errors=True))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    run_dir = tmp_path / ("a-long-run-directory-name-" * 5)
    run_dir.mkdir()
    assert len(str(run_dir / SOCKET_NAME)) > MAX_SOCKET_PATH
    with served(run_dir) as (_, server):
        assert server.path.parent == runtime / "rltui"
        assert (run_dir / POINTER_NAME).read_text().strip() == str(server.path)
        assert find_socket(run_dir) == server.path
        assert stat.S_IMODE(server.path.parent.stat().st_mode) == 0o700
        client = LineClient(find_socket(run_dir))
        assert client.recv()["run_dir"] == str(run_dir)
        client.close()
    assert not server.path.exists() and not (run_dir / POINTER_NAME).exists()


def test_close_sends_the_final_state_then_hangs_up(tmp_path):
    with served(tmp_path) as (fake, server):
        client = LineClient(server.path)
        fake.stop()
        fake.join(10)
        server.close()
        states = []
        while (message := client.recv()) is not None:
            if message["type"] in ("hello", "state"):  # it may have ended before we were greeted
                states.append(message["state"])
        assert states[-1] == "finished"
        client.close()
    assert not (tmp_path / SOCKET_NAME).exists()

