"""The watch view inside the training dashboard, in-process and attached: the session hands
out its parameters between chunks, the control socket sends them on request (bounded, data
only), and the dashboard's key opens the view on them (Pilot)."""

from __future__ import annotations

import base64
import json
import threading
import time

import numpy as np
import pytest

from rltui.assembly import make_population
from rltui.config.build import build_config
from rltui.control.params_transfer import MAX_PARAMS_BYTES, PARAMS_PIECE_BYTES, ParamsAssembly
from rltui.control.protocol import ProtocolError
from rltui.control.remote import RemoteSession
from rltui.session import Pause, SessionState
from rltui.session.controller import TrainingSession
from rltui.session.interface import ParamsSnapshot, ParamsUnavailable
from rltui.ui.app import WATCH_KEY, DashboardApp

from control_client import LineClient, served, wait_for
from fakes import FakeSession, fixed_device_stats

TIMEOUT = 10.0
SLOW = 180.0  # building the policy's network and compiling its step, on a busy machine
TINY = {"num_envs": 4, "num_steps": 16, "num_minibatches": 2, "update_epochs": 1, "hidden_sizes": [16],
        "total_timesteps": 6400}


# --- the session hands out its parameters between chunks ------------------------------------


class StepBackend:
    """Each update adds 1 to the one parameter; records which thread copies it."""

    steps_per_update = 1
    max_chunk_updates = 4

    def __init__(self, chunk_seconds: float = 0.01):
        self.value = 0.0
        self.chunk_seconds = chunk_seconds
        self.copied_on: list[str] = []

    def build(self, hparams) -> None:
        pass

    def run_chunk(self, num_updates, hparams):
        time.sleep(self.chunk_seconds)
        self.value += num_updates
        return [{} for _ in range(num_updates)]

    def acting_params(self):
        self.copied_on.append(threading.current_thread().name)
        return {"w": np.array([self.value], np.float32)}, None

    def describe(self):
        return {"env": "fake", "algo": "ppo", "devices": [], "device_kind": "cpu"}


def new_session(backend, total=10_000) -> TrainingSession:
    return TrainingSession(backend, build_config(TINY, use_preset=False).dynamic_hparams(), total,
                           chunk_seconds=0.01)


def test_params_are_copied_by_the_session_thread_at_a_boundary_while_running_paused_and_ended():
    backend = StepBackend()
    session = new_session(backend)
    session.start()
    try:
        running = session.request_params().result(TIMEOUT)
        assert isinstance(running, ParamsSnapshot) and running.obs_stats is None
        # The copy is of the state at the boundary: its update and its parameters agree.
        assert running.params["w"][0] == pytest.approx(running.update)
        session.submit(Pause())
        wait_for(lambda: session.state is SessionState.PAUSED)
        paused = session.request_params().result(TIMEOUT)  # a paused session wakes for it
        again = session.request_params().result(TIMEOUT)
        assert paused.update == again.update and again is paused  # one copy while nothing changes
    finally:
        session.stop()
        assert session.join(TIMEOUT)
    ended = session.request_params().result(TIMEOUT)  # the last copy, after the end
    assert ended.params["w"][0] == pytest.approx(ended.update)
    assert set(backend.copied_on) == {"rltui-training"}  # never the requester's thread


def test_a_run_that_cannot_copy_its_parameters_fails_the_request_and_trains_on():
    class NoParams(StepBackend):
        def acting_params(self):
            raise RuntimeError("device lost")

    session = new_session(NoParams(), total=200)
    session.start()
    future = session.request_params()
    with pytest.raises(ParamsUnavailable, match="device lost"):
        future.result(TIMEOUT)
    assert session.join(TIMEOUT) and session.state is SessionState.FINISHED


# --- the control socket sends them on request -----------------------------------------------


def fake_acting(size: int = 3):
    return {"params": {"Dense_0": {"kernel": np.arange(size, dtype=np.float32).reshape(1, size)}}}, None


def params_reply(client: LineClient, request_id: str) -> list[dict]:
    pieces = []
    while True:
        message = client.until(lambda m, r=request_id: m.get("id") == r and m["type"] in ("params", "error"))
        if message["type"] == "error":
            return [message]
        pieces.append(message)
        if message["part"] + 1 == message["parts"]:
            return pieces


def test_params_request_answers_a_bounded_data_only_blob_in_pieces(tmp_path):
    with served(tmp_path) as (fake, server):
        fake.acting = fake_acting(200_000)  # 800 kB: several pieces
        fake.on_thread(fake.advance, 3)
        client = LineClient(server.path)
        client.send({"type": "params", "id": "p1"})
        ack = client.until(lambda m: m.get("id") == "p1" and m["type"] in ("ok", "error"))
        assert ack == {"type": "ok", "id": "p1", "request": "params"}
        pieces = params_reply(client, "p1")
        assert len(pieces) > 1 and all(p["type"] == "params" and p["update"] == 3 for p in pieces)
        for piece in pieces:  # each line well under what a client reads at once
            assert len(base64.b64decode(piece["data"])) <= PARAMS_PIECE_BYTES
            assert len(json.dumps(piece)) < 80 * 1024
        assembly = ParamsAssembly()
        assert [assembly.add(p) for p in pieces][-1] is True
        state = assembly.restore()  # msgpack of arrays: nothing is unpickled
        kernel = state["params"]["params"]["Dense_0"]["kernel"]
        assert kernel.dtype == np.float32 and np.array_equal(kernel, fake.acting[0]["params"]["Dense_0"]["kernel"])
        assert state["obs_stats"] is None
        client.close()


def test_params_too_large_or_unavailable_is_an_error_for_that_client_alone(tmp_path):
    with served(tmp_path) as (fake, server):
        client = LineClient(server.path)
        client.send({"type": "params", "id": "none"})
        assert "no parameters" in params_reply(client, "none")[0]["error"]
        fake.acting = fake_acting(MAX_PARAMS_BYTES // 4 + 1000)
        client.send({"type": "params", "id": "big"})
        error = params_reply(client, "big")[0]
        assert "MiB" in error["error"] and "rltui watch" in error["error"]
        fake.advance(2)  # the run's other messages still flow
        assert client.until(lambda m: m["type"] == "snapshot" and m["update"] == 2)
        client.close()


def test_params_requests_are_rate_limited_and_one_at_a_time(tmp_path):
    with served(tmp_path) as (fake, server):
        fake.acting = fake_acting(4)
        client = LineClient(server.path)
        for i in range(12):
            client.send({"type": "params", "id": f"r{i}"})
        replies = [client.until(lambda m, r=f"r{i}": m.get("id") == r and m["type"] in ("ok", "error"))
                   for i in range(12)]
        refused = [r["error"] for r in replies if r["type"] == "error"]
        assert refused and all("too many parameters requests" in e or "still being answered" in e for e in refused)
        assert fake.params_requests < 12  # refused ones never reach the session
        client.close()


@pytest.mark.parametrize("piece, needle", [
    ({"part": 0, "parts": 1, "bytes": 3, "data": "!!!"}, "base64"),
    ({"part": 1, "parts": 2, "bytes": 3, "data": "AAAA"}, "order"),
    ({"part": 0, "parts": 1, "bytes": MAX_PARAMS_BYTES + 1, "data": "AAAA"}, "size limit"),
    ({"part": 0, "parts": 1, "bytes": 1, "data": "AAAA"}, "more bytes"),
    ({"part": 0, "parts": 1, "bytes": 3, "data": True}, "without"),
])
def test_a_client_checks_every_params_piece_as_data(piece, needle):
    with pytest.raises(ProtocolError, match=needle):
        ParamsAssembly().add({"type": "params", **piece})


def test_a_params_blob_that_is_not_msgpack_is_refused():
    assembly = ParamsAssembly()
    blob = b"\x80\x04\x95 not msgpack, a pickle header"
    assembly.add({"part": 0, "parts": 1, "bytes": len(blob), "data": base64.b64encode(blob).decode()})
    with pytest.raises(ProtocolError, match="not a parameters blob"):
        assembly.restore()


def test_remote_session_request_params(tmp_path):
    with served(tmp_path) as (fake, server):
        fake.acting = fake_acting(5)
        fake.on_thread(fake.advance, 4)
        remote = RemoteSession.connect(tmp_path)
        try:
            snapshot = remote.request_params().result(TIMEOUT)
            assert snapshot.update == 4
            assert np.array_equal(snapshot.params["params"]["Dense_0"]["kernel"], np.arange(5).reshape(1, 5))
            fake.acting = None
            with pytest.raises(ParamsUnavailable, match="no parameters"):
                remote.request_params().result(TIMEOUT)
        finally:
            remote.close()


# --- the dashboard's key opens the view ---------------------------------------------------


@pytest.fixture(scope="module")
def tiny():
    """A tiny CartPole config and the real (params, obs_stats) of its network."""
    import jax

    from trainers.parallel import build

    config = build_config(TINY, use_preset=False)
    parallel = build(config.static_config(), jax.local_devices()[:1])
    state = parallel.init(parallel.seed_keys(config.seed), config.dynamic_hparams())
    acting = jax.tree.map(lambda x: np.array(np.asarray(x)[0]), (state.params, state.obs_stats))
    return config, acting


async def until(pilot, predicate, timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await pilot.pause(0.02)


def dashboard(session, config, run_dir) -> DashboardApp:
    return DashboardApp(session, config, run_dir, device_source=fixed_device_stats(), chart_interval=0,
                        refresh_interval=0, user_theme_dir=run_dir / "no-user-themes")


async def watch_scenario(app: DashboardApp, pilot, advance) -> None:
    from rltui.ui.screens.watch import WatchScreen

    await pilot.press(WATCH_KEY)
    await until(pilot, lambda: isinstance(app.screen, WatchScreen))
    screen = app.screen
    await until(pilot, lambda: screen.shown >= 2 or screen.failed, SLOW)
    assert screen.failed is None
    player = screen.player
    assert player.live is not None and "policy  update" in str(screen.query_one("#watch-info").render())
    await pilot.press("n")  # pauses and steps one frame
    await until(pilot, lambda: screen.paused and screen._steps_asked == 0)
    frames = screen.frames
    await pilot.press("n")
    await until(pilot, lambda: screen.frames == frames + 1)
    await pilot.press("g")
    await until(pilot, lambda: "sampled" in str(screen.query_one("#watch-info").render()))
    assert not player.greedy
    # A new episode takes the run's latest parameters.
    advance(5)
    before = player.policy_update
    player.episode.done = True
    player.live.ask()
    await pilot.press("n")
    await until(pilot, lambda: player.policy_update != before, SLOW)
    await pilot.press("q")
    await until(pilot, lambda: app.screen is app.dashboard)
    assert app.is_running  # closing the view leaves the dashboard


async def test_watch_key_opens_the_live_view_in_the_dashboard(tiny, tmp_path):
    config, acting = tiny
    fake = FakeSession(total_updates=100)
    fake.acting = acting
    app = dashboard(fake, config, tmp_path)

    async def main():
        async with app.run_test(size=(110, 32)) as pilot:
            await until(pilot, lambda: fake.started)
            await watch_scenario(app, pilot, fake.advance)
            keys = {active.binding.key: active.binding.description for active in app.active_bindings.values()}
            assert keys.get(WATCH_KEY) == "Watch"  # in the footer
            assert any(c.title == "Watch the agent" for c in app.get_system_commands(app.screen))

    await main()
    assert fake.params_requests >= 2


async def test_watch_key_on_an_attached_run(tiny, tmp_path):
    config, acting = tiny
    with served(tmp_path) as (fake, server):
        fake.acting = acting
        fake.on_thread(fake.advance, 2)
        remote = RemoteSession.connect(tmp_path)
        app = dashboard(remote, config, tmp_path)

        async def main():
            async with app.run_test(size=(110, 32)) as pilot:
                await until(pilot, lambda: app.session_state is not SessionState.IDLE)
                await watch_scenario(app, pilot, lambda n: fake.on_thread(fake.advance, n))

        try:
            await main()
        finally:
            remote.close()
        assert fake.params_requests >= 2


async def test_watch_view_says_why_when_the_run_has_no_parameters(tiny, tmp_path):
    from rltui.ui.screens.watch import WatchScreen

    config, _ = tiny
    fake = FakeSession(total_updates=100)
    app = dashboard(fake, config, tmp_path)

    async def main():
        async with app.run_test(size=(110, 32)) as pilot:
            await until(pilot, lambda: fake.started)
            await pilot.press(WATCH_KEY)
            await until(pilot, lambda: isinstance(app.screen, WatchScreen))
            await until(pilot, lambda: app.screen.failed is not None, SLOW)
            assert "no parameters" in str(app.screen.query_one("#watch-picture").render())
            await pilot.press("escape")
            await until(pilot, lambda: app.screen is app.dashboard)

    await main()


async def test_the_live_view_of_a_population_plays_each_member_s_agents(tmp_path):
    """A population's parameters have an agent axis (members x seeds): the view plays agent
    0, and `s` goes on to the next agent, labelled by member and seed."""
    import jax

    from rltui.ui.screens.watch import WatchScreen
    from trainers.parallel import build

    config = build_config({**TINY, "num_seeds": 2, "sweep": {"lr": [1e-3, 3e-3]}}, use_preset=False)
    parallel = build(config.static_config(), jax.local_devices()[:1])
    population = make_population(config, config.dynamic_hparams())
    state = parallel.init(parallel.seed_keys(config.seed), population.trainer_hparams())
    fake = FakeSession(total_updates=100)
    fake.acting = jax.tree.map(lambda x: np.array(np.asarray(x)[0]), (state.params, state.obs_stats))
    app = dashboard(fake, config, tmp_path)
    async with app.run_test(size=(110, 32)) as pilot:
        await until(pilot, lambda: fake.started)
        await pilot.press(WATCH_KEY)
        await until(pilot, lambda: isinstance(app.screen, WatchScreen))
        screen = app.screen
        await until(pilot, lambda: screen.shown >= 2 or screen.failed, SLOW)
        assert screen.failed is None
        info = lambda: str(screen.query_one("#watch-info").render())
        assert "member 0, seed 0 (1 of 4)" in info()
        await pilot.press("s")
        await until(pilot, lambda: "member 0, seed 1 (2 of 4)" in info(), SLOW)
        await pilot.press("s")
        await until(pilot, lambda: "member 1, seed 0 (3 of 4)" in info(), SLOW)
