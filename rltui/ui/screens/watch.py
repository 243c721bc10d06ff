"""The watch view: a policy playing, drawn frame by frame, with what it sees and decides."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Footer, Static

from rltui.render import Size, too_small

SPEEDS = (1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0)  # frames per second


class WatchScreen(Screen):
    """`player` is an rltui.watch.Player. Plays until `episodes` episodes have ended (0:
    forever), then holds the last frame."""

    DEFAULT_CSS = """
    WatchScreen #watch-picture { width: 1fr; height: 1fr; border: round $primary; padding: 0 1; }
    WatchScreen #watch-info { width: 34; height: 1fr; border: round $secondary; padding: 0 1; }
    """

    BINDINGS = [
        Binding("space", "toggle_pause", "pause"),
        Binding("n", "step", "step"),
        Binding("g", "toggle_greedy", "greedy/sampled"),
        Binding("s", "next_seed", "seed"),
        Binding("plus,equals_sign", "faster", "faster"),
        Binding("minus", "slower", "slower"),
        Binding("q,escape", "close", "close"),
    ]

    def __init__(self, player, episodes: int = 0, speed: float = 15.0):
        super().__init__()
        self.player = player
        self.episodes = episodes
        self.speed_index = min(range(len(SPEEDS)), key=lambda i: abs(SPEEDS[i] - speed))
        self.paused = False
        self.frames = 0
        self._timer = None

    def compose(self) -> ComposeResult:
        with Horizontal():
            yield Static(id="watch-picture")
            yield Static(id="watch-info")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#watch-picture", Static).border_title = f"{self.player.env_id}: {self.player.renderer.name}"
        self._restart_timer()
        self.refresh_view()

    @property
    def fps(self) -> float:
        return SPEEDS[self.speed_index]

    def _restart_timer(self) -> None:
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_interval(1.0 / self.fps, self._tick)

    @property
    def finished(self) -> bool:
        player = self.player
        return self.episodes > 0 and player.episode.done and player.episode_count >= self.episodes

    def _tick(self) -> None:
        if self.paused or self.finished:
            return
        self.advance()

    def advance(self) -> None:
        self.player.step()
        self.frames += 1
        self.refresh_view()

    def refresh_view(self) -> None:
        from rltui.watch import describe_step

        picture = self.query_one("#watch-picture", Static)
        size = Size(max(1, picture.content_size.width or 60), max(1, picture.content_size.height or 16))
        legend_rows = 2
        frame_size = Size(size.columns, max(1, size.rows - legend_rows))
        problem = too_small(self.player.renderer, frame_size)
        if problem is not None and picture.content_size.width:
            picture.update(problem)
        else:
            frame, failed = self.player.frame(frame_size)
            text = frame.text()
            if failed:
                text.append(f"\n{failed}", style="yellow")
            picture.update(text)
        info = describe_step(self.player)
        state = "paused" if self.paused else ("done" if self.finished else "playing")
        info.append(f"\n{state}, {self.fps:g} frames/s\n", style="dim")
        self.query_one("#watch-info", Static).update(info)

    # --- keys -------------------------------------------------------------------------------
    def action_toggle_pause(self) -> None:
        self.paused = not self.paused
        self.refresh_view()

    def action_step(self) -> None:
        self.paused = True
        self.advance()

    def action_toggle_greedy(self) -> None:
        self.player.greedy = not self.player.greedy
        self.refresh_view()

    def action_next_seed(self) -> None:
        if self.player.num_seeds > 1:
            self.player.next_seed()
            self.refresh_view()
        else:
            self.notify("this run trained one seed", timeout=2)

    def action_faster(self) -> None:
        self.speed_index = min(len(SPEEDS) - 1, self.speed_index + 1)
        self._restart_timer()
        self.refresh_view()

    def action_slower(self) -> None:
        self.speed_index = max(0, self.speed_index - 1)
        self._restart_timer()
        self.refresh_view()

    def action_close(self) -> None:
        if len(self.app.screen_stack) > 1 and not isinstance(self.app, WatchApp):
            self.app.pop_screen()
        else:
            self.app.exit()


class WatchApp(App):
    """`rltui watch`: the watch view on its own."""

    TITLE = "rltui watch"

    def __init__(self, player, episodes: int = 0, speed: float = 15.0):
        super().__init__()
        self.player, self.episodes, self.speed = player, episodes, speed

    def on_mount(self) -> None:
        self.push_screen(WatchScreen(self.player, self.episodes, self.speed))
