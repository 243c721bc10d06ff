"""The formats `rltui watch --record` writes, chosen by the file's suffix, and the writers
of the two that are pictures (GIF and MP4, through imageio; SVG is text, `record.py`)."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import numpy as np


@dataclasses.dataclass(frozen=True)
class RecordFormat:
    name: str
    modules: tuple[str, ...]  # imported to write it
    packages: str  # what provides them, in words
    extra: str | None  # rltui's extra that installs them


RECORD_FORMATS = {
    ".svg": RecordFormat("animated SVG", (), "", None),
    ".gif": RecordFormat("GIF", ("imageio", "PIL"), "imageio and pillow", "record"),
    ".mp4": RecordFormat("MP4 video", ("imageio", "PIL", "imageio_ffmpeg"), "imageio, pillow and imageio-ffmpeg",
                         "mp4"),
}


def module_available(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def missing_packages(record_format: RecordFormat) -> str | None:
    """What to install before `record_format` can be written (one line); None when nothing."""
    if all(module_available(name) for name in record_format.modules):
        return None
    return (f"writing a {record_format.name} needs {record_format.packages}: "
            f"pip install 'rltui[{record_format.extra}]'")


class PictureWriter:
    """Frames (RGB arrays of one size) appended one at a time to a GIF or an MP4 file."""

    def __init__(self, path: Path, fps: float):
        self.path, self.fps, self.count = path, fps, 0
        suffix = path.suffix.lower()
        if suffix == ".gif":
            import imageio.v3 as iio

            # Pillow keeps the frames until the file closes: each is reduced to a palette of
            # its own colours as it comes (a frame's colours are few), a byte a pixel.
            self._file = iio.imopen(path, "w", plugin="pillow", extension=".gif")
            self._write = lambda frame: self._file.write(frame, is_batch=False, duration=1000.0 / fps, loop=0,
                                                         bits=8)
        elif suffix == ".mp4":
            import imageio.v2 as imageio

            # Streamed to ffmpeg as they come (it starts with the first). yuv420p: the pixel
            # format every player reads.
            self._file = imageio.get_writer(path, format="FFMPEG", mode="I", fps=fps, codec="libx264",
                                            pixelformat="yuv420p", macro_block_size=16, ffmpeg_log_level="error")
            self._write = self._file.append_data
        else:
            raise ValueError(f"no picture writer for {path.suffix}")

    def append(self, frame: np.ndarray) -> None:
        import warnings

        with warnings.catch_warnings():
            # JAX warns at any fork; the one that starts ffmpeg execs it at once, sharing
            # none of JAX's threads.
            warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
            self._write(frame)
        self.count += 1

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> PictureWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
