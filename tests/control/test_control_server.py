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
import tracemalloc
from pathlib import Path

import pytest

from rltui.control import protocol
from rltui.control.paths import MAX_SOCKET_PATH
from rltui.control.remote import AttachError, RemoteSession
from rltui.control.server import (
    ACCEPT_BURST,
    ACCEPTS_PER_SECOND,
    CPU_BURST,
    CPU_SHARE,
    ControlServer,
    ControlServerError,
)
from rltui.runfiles.discovery import find_socket
from rltui.runfiles.names import SOCKET as SOCKET_NAME
from rltui.runfiles.names import SOCKET_POINTER as POINTER_NAME
from rltui.session import Pause, Resume, SaveCheckpoint, SessionState, SetHParams
from rltui.session.commands import Rollback

from control_client import LineClient, served, wait_for
from fakes import FakeSession


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
        curves = client.recv()  # the whole run, bucketed (the chart's), then the recent records
        assert curves["type"] == "history" and curves["curves"]["update_first"][0] == 1
        history = client.recv()
        assert history["type"] == "snapshot" and history["update"] == 5
        assert [r["update"] for r in history["records"]] == [1, 2, 3, 4, 5]
        assert history["records"][4]["episode_return"] is None  # NaN travels as null
        assert client.recv()["message"] == "before you came"
        fake.on_thread(fake.advance, 3)
        live = client.until(lambda m: m["type"] == "snapshot")
        assert live["update"] == 8 and [r["update"] for r in live["records"]] == [6, 7, 8]
        client.close()


def test_with_no_client_attached_records_wait_unencoded_until_one_attaches(tmp_path, monkeypatch):
    # Training at thousands of updates a second with nobody attached costs the server thread
    # no encoding (it would hold the GIL from the training thread); a client that attaches
    # then gets the recent history, each record encoded once.
    from rltui.control import feed

    encoded = []
    real = feed.session_messages.encode_record
    monkeypatch.setattr(feed.session_messages, "encode_record", lambda r: encoded.append(r.update) or real(r))
    with served(tmp_path) as (fake, server):
        wait_for(lambda: server.client_count == 0)  # the fixture's probe has hung up, and the server has seen it
        fake.on_thread(fake.advance, 40)
        wait_for(lambda: (server._feed.latest_head or {}).get("update") == 40)  # the server has taken them
        assert encoded == []
        client = LineClient(server.path)
        assert client.recv()["type"] == "hello"
        client.until(lambda m: m["type"] == "snapshot")
        assert sorted(encoded) == list(range(1, 41))
        fake.on_thread(fake.advance, 2)
        assert [r["update"] for r in client.until(lambda m: m["type"] == "snapshot")["records"]] == [41, 42]
        assert sorted(encoded) == list(range(1, 43))
        client.close()


def test_what_the_run_posts_while_the_server_accepts_a_client_is_in_that_clients_greeting(tmp_path, monkeypatch):
    # The session posts between the server's select and its accept (the server thread
    # preempted mid-turn): the client still gets it as its history, after its hello.
    from rltui.control import server as server_module
    with served(tmp_path) as (fake, server):
        real_hung_up, posted = server_module.hung_up, []

        def posting_meanwhile(conn):
            if not posted:
                posted.append(fake.advance(5))
            return real_hung_up(conn)

        monkeypatch.setattr(server_module, "hung_up", posting_meanwhile)
        client = LineClient(server.path)
        assert client.recv()["type"] == "hello"
        assert client.recv()["type"] == "history"
        history = client.recv()
        assert history["type"] == "snapshot" and [r["update"] for r in history["records"]] == [1, 2, 3, 4, 5]
        client.close()


def test_after_a_rollback_a_new_client_gets_the_history_the_run_goes_on_from(tmp_path):
    with served(tmp_path) as (fake, server):
        fake.on_thread(fake.advance, 10)
        fake.on_thread(fake.rollback_to, 6)
        fake.on_thread(fake.advance, 2)
        client = LineClient(server.path)
        assert client.recv()["type"] == "hello"
        curves = client.recv()["curves"]
        assert curves["update_last"][-1] == 8 and sum(curves["count"]) == 8
        history = client.recv()
        assert history["update"] == 8 and [r["update"] for r in history["records"]] == list(range(1, 9))
        client.close()


def test_commands_round_trip_in_order(tmp_path):
    with served(tmp_path) as (fake, server):
        client = LineClient(server.path)
        sent = [
            ({"command": "pause"}, Pause()),
            (
                {"command": "set_hparams", "changes": {"lr": 1e-3, "gamma": 0.98}},
                SetHParams({"lr": 1e-3, "gamma": 0.98}),
            ),
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


# Lines under the 64 KiB limit that the protocol refuses, each as data: one the server
# must answer without ever acting on it or failing.
HOSTILE = [
    (
        b'{"type": "command", "command": "set_hparams", "changes": {"lr": 1' + b"0" * 400 + b"}}\n",
        "lr: expected a finite number, got an integer of 401 digits",
    ),
    (b'{"type": "command", "command": "set_hparams", "changes": {"lr": 1e400}}\n', "lr: expected a finite number"),
    (b'{"type": "command", "command": "set_hparams", "changes": {"lr": NaN}}\n', "NaN is not a JSON number"),
    (
        b'{"type": "command", "command": "set_hparams", "changes": {"lr": -Infinity}}\n',
        "-Infinity is not a JSON number",
    ),
    (b'{"type": "command", "command": "pause", "id": ' + b"[" * 30_000 + b"]" * 30_000 + b"}\n", "nested too deeply"),
    (b'{"type": "command", "command": "pause", "id": [[1]]}\n', '"id": expected a string'),
    (b'{"type": "command", "command": "pause", "id": "' + b"i" * 5000 + b'"}\n', '"id": expected a string'),
    (b'{"type": "command", "command": ["pause"]}\n', "unknown command a list"),
    (b'{"type": "command", "command": {"a": 1}}\n', "unknown command an object"),
    (b'{"type": "command", "command": "' + b"p" * 50_000 + b'"}\n', "unknown command 'ppppp"),
    (b'{"type": "command", "command": "set_hparams", "changes": {"' + b"k" * 50_000 + b'": 1}}\n', "not editable"),
    (b'{"type": "hello", "protocol": true}\n', "protocol version true not supported"),
    (b'{"type": "hello", "protocol": ' + b"[" * 500 + b"]" * 500 + b"}\n", "protocol version a list not supported"),
    (b'{"type": ' + b"9" * 5000 + b"}\n", "not JSON"),
]


@pytest.mark.parametrize("line, expected", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_lines_are_refused_and_everyone_is_still_served(tmp_path, line, expected):
    with served(tmp_path) as (fake, server):
        bystander = LineClient(server.path)
        assert bystander.recv()["type"] == "hello"
        client = LineClient(server.path)
        client.send(line)
        reply = client.reply()
        assert reply["type"] == "error" and expected in reply["error"], reply
        assert len(reply["error"]) < 400  # what was sent is quoted shortened, never echoed whole
        client.send({"type": "command", "command": "pause", "id": 7})  # the same connection goes on
        assert client.reply() == {"type": "ok", "id": 7, "command": "pause"}
        assert bystander.until(lambda m: m["type"] == "state")["state"] == "paused"
        assert server.path.exists() and server.last_internal_error is None
        assert fake.commands == [Pause()]
        client.close()
        bystander.close()


def test_an_unforeseen_failure_costs_one_reply_not_the_server(tmp_path, monkeypatch):
    with served(tmp_path) as (fake, server):
        client = LineClient(server.path)

        def broken(line):
            raise RuntimeError("a bug")

        monkeypatch.setattr(protocol, "parse_request", broken)
        client.send({"type": "command", "command": "pause"})
        assert "could not handle this message (RuntimeError)" in client.reply()["error"]
        monkeypatch.undo()
        client.send({"type": "command", "command": "pause"})
        assert client.reply()["type"] == "ok"
        other = LineClient(server.path)
        assert other.recv()["type"] == "hello"
        client.close()
        other.close()


def test_many_lines_sent_at_once_are_all_answered_in_order(tmp_path):
    with served(tmp_path) as (fake, server):
        client = LineClient(server.path)
        other = LineClient(server.path)
        client.send(b"".join(b'{"type": "hello", "protocol": 1, "id": %d}\n' % number for number in range(500)))
        other.send({"type": "hello", "protocol": 1, "id": "other"})
        assert other.reply()["id"] == "other"  # served meanwhile
        assert [client.reply()["id"] for _ in range(500)] == list(range(500))
        client.close()
        other.close()


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


def test_a_slow_client_gets_the_latest_snapshot_not_a_backlog(tmp_path):
    with served(tmp_path) as (fake, server):
        stuck = LineClient(server.path)  # connects, then reads nothing for a while
        reader = LineClient(server.path)
        wait_for(lambda: server.client_count == 2)
        seen = []
        thread = threading.Thread(target=lambda: seen.append(reader.until(lambda m: m.get("update") == 4000)))
        thread.start()
        started = time.monotonic()
        for _ in range(40):
            fake.on_thread(fake.advance, 100)  # ~32 kB per snapshot, 1.3 MB in all: more than a socket buffers
        assert time.monotonic() - started < 5  # the session thread never waited for a client
        thread.join(10)
        assert seen and seen[0]["update"] == 4000  # the client that reads got everything
        assert server.client_count == 2  # the slow one is still served
        snapshots, records = [], []
        while not records or records[-1] < 4000:
            message = stuck.recv()
            if message["type"] == "snapshot":
                snapshots.append(message)
                records += [r["update"] for r in message["records"]]
        # It catches up in a few messages, with the latest figures, and none of the history
        # is lost on the way.
        assert len(snapshots) < 40 and snapshots[-1]["update"] == 4000
        assert records == list(range(1, 4001))
        stuck.close()
        reader.close()


def test_idle_clients_hold_little_memory(tmp_path):
    with served(tmp_path) as (fake, server):
        fake.on_thread(fake.advance, 4096)  # a full history: every new client is owed ~1.3 MB
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            idle = [LineClient(server.path) for _ in range(30)]  # never read
            # Traced, the server's greetings take several times their CPU, and it keeps to its
            # share of a core (CPU_SHARE): seconds, more on a loaded machine. Memory is the point.
            wait_for(lambda: server.client_count == 30, timeout=120)
            for _ in range(20):
                fake.on_thread(fake.advance, 100)
            reader = LineClient(server.path, timeout=120)
            reader.until(lambda m: m.get("update") == 6096)  # everything has been handed out
            reader.skipped.clear()  # what it read is not the server's
            grown = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        assert grown / 30 < 300_000, f"{grown / 30:,.0f} bytes per idle client"
        assert server.client_count == 31  # idle, not dropped
        for client in [*idle, reader]:
            client.close()


def test_a_client_that_never_reads_is_let_go_once_its_messages_pile_up(tmp_path):
    with served(tmp_path, max_queued=64 * 1024) as (fake, server):
        stuck = LineClient(server.path)
        wait_for(lambda: server.client_count == 1)
        for number in range(2000):  # events cannot be merged: ~200 kB for this client
            fake.on_thread(fake.event, "warning", f"warning {number:04d} " + "x" * 60)
        wait_for(lambda: server.client_count == 0)
        other = LineClient(server.path)  # it can attach again
        assert other.recv()["type"] == "hello"
        stuck.close()
        other.close()


def test_clients_beyond_the_limit_are_refused_with_a_line_saying_so(tmp_path):
    with served(tmp_path, max_clients=3) as (fake, server):
        wait_for(lambda: server.client_count == 0)  # served()'s own probe has gone
        clients = [LineClient(server.path) for _ in range(3)]
        for client in clients:
            assert client.recv()["type"] == "hello"
        extra = LineClient(server.path)
        refusal = extra.recv()
        assert refusal["type"] == "error" and "too many clients" in refusal["error"]
        assert extra.recv() is None  # and closed
        with pytest.raises(AttachError, match="the run refused: too many clients"):
            RemoteSession.connect(tmp_path)
        clients.pop().close()
        wait_for(lambda: server.client_count == 2)
        again = RemoteSession.connect(tmp_path)  # room again
        assert again.state is SessionState.RUNNING
        again.close()
        for client in [*clients, extra]:
            client.close()


def test_a_refused_client_that_already_sent_reads_the_refusal_then_an_orderly_end(tmp_path):
    # The extra client sends a command while it waits in the listen backlog (the accept
    # budget is spent); refused, its unread command must not turn the end into a reset.
    with served(tmp_path, max_clients=1, accepts_per_second=1.0, accept_burst=2) as (fake, server):
        wait_for(lambda: server.client_count == 0)  # served()'s own probe has gone
        first = LineClient(server.path)
        assert first.recv()["type"] == "hello"
        extra = LineClient(server.path)
        extra.send({"type": "command", "command": "pause", "id": 1})
        refusal = extra.recv()
        assert refusal["type"] == "error" and "too many clients" in refusal["error"]
        assert extra.recv() is None  # an end of stream, not ConnectionResetError
        first.close()
        extra.close()


def _thread_cpu_seconds(thread: threading.Thread) -> float:
    return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))


@pytest.mark.skipif(not hasattr(time, "pthread_getcpuclockid"), reason="needs per-thread CPU clocks")
def test_a_connection_storm_keeps_the_server_to_its_share_of_the_cpu(tmp_path):
    with served(tmp_path) as (fake, server):
        fake.on_thread(fake.advance, 4096)  # the history every new client is owed
        stop = time.monotonic() + 3.0
        greeted = []

        def storm():
            count = 0
            while time.monotonic() < stop:
                client = LineClient(server.path)
                count += client.recv()["type"] == "hello"
                client.close()
            greeted.append(count)

        cpu = _thread_cpu_seconds(server._thread)
        started = time.monotonic()
        threads = [threading.Thread(target=storm) for _ in range(2)]
        for thread in threads:
            thread.start()
        for _ in range(10):  # the session goes on meanwhile, and never waits
            before = time.monotonic()
            fake.on_thread(fake.advance, 10)
            assert time.monotonic() - before < 1.0
        for thread in threads:
            thread.join(20)
        used, wall = _thread_cpu_seconds(server._thread) - cpu, time.monotonic() - started
        assert used <= CPU_SHARE * wall + CPU_BURST + 0.15, f"server thread used {used:.2f} s of CPU in {wall:.2f} s"
        # Slowed to the accept allowance (so clients that wait for their greeting wait
        # idle, using no CPU either), and still serving.
        assert 8 <= sum(greeted) <= ACCEPT_BURST + ACCEPTS_PER_SECOND * wall + 10
        client = LineClient(server.path)  # and a client after the storm is served at once
        assert client.recv()["type"] == "hello"
        client.close()


# What each storm client sends before it hangs up: nothing, a byte, a whole command.
_STORM_SENDS = {"nothing": b"", "a byte": b"x",
                "a command": b'{"type": "command", "command": "pause"}\n'}


@pytest.mark.parametrize("sends", list(_STORM_SENDS))
def test_a_client_connecting_right_after_a_storm_of_hang_ups_is_served_at_once(tmp_path, sends):
    # Threads connecting and hanging up at once, as fast as the run lets them, fill the
    # listen backlog with connections nobody will read (whatever they sent first); the
    # client after them must not wait for each to be greeted in turn (at 2 greetings a
    # second, minutes).
    with served(tmp_path, accepts_per_second=2.0) as (fake, server):
        fake.on_thread(fake.advance, 4096)  # the history every greeted client is owed
        stop = time.monotonic() + 1.0
        made = []

        def storm():
            count = 0
            while time.monotonic() < stop:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    sock.connect(str(server.path))  # blocking: a full backlog makes it wait
                    if _STORM_SENDS[sends]:
                        sock.sendall(_STORM_SENDS[sends])
                    count += 1
                except OSError:
                    pass
                finally:
                    sock.close()
            made.append(count)

        threads = [threading.Thread(target=storm, daemon=True) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert len(made) == 4 and sum(made) > ACCEPT_BURST  # more than could be greeted at once
        client = LineClient(server.path)  # served within LineClient's generous timeout
        assert client.recv()["type"] == "hello"
        client.close()
        assert server.last_internal_error is None


def test_many_clients_attaching_at_once_all_get_in(tmp_path):
    with served(tmp_path) as (fake, server):
        fake.on_thread(fake.advance, 20)
        for _ in range(3):
            barrier = threading.Barrier(30)
            outcomes = []

            def attach(barrier=barrier):
                barrier.wait()
                try:
                    remote = RemoteSession.connect(tmp_path)
                except AttachError as err:
                    outcomes.append(str(err))
                else:
                    outcomes.append("ok")
                    remote.close()

            threads = [threading.Thread(target=attach) for _ in range(30)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(30)
            assert outcomes == ["ok"] * 30, [o for o in outcomes if o != "ok"][:3]
            wait_for(lambda: server.client_count == 0)


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


def test_a_client_still_waiting_to_be_accepted_gets_the_final_state(tmp_path):
    # The probe takes the only accept allowed; the client waits in the listen backlog when
    # the run ends. Closing the listener then would reset it unread.
    with served(tmp_path, accepts_per_second=0.001, accept_burst=1) as (fake, server):
        client = LineClient(server.path)
        fake.stop()
        fake.join(10)
        server.close()
        messages = []
        while (message := client.recv()) is not None:
            messages.append(message)
        assert messages[0]["type"] == "hello"
        assert [m["state"] for m in messages if m["type"] in ("hello", "state")][-1] == "finished"
        client.close()


def test_a_client_attaching_once_the_run_is_built_learns_its_action_space(tmp_path):
    # The server starts before the session builds its env: the greeting's description gains
    # the action space once training runs (the dashboard lists the keys that matter by it).
    fake = FakeSession()
    fake.actions = None
    server = ControlServer(fake, tmp_path)
    server.start()
    try:
        early = LineClient(server.path)
        assert "actions" not in early.recv()["describe"]
        fake.actions = "continuous"
        fake.start()
        early.until(lambda m: m.get("state") == "running")
        late = LineClient(server.path)
        assert late.recv()["describe"]["actions"] == "continuous"
        early.close()
        late.close()
    finally:
        fake.stop()
        fake.join(10)
        server.close()


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

