"""What the dashboard prints when it closes (rltui.ui.runner): the same words as `--no-ui`,
how to go on included."""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import json
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from test_headless import TOTAL, snapshot
from test_ui import until
from textual.app import App

from rltui.config.build import RunConfig
from rltui.runfiles.rundir import check_not_in_use
from rltui.session import SessionState
from rltui.ui.runner import DashboardApp, _summary, run_dashboard

from fakes import FakeSession, fixed_device_stats
from test_cli import cli_env


def test_a_finished_run_is_summed_up_as_headless_does():
    last = dataclasses.replace(snapshot(TOTAL, sps=1000.0), state=SessionState.FINISHED)
    assert _summary(SessionState.FINISHED, last) == (
        "Finished after 100 updates (10,000 env steps), latest mean return 20.0."
    )


def test_several_seeds_are_summed_up_as_their_mean():
    last = snapshot(TOTAL, sps=1000.0, seed_returns=((10.0,), (30.0,)))
    assert _summary(SessionState.FINISHED, last).endswith("latest mean return 20.0 (mean of 2 seeds).")


def test_a_run_stopped_early_says_stopped():
    assert _summary(SessionState.FINISHED, snapshot(40, sps=1000.0)).startswith("Stopped after 40 updates (4,000 env")


def test_a_run_left_running_says_where_it_is():
    # Detached from an attached run, which goes on; or an error.
    assert _summary(SessionState.RUNNING, snapshot(40, sps=1000.0)) == "At update 40 (4,000 env steps)."


# --- run_dashboard's last words, from a dashboard driven to its end ---------------------------


def _run_dashboard_driven(monkeypatch, session, run_dir, drive) -> int:
    """run_dashboard, its app run headless with `drive(app, pilot)` at the keys."""

    def run(app, **kwargs):
        async def auto_pilot(pilot):
            await until(pilot, lambda: session.started)
            await drive(app, pilot)

        return App.run(app, headless=True, size=(100, 30), auto_pilot=auto_pilot)

    monkeypatch.setattr(DashboardApp, "run", run)
    return run_dashboard(session, RunConfig(), run_dir, device_source=fixed_device_stats())


def test_quitting_the_dashboard_says_how_to_go_on_as_headless_does(tmp_path, monkeypatch, capsys):
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "checkpoint-000000010.msgpack").write_bytes(b"")  # the final one
    fake = FakeSession()

    async def stop_and_quit(app, pilot):
        fake.on_thread(fake.advance, 10)
        await until(pilot, lambda: app.latest is not None and app.latest.update == 10)
        await pilot.press("q", "y")

    assert _run_dashboard_driven(monkeypatch, fake, tmp_path, stop_and_quit) == 0
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("Stopped after 10 updates (5,120 env steps)")
    assert lines[1:] == [f"Run files: {tmp_path}", f"To go on: rltui launch --resume {tmp_path}"]


def test_a_run_quit_before_its_first_checkpoint_has_nothing_to_go_on_from(tmp_path, monkeypatch, capsys):
    fake = FakeSession()

    async def quit_at_once(app, pilot):
        await pilot.press("q", "y")

    assert _run_dashboard_driven(monkeypatch, fake, tmp_path, quit_at_once) == 0
    assert "To go on" not in capsys.readouterr().err


def test_a_finished_run_says_how_to_train_on(tmp_path, monkeypatch, capsys):
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "checkpoint-000000010.msgpack").write_bytes(b"")
    fake = FakeSession(total_updates=10)

    async def finish_and_quit(app, pilot):
        fake.on_thread(fake.advance, 10)
        fake.on_thread(fake.event, "finished", "finished 10 updates")
        fake.on_thread(fake.set_state, SessionState.FINISHED)
        await until(pilot, lambda: app.dashboard.status.state_text == "finished")
        await pilot.press("q")

    assert _run_dashboard_driven(monkeypatch, fake, tmp_path, finish_and_quit) == 0
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("Finished after 10 updates")
    assert lines[-1] == f"To train on: rltui launch --resume {tmp_path} --set total_timesteps={2 * 10 * 512}"


def test_a_run_on_an_env_object_offers_a_resume_from_python(tmp_path):
    # An env object handed to the Python API: `rltui launch --resume` could not build it.
    from rltui.ui.runner import _go_on

    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "checkpoint-000000010.msgpack").write_bytes(b"")
    last = snapshot(TOTAL, sps=1000.0)
    assert _go_on(SessionState.FINISHED, last, None, tmp_path, "CartPole-v1").startswith("To train on: ")
    assert _go_on(SessionState.FINISHED, last, None, tmp_path, "object:Bandit") == (
        f'To train on: rltui.train(env=<your env>, resume="{tmp_path}", total_timesteps={2 * last.env_steps})')


def test_a_diverged_run_quit_from_the_dashboard_is_offered_a_command_that_works(tmp_path):
    # The same checkpoint would diverge again: half the rate; without one, a new start.
    from rltui.ui.runner import _go_on

    last = snapshot(TOTAL, sps=1000.0)
    assert _go_on(SessionState.FINISHED, last, None, tmp_path, "CartPole-v1", diverged=True, lr=1e-3) == (
        f"It diverged before its first checkpoint; to start again at half the learning rate: "
        f"rltui launch --config {tmp_path / 'config.toml'} --set lr=0.0005")
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "checkpoint-000000003.msgpack").write_bytes(b"")
    assert _go_on(SessionState.FINISHED, last, None, tmp_path, "CartPole-v1", diverged=True, lr=1e-3) == (
        f"To go on from update 3, at half the learning rate: rltui launch --resume {tmp_path} --set lr=0.0005 "
        f"--set total_timesteps={last.total_env_steps}")


# --- the terminal goes away under the dashboard --------------------------------------------

# rltui, with the terminal on its standard streams made its controlling terminal, as a
# shell in a terminal window or tmux does: closing the terminal then hangs it up.
_ON_ITS_TERMINAL = (
    "import fcntl, runpy, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "sys.argv[0] = 'rltui'; runpy.run_module('rltui', run_name='__main__')"
)
_TINY = ["--set", "num_envs=4", "--set", "num_steps=64", "--set", "num_minibatches=2", "--set", "update_epochs=1"]
_ESCAPES = re.compile(rb"\x1b\[[0-9;?<>=]*[a-zA-Z~]")


@pytest.fixture(scope="module")
def cache() -> Path:
    """The session's JAX compilation cache (tests/conftest.py): same shapes, so later runs compile fast."""
    return Path(os.environ["XDG_CACHE_HOME"])


def _event_kinds(run_dir: Path) -> list[str]:
    path = run_dir / "events.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    return [json.loads(line)["kind"] for line in lines if line.endswith("}")]


def _text(screen: bytes) -> str:
    return _ESCAPES.sub(b"", screen).decode("utf-8", "ignore")


def _trained(run_dir: Path) -> bool:
    path = run_dir / "metrics.jsonl"
    return path.exists() and path.read_text(encoding="utf-8").strip() != ""


# state: (updates to train, key pressed once training runs, what says the state is reached)
_STATES = {
    "training": (8000, None, lambda kinds, screen: True),
    "paused": (8000, b"p", lambda kinds, screen: "paused" in kinds),
    "finished": (16, None, lambda kinds, screen: "finished" in kinds),
    "quit dialog": (8000, b"q", lambda kinds, screen: "Stop it and quit?" in screen),
    "watch view": (8000, b"a", lambda kinds, screen: "the policy as it trains" in screen),
    # Not its controlling terminal: no SIGHUP comes, only reads and writes that fail.
    "training, no SIGHUP": (8000, None, lambda kinds, screen: True),
}


@pytest.mark.parametrize("state", list(_STATES))
def test_a_dashboard_whose_terminal_closes_ends_after_its_final_checkpoint(tmp_path, cache, state):
    updates, key, reached = _STATES[state]
    run_dir = tmp_path / "run"
    args = ["launch", "--run-dir", str(run_dir), "--set", f"total_timesteps={updates * 256}", *_TINY]
    command = [sys.executable, "-m", "rltui"] if "no SIGHUP" in state else [sys.executable, "-c", _ON_ITS_TERMINAL]
    master, terminal = os.openpty()
    proc = subprocess.Popen(
        [*command, *args], cwd=tmp_path, stdin=terminal, stdout=terminal, stderr=terminal, start_new_session=True,
        env=cli_env(cache, COLUMNS="100", LINES="30", TERM="xterm-256color"),
    )
    os.close(terminal)
    screen = bytearray()
    try:
        deadline = time.monotonic() + 180
        pressed = key is None
        while not (_trained(run_dir) and reached(_event_kinds(run_dir), _text(screen))):
            assert time.monotonic() < deadline and proc.poll() is None, f"not {state}: {_event_kinds(run_dir)}"
            if not pressed and _trained(run_dir):
                os.write(master, key)
                pressed = True
            while select.select([master], [], [], 0.05)[0]:  # keep the terminal drained
                try:
                    data = os.read(master, 65536)
                except OSError:
                    break
                if not data:
                    break
                screen += data
        os.close(master)  # the terminal goes: its window closed, its tmux session killed
        master = None
        code = proc.wait(timeout=120)
    finally:
        if master is not None:
            os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == 0
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text(encoding="utf-8").splitlines()]
    assert events[-1]["kind"] == "finished", events
    final = [e for e in events if e["kind"] == "checkpoint" and e["data"].get("reason") == "final"]
    assert final and final[-1]["update"] == events[-1]["update"]
    assert (run_dir / "checkpoints" / f"checkpoint-{final[-1]['update']:09d}.msgpack").exists()
    check_not_in_use(run_dir)  # `rltui launch --resume` may take the run again


def test_a_terminal_read_that_would_block_reads_on_and_only_a_dead_terminal_hangs_up():
    # A terminal another process shares (and made non-blocking) may have nothing to read
    # after all; only a read that fails for good (EIO: the terminal hung up) ends the app.
    from rltui.ui.terminal import TerminalDriver

    driver = TerminalDriver.__new__(TerminalDriver)
    reads = [BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable"),
             InterruptedError(errno.EINTR, "Interrupted system call"), OSError(errno.EIO, "Input/output error")]
    attempts, gone = [], []

    def run_input_thread():
        attempts.append(1)
        raise reads.pop(0)

    driver.run_input_thread = run_input_thread
    driver._terminal_gone = lambda: gone.append(len(attempts))
    driver._run_input_thread()
    assert len(attempts) == 3 and gone == [3]


class _StopsUnderALock(FakeSession):
    """stop() holds a lock that is not reentrant, as the real session's calls do; a hang-up
    lands while it is held outside the app (as run_dashboard lets go of the session)."""

    def __init__(self):
        super().__init__()
        self._stop_lock = threading.Lock()

    def stop(self) -> None:
        if not self._stop_lock.acquire(timeout=10):
            raise AssertionError("stop() entered again from a signal handler inside it: a deadlock")
        try:
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                os.kill(os.getpid(), signal.SIGHUP)  # its handler runs on this thread, lock held
            super().stop()
        finally:
            self._stop_lock.release()


def test_a_hang_up_while_the_dashboard_lets_go_of_its_session_still_ends_the_run(tmp_path, monkeypatch, capsys):
    fake = _StopsUnderALock()

    async def quit_at_once(app, pilot):
        await pilot.press("q", "y")

    assert _run_dashboard_driven(monkeypatch, fake, tmp_path, quit_at_once) == 0
    assert fake.state is SessionState.FINISHED
    assert f"Run files: {tmp_path}" in capsys.readouterr().err


def test_a_hang_up_before_the_dashboard_comes_up_ends_it_at_once(tmp_path, monkeypatch):
    fake = FakeSession()
    came_up = []

    def run(app, **kwargs):
        os.kill(os.getpid(), signal.SIGHUP)  # the terminal closes as the dashboard starts

        async def auto_pilot(pilot):
            came_up.append(True)
            app.exit()

        return App.run(app, headless=True, size=(100, 30), auto_pilot=auto_pilot)

    monkeypatch.setattr(DashboardApp, "run", run)
    assert run_dashboard(fake, RunConfig(), tmp_path, device_source=fixed_device_stats()) == 0
    assert came_up == [] and not fake.started  # nobody is left to show it to
