"""A frame drawn at pixel resolution, for recordings: a caption above, the frame's scene
(its lines and circles, or its cells, one square each), the legend below. A frame with no
scene (the bars, an env's own text) is drawn as its text. Pillow draws it; nothing is
smoothed, so that a picture has few colours and a GIF of it stays small.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from rltui.render.base import Frame
from rltui.render.scene import BACKGROUND, DIM, FOREGROUND, Box, Circle, Line, Scene, style_rgb

# Divisible by 16, as video encoders want it.
PICTURE_WIDTH, PICTURE_HEIGHT = 480, 320
_MARGIN = 10
_CAPTION_PX = 14
_LEGEND_PX = 13


@functools.lru_cache(maxsize=8)
def _font(size: int):
    from PIL import ImageFont

    try:  # a monospaced font where the system has one: the text frames line up
        return ImageFont.truetype("DejaVuSansMono.ttf", size)
    except OSError:
        return ImageFont.load_default(size=size)


def frame_pixels(frame: Frame, caption: str, width: int = PICTURE_WIDTH, height: int = PICTURE_HEIGHT) -> np.ndarray:
    """The frame as an RGB picture (height, width, 3) uint8, `caption` above it (one or
    more lines)."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (width, height), BACKGROUND)
    draw = ImageDraw.Draw(image)
    draw.fontmode = "1"  # no antialiasing: few colours
    caption_lines = caption.split("\n")
    for row, text in enumerate(caption_lines):  # the first line the subject, the others dimmer
        _fitted_text(draw, (_MARGIN, _MARGIN + row * (_CAPTION_PX + 4)), text, FOREGROUND if row == 0 else DIM,
                     _CAPTION_PX, width - 2 * _MARGIN)
    top = _MARGIN + len(caption_lines) * (_CAPTION_PX + 4) + 6
    bottom = height - _MARGIN - _LEGEND_PX - 8
    area = (_MARGIN, top, width - _MARGIN, bottom)
    scene = frame.scene
    if isinstance(scene, Scene) and scene.cells is not None:
        _draw_cells(image, scene.cells, area)
    elif isinstance(scene, Scene) and scene.shapes:
        _draw_shapes(draw, scene, area)
    else:
        _draw_text_lines(draw, frame, area)
    _legend(draw, frame.legend, (_MARGIN, height - _MARGIN - _LEGEND_PX), width - 2 * _MARGIN)
    return np.asarray(image)


def _legend(draw, legend, at, room: int) -> None:
    """The legend on one line, each run in its colour (dim where it names none), cut to `room`."""
    font = _font(_LEGEND_PX)
    x, y = at
    for text, style in _runs(legend):
        text = text.replace("\n", "  ")
        left = at[0] + room - x
        if left <= 0:
            break
        while text and draw.textlength(text, font=font) > left:
            text = text[:-2] + "…"
        draw.text((x, y), text, fill=style_rgb(style) if style else DIM, font=font)
        x += draw.textlength(text, font=font)


def _fitted_text(draw, at, text: str, colour, size: int, room: int) -> None:
    font = _font(size)
    while text and draw.textlength(text, font=font) > room:
        text = text[:-2] + "…"
    draw.text(at, text, fill=colour, font=font)


def _draw_cells(image, cells: np.ndarray, area) -> None:
    from PIL import Image

    left, top, right, bottom = area
    rows, columns = cells.shape[:2]
    scale = min((right - left) / columns, (bottom - top) / rows)
    if scale >= 1:  # whole pixels a cell: every cell the same size
        scale = int(scale)
    size = (max(1, int(columns * scale)), max(1, int(rows * scale)))
    picture = Image.fromarray(np.ascontiguousarray(cells[:, :, :3]), "RGB").resize(size, Image.Resampling.NEAREST)
    image.paste(picture, (left + (right - left - size[0]) // 2, top + (bottom - top - size[1]) // 2))


def _draw_shapes(draw, scene: Scene, area) -> None:
    left, top, right, bottom = area
    box = scene.box or Box(-1.0, 1.0, -1.0, 1.0)
    scale = min((right - left) / (box.x_max - box.x_min), (bottom - top) / (box.y_max - box.y_min))
    x0 = left + ((right - left) - scale * (box.x_max - box.x_min)) / 2 - scale * box.x_min
    y0 = top + ((bottom - top) + scale * (box.y_max - box.y_min)) / 2 + scale * box.y_min
    width = max(2, round(min(right - left, bottom - top) / 90))
    point = lambda x, y: (x0 + scale * x, y0 - scale * y)
    for shape in scene.shapes:
        colour = style_rgb(shape.style)
        if isinstance(shape, Line):
            draw.line([point(shape.x0, shape.y0), point(shape.x1, shape.y1)], fill=colour, width=width)
        elif isinstance(shape, Circle):
            cx, cy = point(shape.x, shape.y)
            r = max(shape.radius * scale, width)
            draw.ellipse([cx - r, cy - r, cx + r, cy + r], outline=colour, width=width)


def _draw_text_lines(draw, frame: Frame, area) -> None:
    """The frame's text, each run in its colour, in the largest font that fits the area."""
    left, top, right, bottom = area
    lines = frame.lines
    columns = max((len(line.plain) for line in lines), default=1) or 1
    size = max(6, min(14, int((right - left) / (0.62 * columns)), int((bottom - top) / (1.25 * max(1, len(lines))))))
    font = _font(size)
    advance = font.getlength("M")
    for row, line in enumerate(lines):
        y = top + math.floor(row * size * 1.25)
        if y + size > bottom:
            break
        column = 0
        for span_text, style in _runs(line):
            draw.text((left + column * advance, y), span_text, fill=style_rgb(style), font=font)
            column += len(span_text)


def _runs(line):
    """A Rich Text's text in runs of one style (the last span over a character wins)."""
    plain = line.plain
    styles: list = [line.style or None] * len(plain)
    for span in line.spans:
        for i in range(span.start, min(span.end, len(plain))):
            styles[i] = span.style
    start = 0
    for i in range(1, len(plain) + 1):
        if i == len(plain) or styles[i] != styles[start]:
            yield plain[start:i], styles[start]
            start = i
