"""The scene a renderer describes: shapes in world coordinates, or an image of cells.

One description, two drawings: the terminal view draws it in braille dots
(`braille_lines`), a recording at pixel resolution (`rltui.render.raster`). Styles are
Rich style strings ("cyan", "dim", "bold green"); `style_rgb` says what colour each is in
a picture.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from rich.style import Style
from rich.text import Text

from rltui.render.base import Frame, Renderer, Size
from rltui.render.canvas import BrailleCanvas, Viewport, WorldPen


@dataclasses.dataclass(frozen=True)
class Line:
    x0: float
    y0: float
    x1: float
    y1: float
    style: str | None = None


@dataclasses.dataclass(frozen=True)
class Circle:
    x: float
    y: float
    radius: float
    style: str | None = None


Shape = Line | Circle


@dataclasses.dataclass(frozen=True)
class Box:
    """The world shown, y up; one scale for both axes, the box centred."""

    x_min: float
    x_max: float
    y_min: float
    y_max: float


@dataclasses.dataclass(frozen=True)
class Scene:
    """What one frame shows: shapes inside `box`, or `cells`, an image (rows, columns, RGB
    uint8) whose every cell is one square of the picture."""

    box: Box | None = None
    shapes: tuple[Shape, ...] = ()
    cells: np.ndarray | None = None
    legend: Text = dataclasses.field(default_factory=Text)


class SceneBuilder(WorldPen):
    """Shapes added one by one, in world coordinates (y up)."""

    def __init__(self, box: Box):
        self.box = box
        self.shapes: list[Shape] = []

    def line(self, x0: float, y0: float, x1: float, y1: float, style: str | None = None) -> None:
        self.shapes.append(Line(x0, y0, x1, y1, style))

    def circle(self, x: float, y: float, radius: float, style: str | None = None) -> None:
        self.shapes.append(Circle(x, y, radius, style))

    def scene(self, legend: Text) -> Scene:
        return Scene(self.box, tuple(self.shapes), legend=legend)


def braille_lines(scene: Scene, columns: int, rows: int) -> list[Text]:
    """The scene's shapes in braille dots, `columns` x `rows` characters."""
    canvas = BrailleCanvas(columns, rows)
    box = scene.box or Box(-1.0, 1.0, -1.0, 1.0)
    view = Viewport(canvas, box.x_min, box.x_max, box.y_min, box.y_max)
    for shape in scene.shapes:
        if isinstance(shape, Line):
            view.line(shape.x0, shape.y0, shape.x1, shape.y1, shape.style)
        else:
            view.circle(shape.x, shape.y, shape.radius, shape.style)
    return canvas.lines()


class SceneRenderer(Renderer):
    """A renderer that describes a scene of shapes; the terminal's frame is that scene in
    braille dots."""

    def scene(self, state, obs: np.ndarray) -> Scene:
        raise NotImplementedError

    def render(self, state, obs: np.ndarray, size: Size) -> Frame:
        scene = self.scene(state, obs)
        return Frame(tuple(braille_lines(scene, size.columns, size.rows)), scene.legend, scene)


# The colours of the named terminal colours in a picture on a dark background: brighter
# than the standard ANSI ones, which are meant for a terminal's own palette.
_NAMED_RGB = {
    "black": (0, 0, 0), "red": (230, 80, 80), "green": (90, 200, 100), "yellow": (235, 205, 70),
    "blue": (90, 140, 240), "magenta": (215, 100, 215), "cyan": (70, 200, 215), "white": (225, 225, 225),
    "bright_black": (115, 115, 115), "bright_white": (250, 250, 250), "orange3": (215, 135, 0),
    "purple": (150, 90, 225),
}
FOREGROUND = (205, 205, 205)
DIM = (135, 135, 135)
BACKGROUND = (24, 24, 28)
EMPTY_CELL = (44, 44, 50)


def style_rgb(style: str | Style | None) -> tuple[int, int, int]:
    """The colour a style draws in a picture (the foreground where it names none)."""
    if style is None or style == "":
        return FOREGROUND
    parsed = Style.parse(style) if isinstance(style, str) else style
    if parsed.color is None:
        return DIM if parsed.dim else FOREGROUND
    named = _NAMED_RGB.get(parsed.color.name)
    if named is not None:
        return named
    triplet = parsed.color.get_truecolor()
    return (triplet.red, triplet.green, triplet.blue)


def cells_image(styles: list[list[str | None]]) -> np.ndarray:
    """An image of cells from their styles (None: an empty cell)."""
    rows, columns = len(styles), max((len(row) for row in styles), default=0)
    image = np.empty((rows, columns, 3), np.uint8)
    image[:] = EMPTY_CELL
    for r, row in enumerate(styles):
        for c, style in enumerate(row):
            if style is not None:
                image[r, c] = style_rgb(style)
    return image
