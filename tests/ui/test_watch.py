"""`rltui watch`: the view (Pilot: open, step, switch mode, close) and --record."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

REPO = Path(__file__).resolve().parents[2]
TINY = ["--set", "num_envs=4", "--set", "num_steps=16", "--set", "num_minibatches=2", "--set", "update_epochs=1",
        "--set", "hidden_sizes=[16]", "--set", "total_timesteps=128"]


def cli(args, cwd: Path):
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    return subprocess.run([sys.executable, "-m", "rltui", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    work = tmp_path_factory.mktemp("watch")
    result = cli(["launch", "--no-ui", "--no-preset", "--run-dir", "run", *TINY], work)
    assert result.returncode == 0, result.stderr[-3000:]
    return work / "run"


def player_for(run_dir: Path):
    from rltui.commands.watch import load_player

    return load_player(SimpleNamespace(path=str(run_dir), seed=0, episodes=1, sample=False, record=None))


def test_record_writes_an_animated_svg(run_dir, tmp_path):
    out = tmp_path / "episode.svg"
    result = cli(["watch", str(run_dir), "--record", str(out)], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert str(out.resolve()) in result.stdout and "frames" in result.stdout
    svg = out.read_text(encoding="utf-8")
    assert svg.startswith("<svg") and svg.count('<g class="f"') >= 2 and "CartPole-v1" in svg


@pytest.mark.parametrize("target, needle", [("missing-dir/out.svg", "no such directory"),
                                            ("out.png", ".svg, .gif or .mp4")])
def test_record_to_a_bad_path_is_one_line_exit_2(run_dir, tmp_path, target, needle):
    result = cli(["watch", str(run_dir), "--record", target], tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rltui: error: --record") and needle in lines[0]


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes anywhere")
def test_record_to_a_read_only_directory_is_one_line_exit_2(run_dir, tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    result = cli(["watch", str(run_dir), "--record", str(locked / "x.svg")], tmp_path)
    assert result.returncode == 2 and "permission denied" in result.stderr


async def settled(pilot, screen, predicate=lambda: True, timeout: float = 60.0) -> None:
    """Until the steps asked for are taken and their frame is on screen (and `predicate`)."""
    import time

    deadline = time.monotonic() + timeout
    while screen._steps_asked or screen.shown < 1 or not screen._frame_shown.is_set() or not predicate():
        assert time.monotonic() < deadline, "timed out"
        await pilot.pause(0.02)


async def test_watch_view_opens_steps_switches_mode_and_closes(run_dir):
    await _opens_steps_switches_mode_and_closes(run_dir)


async def _opens_steps_switches_mode_and_closes(run_dir):
    from rltui.ui.screens.watch import WatchApp, WatchScreen

    player = player_for(run_dir)
    app = WatchApp(player, episodes=0, speed=1.0)
    async with app.run_test(size=(110, 30)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, WatchScreen)
        await pilot.press("n")  # pauses and steps one frame (in the view's worker thread)
        await settled(pilot, screen)
        assert screen.paused and player.episode.step >= 1
        step = player.episode.step
        await pilot.press("n")
        await settled(pilot, screen)
        assert player.episode.step == step + 1 or player.episode.step == 1  # or a new episode began
        info = str(screen.query_one("#watch-info").render())
        assert "greedy" in info and "V(s)" in info and "action" in info
        await pilot.press("g")
        await settled(pilot, screen, lambda: "sampled" in str(screen.query_one("#watch-info").render()))
        assert not player.greedy
        picture = str(screen.query_one("#watch-picture").render())
        assert "⠀" in picture or any(0x2800 <= ord(c) <= 0x28FF for c in picture)  # braille drawing
        await pilot.press("plus")
        assert screen.fps == 2.0
        await pilot.press("q")
        await pilot.pause()
    assert not app.is_running


async def test_the_way_out_of_the_watch_view_shows_on_an_80_column_footer(run_dir):
    from rltui.ui.screens.watch import WatchApp

    app = WatchApp(player_for(run_dir), episodes=0, speed=1.0)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        footer = app.screen._compositor.render_strips()[-1].text  # the bottom line, as the terminal shows it
        assert footer.split()[:2] == ["q", "close"]


async def test_watch_view_in_a_small_terminal_says_how_large_it_needs(run_dir):
    await _small_terminal(run_dir)


async def _small_terminal(run_dir):
    from rltui.ui.screens.watch import WatchApp

    app = WatchApp(player_for(run_dir), speed=1.0)
    async with app.run_test(size=(50, 8)) as pilot:
        await pilot.pause()
        app.screen.refresh_view()
        await settled(pilot, app.screen, lambda: "needs" in str(app.screen.query_one("#watch-picture").render()))
