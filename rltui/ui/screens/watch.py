"""The watch view: a policy playing, drawn frame by frame, with what it sees and decides.

The env steps, and the picture is drawn, in a worker thread: the UI thread only puts the
finished frame on screen, so keys and the rest of the app stay live however slow a step
is. Keys set flags the worker reads; the worker alone touches the Player.

A frame of cells (an image observation, MinAtar's channels, a grid world) is shown as an
image where textual-image is installed (`rltui.ui.widgets.cell_image`), as text otherwise.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Hashable
from typing import NamedTuple

from rich.console import Console
from rich.text import Text
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.geometry import Region
from textual.message import Message
from textual.screen import Screen
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Footer
from textual.worker import get_current_worker

from rltui.render import Size, too_small
from rltui.ui.terminal import EndsWithItsTerminal
from rltui.ui.widgets.cell_image import cells_picture, image_widget_class

SPEEDS = (1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0)  # frames per second
LIVE_SPEED = 15.0  # the dashboard's view starts at this speed (- slows it, leaving training more CPU)
LEGEND_ROWS = 2
INFO_COLUMNS = 30  # the panel's text width before the screen is measured (its CSS width less border and padding)
POLL_SECONDS = 0.2  # the worker looks at least this often whether it should stop


class PaneLines(NamedTuple):
    """A picture cut into the rows a pane shows: each row's strip, and what it shows
    (compared with the previous picture's, so that only changed rows are repainted)."""

    strips: tuple[Strip, ...]
    keys: tuple[Hashable, ...]
    plain: str


def pane_lines(text: Text | str, width: int) -> PaneLines:
    """`text` wrapped to `width` columns, as strips (any thread: it uses a console of its own)."""
    text = Text(text) if isinstance(text, str) else text
    console = Console(width=max(1, width), color_system="truecolor", force_terminal=True, legacy_windows=False)
    rows = console.render_lines(text, console.options.update_width(max(1, width)), pad=False)
    strips = tuple(Strip(row) for row in rows)
    keys = tuple(tuple((seg.text, seg.style) for seg in row) for row in rows)
    return PaneLines(strips, keys, text.plain)


class LinesPane(Widget):
    """The picture, or the panel beside it: rows of prebuilt strips. A new frame repaints
    only the rows that changed, and the UI thread does no text layout for it."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._lines = PaneLines((), (), "")

    def show(self, lines: PaneLines) -> None:
        old = self._lines
        self._lines = lines
        width = self.size.width
        if not width or len(old.keys) != len(lines.keys):
            self.refresh()
            return
        changed = [Region(0, y, width, 1) for y, (a, b) in enumerate(zip(old.keys, lines.keys)) if a != b]
        if changed:
            self.refresh(*changed)

    def render(self) -> Text:
        return Text(self._lines.plain)

    def render_line(self, y: int) -> Strip:
        style = self.rich_style
        width = self.size.width
        if y >= len(self._lines.strips):
            return Strip.blank(width, style)
        return self._lines.strips[y].crop_extend(0, width, style).apply_style(style)


class WatchScreen(Screen):
    """`player` is an rltui.watch.player.Player; or `make_player(cancelled)` builds one in the
    worker (the dashboard's live view: it waits for the run's parameters) and returns None
    if `cancelled()` became true meanwhile. Plays until `episodes` episodes have ended (0:
    forever), then holds the last frame."""

    DEFAULT_CSS = """
    WatchScreen #watch-picture-column { width: 1fr; height: 1fr; }
    WatchScreen #watch-picture { width: 1fr; height: 1fr; border: round $primary; padding: 0 1; }
    WatchScreen #watch-image { display: none; width: 1fr; height: 1fr; border: round $primary; }
    WatchScreen.with-image #watch-image { display: block; }
    WatchScreen.with-image #watch-picture { height: 4; }
    WatchScreen #watch-info { width: 34; height: 1fr; border: round $secondary; padding: 0 1; }
    """

    # Close first: the footer cuts the last keys off on a narrow terminal, and the way out is
    # the one key a user must find.
    BINDINGS = [
        Binding("q,escape,a", "close", "close"),  # a: the dashboard's key that opens it
        Binding("space", "toggle_pause", "pause"),
        Binding("n", "step", "step"),
        Binding("g", "toggle_greedy", "greedy/sampled"),
        Binding("s", "next_seed", "seed"),
        Binding("plus,equals_sign", "faster", "faster"),
        Binding("minus", "slower", "slower"),
    ]

    class FrameReady(Message):
        def __init__(self, picture: PaneLines, info: PaneLines, image=None):
            super().__init__()
            self.picture, self.info = picture, info
            self.image = image  # the frame's cells as a PIL image, for the image view; None: text

    class Failed(Message):
        def __init__(self, text: str):
            super().__init__()
            self.text = text

    def __init__(self, player=None, episodes: int = 0, speed: float = 15.0, *,
                 make_player: Callable | None = None, title: str | None = None):
        super().__init__()
        if player is None and make_player is None:
            raise ValueError("WatchScreen needs a player or make_player")
        self.player = player
        self.make_player = make_player
        self.title_text = title
        self.episodes = episodes
        self.speed_index = min(range(len(SPEEDS)), key=lambda i: abs(SPEEDS[i] - speed))
        self.paused = False
        self.frames = 0  # steps taken
        self.shown = 0  # frames put on screen
        self.failed: str | None = None
        self._shown_at: collections.deque[float] = collections.deque(maxlen=64)
        # Set by the UI thread, read by the worker.
        self._wake_play = threading.Event()
        self._stop_play = threading.Event()
        self._frame_shown = threading.Event()  # the last frame is on screen: the worker may draw the next
        self._frame_shown.set()
        self._steps_asked = 0
        self._seed_asked = False
        self._frame_size = Size(60, 16)
        self._measured_size = False
        self._info_width = INFO_COLUMNS
        self._image_widget = image_widget_class()

    def compose(self) -> ComposeResult:
        with Horizontal():
            with Vertical(id="watch-picture-column"):
                if self._image_widget is not None:
                    yield self._image_widget(id="watch-image")
                yield LinesPane(id="watch-picture")
            yield LinesPane(id="watch-info")
        yield Footer()

    def on_mount(self) -> None:
        picture = self.query_one("#watch-picture", LinesPane)
        picture.border_title = self.title_text or self._title()
        if self.player is None:
            picture.show(pane_lines(Text("waiting for the run's parameters (copied at the next chunk boundary)...",
                                         style="dim"), picture.content_size.width or self._frame_size.columns))
        self._play()

    def on_resize(self) -> None:
        self._measure()

    def on_unmount(self) -> None:
        self._stop_play.set()
        self._wake_play.set()

    def _title(self) -> str:
        return f"{self.player.env_id}: {self.player.renderer.name}" if self.player is not None else "watch"

    def _measure(self) -> None:
        picture = self.query_one("#watch-picture", LinesPane)
        width, height = picture.content_size.width, picture.content_size.height
        if width:
            self._frame_size = Size(max(1, width), max(1, height - LEGEND_ROWS))
            self._measured_size = True
            self._info_width = self.query_one("#watch-info", LinesPane).content_size.width or INFO_COLUMNS
            self._wake_play.set()

    @property
    def fps(self) -> float:
        return SPEEDS[self.speed_index]

    @property
    def measured_fps(self) -> float:
        """Frames put on screen per second, over the recent ones."""
        times = self._shown_at
        if len(times) < 2 or times[-1] <= times[0]:
            return 0.0
        return (len(times) - 1) / (times[-1] - times[0])

    @property
    def finished(self) -> bool:
        player = self.player
        return player is not None and self.episodes > 0 and player.episode.done and \
            player.episode_count >= self.episodes

    # --- the worker -------------------------------------------------------------------------
    def _stopping(self) -> bool:
        return self._stop_play.is_set() or get_current_worker().is_cancelled

    @work(thread=True, exclusive=True, group="watch", exit_on_error=False)
    def _play(self) -> None:
        if self.player is None:
            try:
                player = self.make_player(self._stopping)
            except Exception as err:  # noqa: BLE001 - shown in the view; the app goes on
                self.post_message(self.Failed(str(err) or type(err).__name__))
                return
            if player is None:
                return
            self.player = player
        self._draw()
        due = time.monotonic()
        while not self._stopping():
            playing = not self.paused and not self.finished
            wait = POLL_SECONDS if not playing else min(POLL_SECONDS, max(0.0, due - time.monotonic()))
            if self._wake_play.wait(wait):
                self._wake_play.clear()
            if self._stopping():
                return
            if not self._frame_shown.wait(POLL_SECONDS):
                continue  # the UI has not shown the last frame yet: never queue frames up
            acted = by_key = False
            if self._seed_asked:
                self._seed_asked = False
                self.player.next_seed()
                acted = True
            if self._steps_asked:
                self._advance()
                acted = by_key = True
            elif playing and time.monotonic() >= due:
                self._advance()
                acted = True
                due = max(due + 1.0 / self.fps, time.monotonic() - 1.0 / self.fps)
            if acted or self._redraw_asked:
                self._draw()
            if by_key:  # after its frame is posted: a step asked for is done once it shows
                self._steps_asked -= 1
            if not playing:
                due = time.monotonic()

    _redraw_asked = False

    def _advance(self) -> None:
        self.player.step()
        self.frames += 1

    def _draw(self) -> None:
        from rltui.watch.describe import describe_step

        self._redraw_asked = False
        player = self.player
        size = self._frame_size
        problem = too_small(player.renderer, size) if self._measured_size else None
        image = None
        frame, failed = player.frame(size if problem is None else player.renderer.min_size)
        cells = getattr(frame.scene, "cells", None)
        if self._image_widget is not None and cells is not None:
            image = cells_picture(cells)  # scaled by the image view to any size: never too small
            picture: Text | str = frame.legend.copy()
        elif problem is not None:
            picture = problem
        else:
            picture = frame.text()
        if failed and not isinstance(picture, str):
            picture.append(f"\n{failed}", style="yellow")
        info = describe_step(player)
        state = "paused" if self.paused else ("done" if self.finished else "playing")
        info.append(f"\n{state}, {self.fps:g} frame{'' if self.fps == 1 else 's'}/s\n", style="dim")
        self._frame_shown.clear()
        # Laid out here, in the worker: the UI thread only repaints the rows that changed.
        self.post_message(self.FrameReady(pane_lines(picture, size.columns), pane_lines(info, self._info_width), image))

    # --- the UI thread ----------------------------------------------------------------------
    def on_watch_screen_frame_ready(self, message: FrameReady) -> None:
        # The panes' sizes come from the CSS, never from their content: a new frame
        # repaints the two panes, not the whole screen's layout.
        if self._image_widget is not None:
            self.set_class(message.image is not None, "with-image")
            if message.image is not None:
                self.query_one("#watch-image").image = message.image
        self.query_one("#watch-picture", LinesPane).show(message.picture)
        self.query_one("#watch-info", LinesPane).show(message.info)
        if self.shown == 0:
            self.query_one("#watch-picture", LinesPane).border_title = self.title_text or self._title()
            if self._image_widget is not None:
                self.query_one("#watch-image").border_title = self.title_text or self._title()
        self.shown += 1
        self._shown_at.append(time.monotonic())
        self._frame_shown.set()

    def on_watch_screen_failed(self, message: Failed) -> None:
        self.failed = message.text
        picture = self.query_one("#watch-picture", LinesPane)
        picture.show(pane_lines(Text(f"cannot watch: {message.text}", style="yellow"),
                                picture.content_size.width or self._frame_size.columns))
        self.notify(message.text, title="watch", severity="warning", timeout=8)

    def refresh_view(self) -> None:
        """Draw the current frame again (the worker draws it)."""
        self._measure()
        self._redraw_asked = True
        self._wake_play.set()

    # --- keys -------------------------------------------------------------------------------
    def action_toggle_pause(self) -> None:
        self.paused = not self.paused
        self.refresh_view()

    def action_step(self) -> None:
        self.paused = True
        self._steps_asked += 1
        self._wake_play.set()

    def action_toggle_greedy(self) -> None:
        if self.player is not None:
            self.player.greedy = not self.player.greedy  # read by the worker at its next step
            self.refresh_view()

    def action_next_seed(self) -> None:
        if self.player is None:
            return
        if self.player.num_agents > 1:
            self._seed_asked = True
            self._wake_play.set()
        else:
            self.notify("this run trained one agent", timeout=2)

    def action_faster(self) -> None:
        self.speed_index = min(len(SPEEDS) - 1, self.speed_index + 1)
        self.refresh_view()

    def action_slower(self) -> None:
        self.speed_index = max(0, self.speed_index - 1)
        self.refresh_view()

    def action_close(self) -> None:
        self._stop_play.set()
        self._wake_play.set()
        if len(self.app.screen_stack) > 1 and not isinstance(self.app, WatchApp):
            self.app.pop_screen()
        else:
            self.app.exit()


class WatchApp(EndsWithItsTerminal, App):
    """`rltui watch`: the watch view on its own."""

    TITLE = "rltui watch"

    def __init__(self, player, episodes: int = 0, speed: float = 15.0):
        super().__init__()
        self.player, self.episodes, self.speed = player, episodes, speed

    def on_mount(self) -> None:
        self.push_screen(WatchScreen(self.player, self.episodes, self.speed))
