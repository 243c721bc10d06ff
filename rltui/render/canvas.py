"""A braille canvas: each character cell holds 2 x 4 dots, so lines drawn in dots look
four times finer than block characters. Coordinates are in dots, (0, 0) top left."""

from __future__ import annotations

import math

from rich.text import Text

from rltui.render.base import styled_line

# The bit of each dot (column, row) in a braille character's code (U+2800 + bits).
_BITS = ((0x01, 0x02, 0x04, 0x40), (0x08, 0x10, 0x20, 0x80))


class BrailleCanvas:
    def __init__(self, columns: int, rows: int):
        self.columns, self.rows = columns, rows
        self.width, self.height = columns * 2, rows * 4  # in dots
        self._bits = [[0] * columns for _ in range(rows)]
        self._styles: list[list[str | None]] = [[None] * columns for _ in range(rows)]

    def dot(self, x: float, y: float, style: str | None = None) -> None:
        col, row = int(round(x)), int(round(y))
        if 0 <= col < self.width and 0 <= row < self.height:
            self._bits[row // 4][col // 2] |= _BITS[col % 2][row % 4]
            if style is not None:
                self._styles[row // 4][col // 2] = style

    def line(self, x0: float, y0: float, x1: float, y1: float, style: str | None = None) -> None:
        steps = max(1, int(math.ceil(max(abs(x1 - x0), abs(y1 - y0)))))
        for i in range(steps + 1):
            t = i / steps
            self.dot(x0 + (x1 - x0) * t, y0 + (y1 - y0) * t, style)

    def circle(self, cx: float, cy: float, radius: float, style: str | None = None) -> None:
        points = max(8, int(2 * math.pi * radius * 2))
        for i in range(points):
            angle = 2 * math.pi * i / points
            self.dot(cx + radius * math.cos(angle), cy + radius * math.sin(angle), style)

    def lines(self) -> list[Text]:
        return [styled_line((chr(0x2800 + bits) if bits else " ", style if bits else None)
                            for bits, style in zip(bits_row, style_row))
                for bits_row, style_row in zip(self._bits, self._styles)]


class WorldPen:
    """Draws in world coordinates (y up): a subclass says how a line and a circle are drawn,
    and a polyline is its lines."""

    def line(self, x0: float, y0: float, x1: float, y1: float, style: str | None = None) -> None:
        raise NotImplementedError

    def polyline(self, points, style: str | None = None, closed: bool = False) -> None:
        points = list(points)
        if closed:
            points.append(points[0])
        for (a, b), (c, d) in zip(points, points[1:]):
            self.line(a, b, c, d, style)


class Viewport(WorldPen):
    """World coordinates (y up) onto a canvas's dots, one scale for both axes (a dot is
    about square), the world box centred."""

    def __init__(self, canvas: BrailleCanvas, x_min: float, x_max: float, y_min: float, y_max: float):
        self.scale = min((canvas.width - 1) / (x_max - x_min), (canvas.height - 1) / (y_max - y_min))
        self.x0 = (canvas.width - 1 - self.scale * (x_max - x_min)) / 2 - self.scale * x_min
        self.y0 = (canvas.height - 1 + self.scale * (y_max - y_min)) / 2 + self.scale * y_min
        self.canvas = canvas

    def point(self, x: float, y: float) -> tuple[float, float]:
        return self.x0 + self.scale * x, self.y0 - self.scale * y

    def line(self, x0: float, y0: float, x1: float, y1: float, style: str | None = None) -> None:
        self.canvas.line(*self.point(x0, y0), *self.point(x1, y1), style)

    def circle(self, x: float, y: float, radius: float, style: str | None = None) -> None:
        self.canvas.circle(*self.point(x, y), radius * self.scale, style)
