"""Grid worlds as coloured cells: MinAtar's channels, bsuite's boards, the misc grids.
Each frame carries its cells as an image too (its scene), for the terminal's image view
and for recordings."""

from __future__ import annotations

from typing import Any

import numpy as np
from rich.text import Text

from rltui.render.base import Frame, Renderer, Size, styled_line, unwrap_state
from rltui.render.scene import Box, Scene, SceneBuilder, SceneRenderer, cells_image

PALETTE = ("cyan", "yellow", "bright_black", "red", "green", "magenta", "blue", "bright_white", "orange3", "purple")

# MinAtar's observation channels, in order (the games' own names).
MINATAR_CHANNELS = {
    "Breakout-MinAtar": ("paddle", "ball", "trail", "brick"),
    "Asterix-MinAtar": ("player", "enemy", "trail", "gold"),
    "Freeway-MinAtar": ("chicken", "car", "speed 1", "speed 2", "speed 3", "speed 4", "speed 5"),
    "SpaceInvaders-MinAtar": ("cannon", "alien", "alien left", "alien right", "friendly bullet", "enemy bullet"),
}


def channel_legend(names) -> Text:
    legend = Text()
    for i, name in enumerate(names):
        legend.append("██", style=PALETTE[i % len(PALETTE)])
        legend.append(f" {name}  ")
    return legend


class ChannelGridRenderer(Renderer):
    """An image observation (height, width, channels) as cells two characters wide, each
    coloured by its channel (the last one set wins where several are)."""

    name = "channel cells"

    def __init__(self, shape: tuple[int, ...], channel_names: tuple[str, ...] | None = None):
        self.shape = tuple(shape)
        channels = self.shape[2] if len(self.shape) == 3 else 1
        self.names = channel_names or tuple(f"channel {i}" for i in range(channels))
        self.min_size = Size(2 * self.shape[1], self.shape[0])

    def render(self, state: Any, obs: np.ndarray, size: Size) -> Frame:
        image = np.asarray(obs, dtype=np.float32).reshape(self.shape)
        if image.ndim == 2:
            image = image[:, :, None]
        styles = [[_top_channel_style(cell) for cell in row] for row in image]
        lines = [styled_line(("██", style) if style else ("· ", "bright_black") for style in row) for row in styles]
        legend = channel_legend(self.names)
        return Frame(tuple(lines), legend, Scene(cells=cells_image(styles), legend=legend))


def _top_channel_style(cell: np.ndarray) -> str | None:
    on = np.flatnonzero(cell > 0.5)
    return PALETTE[int(on[-1]) % len(PALETTE)] if on.size else None


class BoardRenderer(Renderer):
    """A 2-D observation (bsuite's Catch and DeepSea) as a board of cells."""

    name = "board"

    def __init__(self, shape: tuple[int, ...]):
        self.shape = tuple(shape)
        self.min_size = Size(2 * self.shape[1], self.shape[0])

    def render(self, state: Any, obs: np.ndarray, size: Size) -> Frame:
        board = np.asarray(obs, dtype=np.float32).reshape(self.shape)
        styles = [["cyan" if value > 0.5 else None for value in row] for row in board]
        lines = [styled_line(("██", style) if style else ("· ", "bright_black") for style in row) for row in styles]
        legend = Text("██ occupied (agent, ball or paddle)", style="dim")
        return Frame(tuple(lines), legend, Scene(cells=cells_image(styles), legend=legend))


class FourRoomsRenderer(Renderer):
    """FourRooms: the walls, the agent and the goal."""

    name = "rooms"

    def __init__(self, env: Any):
        self.walls = np.asarray(env.env_map) == 0 if hasattr(env, "env_map") else None
        rows, cols = (13, 13) if self.walls is None else self.walls.shape
        self.min_size = Size(2 * cols, rows)

    def render(self, state: Any, obs: np.ndarray, size: Size) -> Frame:
        inner = unwrap_state(state)
        pos = tuple(int(v) for v in np.asarray(inner.pos).reshape(-1)[:2])
        goal = tuple(int(v) for v in np.asarray(inner.goal).reshape(-1)[:2])
        walls = self.walls if self.walls is not None else np.zeros((13, 13), bool)
        lines, styles = [], []
        for r in range(walls.shape[0]):
            cells = []
            for c in range(walls.shape[1]):
                if (r, c) == pos:
                    cells.append(("@@", "bold cyan"))
                elif (r, c) == goal:
                    cells.append(("[]", "bold green"))
                elif walls[r, c]:
                    cells.append(("██", "bright_black"))
                else:
                    cells.append(("  ", None))
            lines.append(styled_line(cells))
            styles.append([style for _, style in cells])
        legend = Text()
        for name, glyph, style in (("agent", "@@", "bold cyan"), ("goal", "[]", "bold green"),
                                   ("wall", "██", "bright_black")):
            legend.append(glyph, style=style)
            legend.append(f" {name}  ")
        return Frame(tuple(lines), legend, Scene(cells=cells_image(styles), legend=legend))


class PointsRenderer(SceneRenderer):
    """The misc continuous worlds (PointRobot, Reacher, Swimmer): the agent and its goal as
    points in the plane."""

    name = "points"
    min_size = Size(16, 6)

    def scene(self, state: Any, obs: np.ndarray) -> Scene:
        inner = unwrap_state(state)
        points = []
        for field, style in (("pos", "cyan"), ("xy", "cyan"), ("goal", "green"), ("goal_xy", "green")):
            if hasattr(inner, field):
                points.append((np.asarray(getattr(inner, field), dtype=float).reshape(-1)[:2], style))
        if hasattr(inner, "angles"):  # Reacher: a two-link arm from the origin
            a = np.asarray(inner.angles, dtype=float).reshape(-1)
            elbow = np.array([np.cos(a[0]), np.sin(a[0])]) * 0.5
            hand = elbow + np.array([np.cos(a[0] + a[1]), np.sin(a[0] + a[1])]) * 0.5
            points += [(np.zeros(2), "white"), (elbow, "cyan"), (hand, "cyan")]
        extent = max([1.0, *(float(np.max(np.abs(p))) for p, _ in points)]) * 1.1
        view = SceneBuilder(Box(-extent, extent, -extent, extent))
        view.line(-extent, 0, extent, 0, "bright_black")
        view.line(0, -extent, 0, extent, "bright_black")
        for point, style in points:
            view.circle(point[0], point[1], extent * 0.04, style)
        legend = Text()
        legend.append("●", style="cyan")
        legend.append(" agent  ")
        legend.append("●", style="green")
        legend.append(" goal")
        return view.scene(legend)
