"""Recording: episodes played by a Player, written to an animated SVG (`rltui watch --record`)."""

from __future__ import annotations

import html
from pathlib import Path

from rich.text import Text

from rltui.errors import UsageError
from rltui.render import Frame, Size
from rltui.watch.player import Player

_FONT = 14  # px; one character cell is about 0.6 x 1.2 of it


def frames_to_svg(frames: list[Text], seconds_per_frame: float) -> str:
    """An animated SVG: one group of text lines per frame, each shown in turn by a CSS
    animation (plays in any browser, loops)."""
    columns = max((len(line) for frame in frames for line in frame.plain.split("\n")), default=1)
    rows = max((len(frame.plain.split("\n")) for frame in frames), default=1)
    width, height = int(columns * _FONT * 0.62) + 20, int(rows * _FONT * 1.25) + 20
    total = max(seconds_per_frame * len(frames), 1e-3)
    share = 100.0 / len(frames)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}">',
        "<style>",
        f"text{{font-family:'DejaVu Sans Mono',Menlo,Consolas,monospace;font-size:{_FONT}px;"
        "white-space:pre;fill:#ddd}",
        f"g.f{{visibility:hidden;animation:show {total:.3f}s step-end infinite}}",
        f"@keyframes show{{0%{{visibility:visible}}{share:.4f}%{{visibility:hidden}}100%{{visibility:hidden}}}}",
        "</style>",
        f'<rect width="{width}" height="{height}" fill="#1e1e1e"/>',
    ]
    for index, frame in enumerate(frames):
        parts.append(f'<g class="f" style="animation-delay:{index * seconds_per_frame:.3f}s">')
        for row, line in enumerate(frame.split("\n")):
            y = 10 + (row + 1) * _FONT * 1.25
            spans = []
            for segment in line.render(_console()):
                colour = _colour(segment.style)
                content = html.escape(segment.text)
                spans.append(f'<tspan fill="{colour}">{content}</tspan>' if colour else content)
            parts.append(f'<text x="10" y="{y:.1f}" xml:space="preserve">{"".join(spans)}</text>')
        parts.append("</g>")
    parts.append("</svg>")
    return "\n".join(parts)


def _console():
    from rich.console import Console

    return Console(width=400, color_system="truecolor", force_terminal=True)


def _colour(style) -> str | None:
    if style is None or style.color is None:
        return None
    triplet = style.color.get_truecolor()
    return f"#{triplet.red:02x}{triplet.green:02x}{triplet.blue:02x}"


def check_record_path(path: Path) -> Path:
    """The --record target, or UsageError: an animated SVG, in a directory that exists and
    can be written."""
    import os

    if path.suffix.lower() != ".svg":
        raise UsageError(f"--record: {path} must end in .svg (rltui records an animated SVG; "
                         "a browser plays it, and it converts to GIF with any SVG tool)")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"--record: cannot write {path}: no such directory {parent}")
    if path.is_dir() or not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise UsageError(f"--record: cannot write {path}: permission denied")
    return path


RECORD_SIZE = Size(60, 16)


def record(player: Player, episodes: int, path: Path, size: Size = RECORD_SIZE, fps: float = 15.0,
           max_frames: int = 3000) -> int:
    """Play `episodes` episodes and write them to `path` as an animated SVG; the frame count."""
    frames = []
    for _ in range(episodes):
        frame, _ = player.frame(size)
        frames.append(_compose(frame, player))
        while len(frames) < max_frames:
            player.step()
            frame, _ = player.frame(size)
            frames.append(_compose(frame, player))
            if player.episode.done:
                break
        player.new_episode()
    try:
        path.write_text(frames_to_svg(frames, 1.0 / fps), encoding="utf-8")
    except OSError as err:
        raise UsageError(f"--record: cannot write {path}: {err.strerror or err}") from None
    return len(frames)


def _compose(frame: Frame, player: Player) -> Text:
    ep = player.episode
    head = Text(f"{player.env_id}  episode {player.episode_count}  step {ep.step}  return {ep.ret:.1f}\n",
                style="bold")
    return head + frame.text()
