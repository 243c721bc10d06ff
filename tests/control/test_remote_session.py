"""RemoteSession against a control server over a fake session: the same interface as the
in-process session, late listeners, edits, the run ending or dying, detaching."""

from __future__ import annotations

import socket
import threading

import pytest

from rltui.control.remote import LOST, AttachError, RemoteSession
from rltui.runfiles.names import SOCKET as SOCKET_NAME
from rltui.session import Pause, SessionListener, SessionState, SetHParams, TrainingSession
from rltui.session.interface import SessionClient

from control_client import served, wait_for
from fakes import FakeSession

TIMEOUT = 10.0


class Recorder(SessionListener):
    def __init__(self):
        self.states, self.snapshots, self.events = [], [], []

    def on_state(self, state, message):
        self.states.append((state, message))

    def on_metrics(self, snapshot):
        self.snapshots.append(snapshot)

    def on_event(self, event):
        self.events.append(event)

    def kinds(self):
        return [event.kind for event in self.events]


def test_both_sessions_and_the_fake_implement_the_session_interface():
    for cls in (TrainingSession, RemoteSession, FakeSession):
        for name in ("state", "hparams", "describe", "add_listener", "remove_listener", "start", "submit", "stop",
                     "join", "outlives_client"):
            assert hasattr(cls, name), (cls, name)
    assert isinstance(FakeSession(), SessionClient)
    assert RemoteSession.outlives_client and not TrainingSession.outlives_client


def test_a_late_listener_gets_the_picture_then_live_updates(tmp_path):
    with served(tmp_path) as (fake, _):
        fake.on_thread(fake.advance, 12)
        fake.on_thread(fake.event, "warning", "earlier")
        remote = RemoteSession.connect(tmp_path)
        assert remote.describe()["env"] == "CartPole-v1" and remote.total_updates == 100
        assert remote.config["num_envs"] == 4
        wait_for(lambda: remote._latest is not None and remote._events)
        listener = Recorder()
        remote.add_listener(listener)
        assert listener.states == [(SessionState.RUNNING, None)]
        (snapshot,) = listener.snapshots
        assert snapshot.update == 12 and snapshot.history_env_steps == tuple(512 * u for u in range(1, 13))
        assert len(snapshot.history["value_loss"]) == 12
        assert listener.kinds() == ["warning"]
        fake.on_thread(fake.advance, 3)
        wait_for(lambda: len(listener.snapshots) == 2)
        latest = listener.snapshots[-1]
        assert latest.update == 15 and [r.update for r in latest.new_records] == [13, 14, 15]
        assert len(latest.history_env_steps) == 15  # rebuilt from increments, not resent
        remote.close()


def test_a_rollback_takes_the_attached_history_back_too(tmp_path):
    with served(tmp_path) as (fake, _):
        remote = RemoteSession.connect(tmp_path)
        listener = Recorder()
        remote.add_listener(listener)
        fake.on_thread(fake.advance, 10)
        wait_for(lambda: listener.snapshots and listener.snapshots[-1].update == 10)
        fake.on_thread(fake.rollback_to, 6)
        fake.on_thread(fake.advance, 2)
        wait_for(lambda: listener.snapshots[-1].update == 8)
        assert listener.snapshots[-1].history_env_steps == tuple(512 * u for u in range(1, 9))
        remote.close()


def test_commands_and_edits_reach_the_run_and_come_back(tmp_path):
    with served(tmp_path) as (fake, _):
        remote = RemoteSession.connect(tmp_path)
        listener = Recorder()
        remote.add_listener(listener)
        remote.submit(Pause())
        remote.submit(SetHParams({"lr": 1e-3}))
        wait_for(lambda: "hparams" in listener.kinds())
        assert fake.commands == [Pause(), SetHParams({"lr": 1e-3})]
        assert remote.state is SessionState.PAUSED
        assert float(remote.hparams.lr) == pytest.approx(1e-3)
        assert float(remote.hparams.gamma) == pytest.approx(0.99)
        remote.submit(SetHParams({"lr": -1.0}))  # refused by the run: a warning, not a crash
        wait_for(lambda: "warning" in listener.kinds())
        assert "lr: expected a number > 0" in listener.events[-1].message
        remote.close()


def test_the_run_finishing_ends_the_remote_session(tmp_path):
    with served(tmp_path) as (fake, _):
        remote = RemoteSession.connect(tmp_path)
        listener = Recorder()
        remote.add_listener(listener)
        assert not remote.join(0.05)
        remote.stop()
        assert remote.join(TIMEOUT)
        assert remote.state is SessionState.FINISHED
        assert fake.state is SessionState.FINISHED
        assert listener.kinds()[-2:] == ["stopping", "finished"]
        remote.close()


def test_the_run_dying_shows_as_an_error(tmp_path):
    with served(tmp_path) as (fake, server):
        remote = RemoteSession.connect(tmp_path)
        listener = Recorder()
        remote.add_listener(listener)
        server.close()  # the run's process is gone without a final state
        assert remote.join(TIMEOUT)
        assert remote.state is SessionState.ERROR
        assert listener.states[-1] == (SessionState.ERROR, LOST)
        remote.submit(Pause())  # into a closed connection: ignored, no exception
        remote.close()


def test_detaching_leaves_the_run_alone(tmp_path):
    with served(tmp_path) as (fake, server):
        remote = RemoteSession.connect(tmp_path)
        listener = Recorder()
        remote.add_listener(listener)
        wait_for(lambda: server.client_count == 1)
        remote.close()
        wait_for(lambda: server.client_count == 0)
        assert fake.commands == [] and fake.state is SessionState.RUNNING
        assert listener.states == [(SessionState.RUNNING, None)]  # no error for leaving on purpose


def test_several_clients_see_each_other_s_commands(tmp_path):
    with served(tmp_path) as (fake, _):
        first, second = RemoteSession.connect(tmp_path), RemoteSession.connect(tmp_path)
        seen = Recorder()
        second.add_listener(seen)
        first.submit(Pause())
        wait_for(lambda: second.state is SessionState.PAUSED)
        assert "paused" in seen.kinds()
        first.close()
        second.close()


def test_no_run_no_socket_and_a_stale_socket_are_one_line_errors(tmp_path):
    with pytest.raises(AttachError, match="no such run directory"):
        RemoteSession.connect(tmp_path / "missing")
    with pytest.raises(AttachError, match="no control socket"):
        RemoteSession.connect(tmp_path)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(tmp_path / SOCKET_NAME))
    stale.close()
    with pytest.raises(AttachError, match="the run has ended") as err:
        RemoteSession.connect(tmp_path)
    assert "\n" not in str(err.value)


def test_a_run_speaking_another_protocol_version_is_refused(tmp_path):
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(tmp_path / SOCKET_NAME))
    listener.listen(1)

    def greet():
        conn, _ = listener.accept()
        conn.sendall(b'{"type": "hello", "protocol": 99, "state": "running"}\n')
        conn.recv(1)  # until the client hangs up
        conn.close()

    thread = threading.Thread(target=greet)
    thread.start()
    with pytest.raises(AttachError, match="speaks control protocol 99, this rltui speaks 1"):
        RemoteSession.connect(tmp_path)
    thread.join(TIMEOUT)
    listener.close()
