"""Image observations (height, width, channels) drawn as an image: in text, two pixels a
character in half blocks (upper pixel the foreground, lower the background); as the frame's
scene, the pixels themselves, for the terminal's image view and for recordings."""

from __future__ import annotations

from typing import Any

import numpy as np
from rich.text import Text

from rltui.render.base import Frame, Renderer, Size, styled_line
from rltui.render.grids import PALETTE
from rltui.render.scene import Scene, style_rgb


def is_image_shape(shape: tuple[int, ...]) -> bool:
    """An observation that is a picture: height x width x channels, at least 2 x 2."""
    return len(shape) == 3 and shape[0] >= 2 and shape[1] >= 2 and shape[2] >= 1


class ImageObsRenderer(Renderer):
    """Any (height, width, channels) observation as an image. One channel is grey; three
    or four are red, green, blue (alpha dropped); any other number each its own colour,
    brighter where its value is larger. Values in [0, 1] are intensities; others are
    scaled by the largest value each channel has shown so far, so that symbolic
    observations (object ids, say) read as steady colours."""

    name = "observation image"
    min_size = Size(8, 4)

    def __init__(self, shape: tuple[int, ...]):
        self.shape = tuple(shape)
        self._largest = np.zeros(self.shape[2], np.float64)

    def pixels(self, obs: np.ndarray) -> np.ndarray:
        """The observation as RGB pixels (height, width, 3) uint8."""
        image = np.nan_to_num(np.asarray(obs, dtype=np.float64).reshape(self.shape), nan=0.0, posinf=0.0, neginf=0.0)
        image = np.abs(image)
        self._largest = np.maximum(self._largest, image.max(axis=(0, 1)))
        if image.max() > 1.0:
            image = image / np.maximum(self._largest, 1e-9)
        channels = self.shape[2]
        if channels == 1:
            rgb = np.repeat(image, 3, axis=2)
        elif channels in (3, 4):
            rgb = image[:, :, :3]
        else:
            colours = np.array([style_rgb(PALETTE[c % len(PALETTE)]) for c in range(channels)], np.float64) / 255
            rgb = np.clip(image @ colours, 0.0, 1.0)
        return np.round(np.clip(rgb, 0.0, 1.0) * 255).astype(np.uint8)

    def render(self, state: Any, obs: np.ndarray, size: Size) -> Frame:
        pixels = self.pixels(obs)
        lines = half_block_lines(pixels, size.columns, size.rows)
        height, width, channels = self.shape
        kind = {1: "grey", 3: "channels as red, green, blue", 4: "channels as red, green, blue"}.get(
            channels, "a colour per channel")
        legend = Text(f"observation image {height}x{width}x{channels} ({kind})", style="dim")
        return Frame(tuple(lines), legend, Scene(cells=pixels, legend=legend))


def half_block_lines(pixels: np.ndarray, columns: int, rows: int) -> list[Text]:
    """`pixels` as half blocks, scaled by whole pixels (or shrunk) to fit `columns` x `rows`."""
    height, width = pixels.shape[:2]
    scale = min(columns / width, 2 * rows / height)
    scale = max(1, int(scale)) if scale >= 1 else scale
    out_w, out_h = max(1, int(width * scale)), max(1, int(height * scale))
    out_h += out_h % 2  # whole characters: a last pixel row on its own repeats
    ys = np.minimum((np.arange(out_h) / scale).astype(int), height - 1)
    xs = np.minimum((np.arange(out_w) / scale).astype(int), width - 1)
    scaled = pixels[ys][:, xs]
    lines = []
    for top, bottom in zip(scaled[0::2], scaled[1::2]):
        lines.append(styled_line(("▀", f"rgb({a[0]},{a[1]},{a[2]}) on rgb({b[0]},{b[1]},{b[2]})")
                                 for a, b in zip(top, bottom)))
    return lines
