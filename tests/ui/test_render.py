"""Renderers: a snapshot of each family at a fixed state (plain text, and the colours that
carry meaning), the fallback bar view, the custom env hook, and the size check."""

from __future__ import annotations

import math
import os
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from rltui.render import BarRenderer, Size, render_safely, renderer_for, too_small
from rltui.render.grids import PALETTE

SNAPSHOTS = Path(__file__).parent / "render_snapshots"
SIZE = Size(40, 10)
UPDATE = os.environ.get("RLTUI_UPDATE_RENDER_SNAPSHOTS") == "1"


def wrapped(**fields):
    """An env state inside a wrapper's state, as LogWrapper holds it."""
    return SimpleNamespace(env_state=SimpleNamespace(**fields), episode_returns=0.0)


def breakout_obs() -> np.ndarray:
    obs = np.zeros((10, 10, 4), bool)
    obs[9, 4, 0] = True  # paddle
    obs[5, 6, 1] = True  # ball
    obs[4, 5, 2] = True  # trail
    obs[1:4, :, 3] = True  # bricks
    return obs


CASES = {
    "cartpole": ("CartPole-v1", wrapped(x=0.5, theta=0.15), np.zeros(4), ()),
    "acrobot": ("Acrobot-v1", wrapped(joint_angle1=0.8, joint_angle2=-0.6), np.zeros(6), ()),
    "pendulum": ("Pendulum-v1", wrapped(theta=0.7, last_u=1.2), np.zeros(3), ()),
    "mountaincar": ("MountainCar-v0", wrapped(position=-0.3, velocity=0.01), np.zeros(2), ()),
    "breakout": ("Breakout-MinAtar", wrapped(), breakout_obs().reshape(-1), (10, 10, 4)),
    "catch": ("Catch-bsuite", wrapped(), np.eye(10, 5).reshape(-1), (10, 5)),
    "points": ("PointRobot-misc", wrapped(pos=np.array([0.3, -0.2]), goal=np.array([-0.5, 0.6])), np.zeros(6), ()),
    "bars": ("MemoryChain-bsuite", wrapped(), np.array([1.0, -0.5, 0.25]), (3,)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_renderer_snapshot(name):
    env_id, state, obs, shape = CASES[name]
    frame = renderer_for(env_id, None, None, shape).render(state, obs, SIZE)
    text = frame.plain + "\n--\n" + frame.legend.plain.rstrip() + "\n"
    path = SNAPSHOTS / f"{name}.txt"
    if UPDATE or not path.exists():
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")
    assert len(frame.lines) <= SIZE.rows and all(len(line.plain) <= SIZE.columns for line in frame.lines)


def test_minatar_channels_have_their_own_colours_and_a_legend():
    frame = renderer_for("Breakout-MinAtar", obs_shape=(10, 10, 4)).render(wrapped(), breakout_obs(), SIZE)

    def style_at(row: int, col: int) -> str:
        line = frame.lines[row]
        return next(str(span.style) for span in line.spans if span.start <= 2 * col < span.end)

    assert style_at(9, 4) == PALETTE[0] and style_at(5, 6) == PALETTE[1] and style_at(2, 0) == PALETTE[3]
    assert "paddle" in frame.legend.plain and "brick" in frame.legend.plain
    assert {str(span.style) for span in frame.legend.spans} >= {PALETTE[0], PALETTE[1], PALETTE[2], PALETTE[3]}


def test_an_env_without_renderer_falls_back_to_bars():
    assert isinstance(renderer_for("my_pkg.envs:make_env", None, None, (5,)), BarRenderer)
    frame = BarRenderer().render(None, np.array([2.0, -1.0, math.nan, 0.0]), SIZE)
    assert [line.plain.split()[0] for line in frame.lines] == ["obs[0]", "obs[1]", "obs[2]", "obs[3]"]
    assert "?" in frame.lines[2].plain  # a non-finite value is shown, not a crash


def test_a_custom_env_renders_itself_through_render_text():
    class Inner:
        def render_text(self, state, params):
            return f"agent at {state.pos}, size {params}"

    env = SimpleNamespace(_env=SimpleNamespace(_env=Inner()))  # wrappers keep the env as _env
    renderer = renderer_for("my_pkg.envs:make_env", env, 7, (2,))
    assert renderer.render(wrapped(pos=3), np.zeros(2), SIZE).plain == "agent at 3, size 7"


def test_a_failing_renderer_falls_back_and_says_why():
    frame, why = render_safely(renderer_for("CartPole-v1"), SimpleNamespace(), np.ones(4), SIZE)
    assert why and "cart and pole failed" in why
    assert frame.lines[0].plain.startswith("obs[0]")


def test_too_small_says_how_large_it_needs():
    renderer = renderer_for("Breakout-MinAtar", obs_shape=(10, 10, 4))
    assert too_small(renderer, Size(40, 12)) is None
    message = too_small(renderer, Size(12, 5))
    assert message and "20x10" in message and "12x5" in message


def test_equal_styles_in_a_row_are_one_span():
    """The view converts and draws every span of every frame: a line of one colour is one span."""
    from rltui.render.canvas import BrailleCanvas

    canvas = BrailleCanvas(20, 2)
    canvas.line(0, 1, 39, 1, style="cyan")
    canvas.dot(0, 6, style="red")
    top, bottom = canvas.lines()
    assert top.plain == chr(0x2800 + 0x02 + 0x10) * 20
    assert [(s.start, s.end, str(s.style)) for s in top.spans] == [(0, 20, "cyan")]
    assert [(s.start, s.end, str(s.style)) for s in bottom.spans] == [(0, 1, "red")]
