"""A frame's cells (an image observation, MinAtar's channels, a grid world) as an image in
the terminal, by textual-image where it is installed (`pip install 'rltui[images]'`): in
terminal graphics where the terminal has them, in half blocks elsewhere. Its import asks
the terminal what it can draw, which cannot be done once an app reads the terminal: the
watch view uses it only when it was imported before the app started
(`prepare_terminal_images`), and draws the cells as text otherwise.
"""

from __future__ import annotations

import sys

IMAGE_PIXELS = 320  # a frame's cells are scaled up to about this many pixels a side, each cell square


def prepare_terminal_images() -> bool:
    """Import textual-image before an app starts, so that the watch view can show cells
    as an image; False where it is not installed or cannot ask the terminal."""
    try:
        import textual_image.widget  # noqa: F401 - imported for its terminal query
    except Exception:  # noqa: BLE001 - not installed, or a terminal it cannot query: the view draws text
        return False
    return True


def image_widget_class():
    """textual-image's widget where it was imported before the app started; else None."""
    module = sys.modules.get("textual_image.widget")
    return getattr(module, "Image", None)


def cells_picture(cells):
    """A frame's cells as a PIL image, each cell a square of whole pixels (the terminal
    image is scaled from it: scaling blocks keeps their edges)."""
    from PIL import Image

    rows, columns = cells.shape[:2]
    scale = max(1, IMAGE_PIXELS // max(rows, columns))
    return Image.fromarray(cells[:, :, :3]).resize((columns * scale, rows * scale), Image.Resampling.NEAREST)
