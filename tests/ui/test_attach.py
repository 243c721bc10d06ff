"""`rltui attach` and `rltui serve`: the dashboard driven with Pilot over the control
socket (a fake session, then a real headless run in a subprocess), and the commands'
errors as a user sees them."""

from __future__ import annotations

import os
import re
import select
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from test_ui import progress_text, status_text, until

from rltui.config.build import RunConfig
from rltui.control.remote import LOST, RemoteSession
from rltui.runfiles.names import SOCKET as SOCKET_NAME
from rltui.session import Pause, Resume, SessionState, Stop
from rltui.ui.app import DashboardApp
from rltui.ui.screens import HelpScreen, QuitConfirm, StopRunConfirm

from control_client import LineClient, served, wait_for
from fakes import FakeSession, fixed_device_stats
from test_cli import TINY, cli_env, read_jsonl, rltui

TIMEOUT = 10.0


def footer_keys(app: DashboardApp) -> dict[str, str]:
    return {key: active.binding.description for key, active in app.dashboard.active_bindings.items()
            if active.binding.show}


def attached_app(remote, run_dir: Path, config: RunConfig | None = None) -> DashboardApp:
    return DashboardApp(remote, config or RunConfig(), run_dir, device_source=fixed_device_stats(),
                        chart_interval=0, refresh_interval=0, user_theme_dir=run_dir / "no-user-themes")


async def run_attached(run_dir: Path, scenario, size=(100, 30)) -> tuple[DashboardApp, RemoteSession]:
    """Attach to the run in `run_dir`, run `scenario(app, pilot)`, detach."""
    remote = RemoteSession.connect(run_dir)
    app = attached_app(remote, run_dir)

    async def main():
        async with app.run_test(size=size) as pilot:
            await until(pilot, lambda: app.session_state is not SessionState.IDLE)
            await scenario(app, pilot)

    try:
        await main()
    finally:
        remote.close()
    return app, remote


# --- the attached dashboard over a fake run ------------------------------------------------


async def test_quit_detaches_and_the_run_goes_on(tmp_path):
    with served(tmp_path) as (fake, server):
        fake.on_thread(fake.advance, 7)

        async def scenario(app, pilot):
            await until(pilot, lambda: "update 7/" in progress_text(app))
            keys = footer_keys(app)
            assert keys["q"] == "Detach" and keys["k"] == "Stop run"
            await pilot.press("p")
            await until(pilot, lambda: status_text(app) == "paused")
            await pilot.press("q")  # no question: leaving stops nothing
            assert app.return_code == 0

        await run_attached(tmp_path, scenario)
        assert fake.commands == [Pause()]  # no Stop
        assert fake.state is SessionState.PAUSED and not fake.join(0.05)
        wait_for(lambda: server.client_count == 0)  # the dashboard's hang-up, once the server thread sees it


async def test_stopping_the_run_is_explicit_and_confirmed(tmp_path):
    with served(tmp_path) as (fake, _):

        async def scenario(app, pilot):
            await pilot.press("k")
            assert isinstance(app.screen, StopRunConfirm)
            await pilot.press("n")
            assert not isinstance(app.screen, StopRunConfirm)
            await pilot.pause(0.05)
            assert fake.commands == []
            await pilot.press("k")
            assert isinstance(app.screen, StopRunConfirm)
            await pilot.press("y")
            await until(pilot, lambda: app.session_state is SessionState.FINISHED)
            assert fake.commands == [Stop()]
            assert app.return_code is None  # the dashboard stays to show how it ended
            assert "stopped at update 0" in app.dashboard.events_log.text
            # Stopped, as headless and rltui runs say: not "finished".
            assert status_text(app) == "stopped"
            assert str(app.dashboard.query_one("#state-badge").content) == " stopped "
            assert [(n.title, n.message.split("\n")[0]) for n in app._notifications] == [
                ("stopped", "Stopped at update 0. Press q to close this dashboard.")]
            assert app.check_action("stop_run", ()) is False  # hidden: nothing left to stop
            await pilot.press("q")
            assert app.return_code == 0

        await run_attached(tmp_path, scenario)


async def test_the_run_dying_while_attached_shows_an_error(tmp_path):
    with served(tmp_path) as (fake, server):

        async def scenario(app, pilot):
            await until(pilot, lambda: status_text(app) == "running")
            server.close()  # the job's process went away without a word
            await until(pilot, lambda: status_text(app) == "error")
            assert LOST in str(app.dashboard.query_one("#state-badge").content)
            await pilot.press("q")
            assert app.return_code == 0

        await run_attached(tmp_path, scenario)


async def test_help_palette_and_ctrl_q_of_an_attached_dashboard(tmp_path):
    with served(tmp_path) as (fake, _):

        async def scenario(app, pilot):
            await pilot.press("question_mark")
            assert isinstance(app.screen, HelpScreen)
            keys = app.screen.text
            assert "leave the attached run" in keys and "stops the run)" not in keys
            await pilot.press("escape")
            titles = {command.title for command in app.get_system_commands(app.screen)}
            assert "Stop the run" in titles
            await pilot.press("ctrl+q")
            assert app.return_code == 0

        await run_attached(tmp_path, scenario)
        assert fake.commands == []


async def test_an_owned_dashboard_keeps_quit_and_has_no_detach(tmp_path):
    fake = FakeSession()
    app = attached_app(fake, tmp_path)

    async def main():
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda: app.session_state is SessionState.RUNNING)
            keys = footer_keys(app)
            assert keys["q"] == "Quit" and "k" not in keys
            await pilot.press("k")
            assert not isinstance(app.screen, StopRunConfirm)
            await pilot.press("ctrl+q")
            assert isinstance(app.screen, QuitConfirm)
            await pilot.press("escape", "q")
            assert isinstance(app.screen, QuitConfirm)

    await main()
    fake.stop()


# --- against a real headless run -----------------------------------------------------------


def _wait_for_socket(proc: subprocess.Popen, run_dir: Path, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        metrics = run_dir / "metrics.jsonl"
        if (run_dir / SOCKET_NAME).exists() and metrics.exists() and metrics.read_text().strip():
            return
        if proc.poll() is not None:
            pytest.fail(f"the run ended early with {proc.returncode}: {proc.communicate()[1][-3000:]}")
        time.sleep(0.2)
    pytest.fail("the run did not start training in time")


async def test_attach_to_a_real_headless_run_detach_reattach_and_stop(tmp_path):
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "rltui", "launch", "--no-ui", "--run-dir", str(run_dir),
         "--set", "total_timesteps=2e7", "--set", "hidden_sizes=[16]", *TINY],
        cwd=tmp_path, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        _wait_for_socket(proc, run_dir)
        async def first(app, pilot):
            await until(pilot, lambda: app.latest is not None and app.latest.update > 0, timeout=60)
            await pilot.press("p")
            await until(pilot, lambda: status_text(app) == "paused", timeout=30)
            await pilot.press("e", "1", "e", "-", "3", "enter")  # lr
            await until(pilot, lambda: "set lr 0.00025 -> 0.001" in app.dashboard.events_log.text, timeout=30)
            await pilot.press("q")

        await run_attached(run_dir, first)
        assert proc.poll() is None  # detached: the job goes on, paused (the second attach below finds it so)
        paused_at = read_jsonl(run_dir / "metrics.jsonl")[-1]["update"]

        async def second(app, pilot):
            await until(pilot, lambda: "set lr 0.00025 -> 0.001" in app.dashboard.events_log.text)
            assert status_text(app) == "paused" and app.latest.update == paused_at
            assert re.search(r"^lr +0\.001 \(start\)$", str(app.dashboard.query_one("#hp-dynamic").content), re.M)
            await pilot.press("p")
            await until(pilot, lambda: app.latest.update > paused_at, timeout=30)
            await pilot.press("k", "y")
            await until(pilot, lambda: app.session_state is SessionState.FINISHED, timeout=30)
            await until(pilot, lambda: status_text(app) == "stopped")
            await pilot.press("q")

        await run_attached(run_dir, second)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        stderr = proc.communicate()[1]
    kinds = [event["kind"] for event in read_jsonl(run_dir / "events.jsonl")]
    assert kinds[0] == "compiled" and kinds[-1] == "finished", kinds
    assert kinds.index("paused") < kinds.index("hparams") < kinds.index("resumed") < kinds.index("stopping")
    assert "Stopped after" in stderr and f"rltui attach {run_dir}" in stderr
    assert not (run_dir / SOCKET_NAME).exists()


# --- the commands --------------------------------------------------------------------------


def test_attach_with_nothing_to_attach_to_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "ended").mkdir()
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(tmp_path / "ended" / SOCKET_NAME))
    stale.close()
    for target, expected in (("missing", "no such run directory"), ("ended", "the run has ended"),
                             (".", "no control socket")):
        result = rltui(["attach", target], tmp_path, timeout=60)
        assert result.returncode == 2, result.stderr
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("rltui: error: ") and expected in lines[0], result.stderr


def test_attach_to_a_folder_of_runs_names_the_listening_ones(tmp_path):
    runs = tmp_path / "runs"
    (runs / "ended").mkdir(parents=True)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(runs / "ended" / SOCKET_NAME))  # left over: refuses
    stale.close()
    (runs / "live").mkdir()
    with served(runs / "live"):
        result = rltui(["attach", str(runs)], tmp_path, timeout=60)
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        f"rltui: error: {runs} is a folder of runs; pick one: rltui attach {runs / 'NAME'} (live is listening)"]


def _run_in_a_terminal(argv: list[str], cwd: Path, until: bytes, keys: bytes, timeout: float = 60,
                       size: tuple[int, int] = (100, 30)) -> tuple[int, str]:
    """Run `rltui argv` on a pseudo-terminal, type `keys` once `until` is on screen."""
    # subprocess forks and execs in C: no Python runs in a forked copy of this (JAX-
    # threaded) process, which pty.fork would do.
    fd, terminal = os.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "rltui", *argv], cwd=cwd, stdin=terminal, stdout=terminal, stderr=terminal,
        env=cli_env(COLUMNS=str(size[0]), LINES=str(size[1]), TERM="xterm-256color"), start_new_session=True,
    )
    os.close(terminal)
    screen, typed = b"", False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if select.select([fd], [], [], 0.1)[0]:
            try:
                data = os.read(fd, 65536)
            except OSError:  # the child has gone
                break
            if not data:
                break
            screen += data
        if not typed and until in screen:
            time.sleep(0.5)  # let the first frame settle before typing
            os.write(fd, keys)
            typed = True
    else:
        proc.kill()
    code = proc.wait(timeout=30)
    os.close(fd)
    return code, screen.decode(errors="replace")


def test_rltui_attach_in_a_terminal_detaches_with_q(tmp_path):
    with served(tmp_path) as (fake, _):
        fake.on_thread(fake.advance, 20)
        code, screen = _run_in_a_terminal(["attach", str(tmp_path)], tmp_path, until=b"update 20", keys=b"q")
        assert code == 0, screen[-2000:]
        assert f"Detached; the run goes on (running). Attach again with: rltui attach {tmp_path}" in screen
        assert fake.state is SessionState.RUNNING and fake.commands == []


def test_attach_without_a_terminal_is_one_line_and_exit_2(tmp_path):
    # Output captured: no terminal to draw on, nor keys to quit with; the job is untouched.
    with served(tmp_path) as (fake, _):
        result = rltui(["attach", str(tmp_path)], tmp_path, timeout=60)
        assert result.returncode == 2, result.stderr
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and "the dashboard needs a terminal" in lines[0], result.stderr
        assert f"rltui serve {tmp_path}" in lines[0]
        assert fake.state is SessionState.RUNNING and fake.commands == []


def test_attach_and_serve_help(tmp_path):
    attach = rltui(["attach", "--help"], tmp_path, timeout=30)
    assert attach.returncode == 0 and "RUN_DIR" in attach.stdout and "detaches" in attach.stdout
    serve = rltui(["serve", "--help"], tmp_path, timeout=30)
    assert serve.returncode == 0
    for option in ("--host", "--port", "--token", "--no-token", "--theme", "127.0.0.1"):
        assert option in serve.stdout, option


def test_serve_without_textual_serve_says_how_to_install(tmp_path):
    blocked = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'textual_serve':\n"
        "            raise ImportError(name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "from rltui.cli import main\n"
        "sys.exit(main(['serve', '.']))\n"
    )
    result = subprocess.run([sys.executable, "-c", blocked], cwd=tmp_path, env=cli_env(),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip() == 'rltui: error: rltui serve needs textual-serve: pip install "rltui[serve]" ' \
                                    "(or: pip install textual-serve)"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_serve_on_a_taken_port_is_one_line_and_never_says_serving(tmp_path):
    pytest.importorskip("textual_serve")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    with served(run_dir), socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        result = rltui(["serve", str(run_dir), "--port", str(port)], tmp_path, timeout=60)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"rltui: error: cannot listen on 127.0.0.1:{port}:"), result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert "Serving" not in result.stdout + result.stderr


def test_serve_offers_the_attached_dashboard_on_localhost(tmp_path):
    pytest.importorskip("textual_serve")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    with served(run_dir):
        port = _free_port()
        proc = subprocess.Popen([sys.executable, "-m", "rltui", "serve", str(run_dir), "--port", str(port),
                                 "--token", "t0ken"], cwd=tmp_path, env=cli_env(),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            page = None
            deadline = time.monotonic() + 30
            while page is None and time.monotonic() < deadline and proc.poll() is None:
                try:
                    page = urllib.request.urlopen(f"http://127.0.0.1:{port}/?token=t0ken", timeout=5).read().decode()
                except OSError:
                    time.sleep(0.2)
            assert page is not None, proc.communicate(timeout=5)
            assert f"ws://127.0.0.1:{port}/ws" in page  # the browser connects back to localhost only
            assert "rltui · run" in page
        finally:
            proc.terminate()
            out, err = proc.communicate(timeout=30)
        opened = f"http://127.0.0.1:{port}/?token=t0ken"
        assert f"rltui: serving the dashboard of {run_dir}: open {opened} (Ctrl+C stops)" in err
        assert "Traceback" not in err


# --- issue 28: attaching to a paused run ------------------------------------------------------


def _paused_after_a_pause_and_resume(fake) -> None:
    fake.on_thread(fake.event, "compiled", "compiled in 1.0 s")
    fake.on_thread(fake.advance, 5)
    for command, state in ((Pause(), SessionState.PAUSED), (Resume(), SessionState.RUNNING),
                           (Pause(), SessionState.PAUSED)):
        fake.submit(command)
        wait_for(lambda: fake.state is state)  # called before the loop moves on


def test_attaching_to_a_paused_run_draws_the_events_it_logged_before(tmp_path):
    # On a real terminal: the events a run logged before this client attached are drawn
    # at once, not only when the next event comes.
    with served(tmp_path) as (fake, _):
        _paused_after_a_pause_and_resume(fake)
        for size in ((120, 40), (100, 30)):  # every panel at once, and the compact layout
            code, screen = _run_in_a_terminal(["attach", str(tmp_path)], tmp_path, until=b"resumed", keys=b"q",
                                              timeout=20, size=size)
            assert code == 0, screen[-2000:]
            assert "resumed" in screen and "compiled" in screen


async def test_a_paused_run_attached_later_counts_elapsed_from_now(tmp_path):
    # The run's clock goes on while paused: a client attaching later shows the time of
    # now, not the time of the last chunk plus its own time attached.
    with served(tmp_path) as (fake, server):
        fake.on_thread(fake.advance, 5)  # the snapshot says elapsed 0.05 s
        fake.submit(Pause())
        wait_for(lambda: fake.state is SessionState.PAUSED)
        time.sleep(2.2)
        client = LineClient(server.path)
        snapshot = client.until(lambda m: m["type"] == "snapshot")
        client.close()
        assert snapshot["update"] == 5 and snapshot["elapsed"] >= 2.2

        async def scenario(app, pilot):
            await until(pilot, lambda: app.latest is not None)
            assert "elapsed 0:02" in progress_text(app)

        await run_attached(tmp_path, scenario)


async def test_the_stop_question_of_a_paused_attached_run_offers_to_keep_it_paused(tmp_path):
    with served(tmp_path) as (fake, _):
        fake.submit(Pause())
        wait_for(lambda: fake.state is SessionState.PAUSED)

        async def scenario(app, pilot):
            await until(pilot, lambda: status_text(app) == "paused")
            await pilot.press("k")
            assert isinstance(app.screen, StopRunConfirm)
            assert str(app.screen.query_one("#quit-no").label) == "Keep it paused (n)"
            await pilot.press("n")

        await run_attached(tmp_path, scenario)
        assert fake.commands == [Pause()]


# --- issue 28: a browser tab (rltui serve) on a run that has ended ---------------------------


def test_a_browser_tab_on_a_run_that_has_ended_says_so_on_the_page(tmp_path, monkeypatch, capsys):
    import argparse

    from rltui.commands import attach
    shown = []
    monkeypatch.setattr(attach, "show_unavailable", lambda reason, hint: shown.append((reason, hint)))
    args = argparse.Namespace(run_dir=str(tmp_path), theme=None)
    monkeypatch.delenv("TEXTUAL_DRIVER", raising=False)
    assert attach.cmd_attach(args) == 2 and shown == []  # a terminal: the error line only
    # What textual-serve sets for the command it runs for each tab.
    monkeypatch.setenv("TEXTUAL_DRIVER", "textual.drivers.web_driver:WebDriver")
    assert attach.cmd_attach(args) == 2
    ((reason, hint),) = shown
    assert "no run is listening there" in reason and str(tmp_path) in hint and "q" in hint
    errors = capsys.readouterr().err.splitlines()
    assert len(errors) == 2 and all(line.startswith("rltui: error: ") for line in errors)  # serve's terminal too


async def test_the_page_of_a_run_that_has_ended_shows_the_reason_and_closes_with_q():
    from rltui.ui.screens.unavailable import AttachUnavailableApp

    app = AttachUnavailableApp("runs/x: no run is listening there (it has ended)", "Its files stay in runs/x.")

    async def main():
        async with app.run_test(size=(80, 24)) as pilot:
            text = app.export_screenshot().replace("&#160;", " ")
            assert "no run is listening there" in text and "Its files stay in runs/x." in text
            await pilot.press("q")
        assert app.return_code == 0

    await main()


def test_serve_says_once_when_the_run_ends(tmp_path):
    import io

    from rltui.commands.serve import RunEndWatcher

    with served(tmp_path) as (fake, _):
        out = io.StringIO()
        remote = RemoteSession.connect(tmp_path)
        try:
            remote.add_listener(RunEndWatcher(tmp_path, out=out))
            fake.on_thread(fake.advance, 3)
            assert out.getvalue() == ""  # running: nothing to say
            fake.stop()
            assert remote.join(TIMEOUT)
            wait_for(lambda: out.getvalue())
        finally:
            remote.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"rltui: {tmp_path}: the run has ended (finished)")
    assert "still serving" in lines[0]
