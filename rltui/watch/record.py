"""Recording: episodes played by a Player, written to an animated SVG, a GIF or an MP4
(`rltui watch --record`, the format by the file's suffix). Every format says in each frame
what it shows: the env, the member and seed of the agent, the episode, step and return."""

from __future__ import annotations

import dataclasses
import html
from collections.abc import Iterator
from pathlib import Path

from rich.text import Text

from rltui.errors import UsageError
from rltui.render import Frame, Size
from rltui.watch.player import Player
from rltui.watch.video import RECORD_FORMATS, PictureWriter, missing_packages

_FONT = 14  # px; one character cell is about 0.6 x 1.2 of it


def frames_to_svg(frames: list[Text], seconds_per_frame: float, title: str = "") -> str:
    """An animated SVG: one group of text lines per frame, each shown in turn by a CSS
    animation (plays in any browser, loops); `title` its title (a browser shows it)."""
    columns = max((len(line) for frame in frames for line in frame.plain.split("\n")), default=1)
    rows = max((len(frame.plain.split("\n")) for frame in frames), default=1)
    width, height = int(columns * _FONT * 0.62) + 20, int(rows * _FONT * 1.25) + 20
    total = max(seconds_per_frame * len(frames), 1e-3)
    share = 100.0 / len(frames)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}">',
        *([f"<title>{html.escape(title)}</title>"] if title else []),
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
    """The --record target, or UsageError: a format rltui writes (by its suffix) whose
    packages are installed, in a directory that exists and can be written."""
    import os

    record_format = RECORD_FORMATS.get(path.suffix.lower())
    if record_format is None:
        raise UsageError(f"--record: {path} must end in .svg, .gif or .mp4 (an animated SVG, a GIF or an MP4 video)")
    missing = missing_packages(record_format)
    if missing is not None:
        raise UsageError(f"--record: {missing}")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"--record: cannot write {path}: no such directory {parent}")
    if path.is_dir() or not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise UsageError(f"--record: cannot write {path}: permission denied")
    return path


RECORD_SIZE = Size(60, 16)


@dataclasses.dataclass(frozen=True)
class Recorded:
    """What a recording wrote: its frames and its format's name."""

    frames: int
    format_name: str


def agent_label(player: Player) -> str:
    """Which agent plays: its member (in a population) and the seed it trained with."""
    member, seed = divmod(player.seed_index, player.seeds_per_member)
    label = f"seed {player.first_seed + seed}"
    return f"member {member}, {label}" if player.num_members > 1 else label


def caption(player: Player) -> str:
    """Two lines above each frame: what plays, then where the episode is (and the seed its
    episodes are drawn from, `watch --seed`)."""
    ep = player.episode
    return (f"{player.env_id} · {agent_label(player)}\n"
            f"episode {player.episode_count} (--seed {player.seed}) · step {ep.step} · return {ep.ret:.1f}")


def played_frames(player: Player, episodes: int, size: Size, max_frames: int) -> Iterator[tuple[Frame, str]]:
    """Each frame of `episodes` episodes with its caption, at most `max_frames` in all."""
    count = 0
    for _ in range(episodes):
        frame, _ = player.frame(size)
        yield frame, caption(player)
        count += 1
        while count < max_frames:
            player.step()
            frame, _ = player.frame(size)
            yield frame, caption(player)
            count += 1
            if player.episode.done:
                break
        player.new_episode()


def record(player: Player, episodes: int, path: Path, size: Size = RECORD_SIZE, fps: float = 15.0,
           max_frames: int = 3000) -> Recorded:
    """Play `episodes` episodes and write them to `path`, in the format its suffix names."""
    record_format = RECORD_FORMATS[path.suffix.lower()]
    title = f"rltui watch: {player.env_id}, {agent_label(player)}"
    try:
        if path.suffix.lower() == ".svg":
            texts = [_compose(frame, head) for frame, head in played_frames(player, episodes, size, max_frames)]
            path.write_text(frames_to_svg(texts, 1.0 / fps, title), encoding="utf-8")
            return Recorded(len(texts), record_format.name)
        from rltui.render.raster import frame_pixels

        with PictureWriter(path, fps) as writer:
            for frame, head in played_frames(player, episodes, size, max_frames):
                writer.append(frame_pixels(frame, head))
        return Recorded(writer.count, record_format.name)
    except OSError as err:
        raise UsageError(f"--record: cannot write {path}: {err.strerror or err}") from None


def _compose(frame: Frame, head: str) -> Text:
    return Text(head + "\n", style="bold") + frame.text()
