"""`rltui watch --record` as pictures: GIF and MP4 files with every frame, a population's
member chosen and named in the recording, image observations drawn as images (in
recordings and in the terminal), and the refusals."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from rich.text import Text

from rltui.errors import UsageError
from rltui.render import Frame, Size, renderer_for
from rltui.render.images import ImageObsRenderer
from rltui.render.raster import PICTURE_HEIGHT, PICTURE_WIDTH, frame_pixels
from rltui.render.scene import BACKGROUND, Scene, style_rgb
from rltui.watch.record import check_record_path
from rltui.watch.video import RECORD_FORMATS, missing_packages

TINY = ["--set", "num_envs=4", "--set", "num_steps=16", "--set", "num_minibatches=2", "--set", "update_epochs=1",
        "--set", "hidden_sizes=[16]", "--set", "total_timesteps=64"]
FRAMES = 9  # a recording's frames in these tests: its episode is cut there


@pytest.fixture(scope="module")
def population(tmp_path_factory):
    """A two-member population (a sweep over lr), trained one update."""
    from rltui.cli import main

    run = tmp_path_factory.mktemp("record") / "pop"
    assert main(["launch", "--no-ui", "--no-preset", "--run-dir", str(run), "--sweep", "lr=[1e-3,3e-3]", *TINY]) == 0
    return run


def player_for(run: Path, member: int | None):
    from rltui.commands.watch import load_player

    return load_player(SimpleNamespace(path=str(run), seed=0, episodes=1, sample=False, record=None, member=member))


def recorded(population, tmp_path, suffix: str, member: int = 1):
    from rltui.watch.record import record

    out = tmp_path / f"episode{suffix}"
    result = record(player_for(population, member), 1, check_record_path(out), max_frames=FRAMES)
    assert result.frames == FRAMES and out.stat().st_size > 0
    return out


def test_a_gif_holds_every_frame_at_the_picture_size(population, tmp_path):
    import imageio.v3 as iio

    frames = iio.imread(recorded(population, tmp_path, ".gif"), index=None)
    assert frames.shape == (FRAMES, PICTURE_HEIGHT, PICTURE_WIDTH, 3)
    assert len({frame.tobytes() for frame in frames}) > 1  # it moves


@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")  # JAX's warning as the reader starts ffmpeg
def test_an_mp4_holds_every_frame(population, tmp_path):
    pytest.importorskip("imageio_ffmpeg", reason="MP4 needs the mp4 extra: pip install 'rltui[mp4]'")
    import imageio.v2 as imageio

    reader = imageio.get_reader(recorded(population, tmp_path, ".mp4"), format="FFMPEG")
    try:
        assert reader.count_frames() == FRAMES
        assert reader.get_meta_data()["size"] == (PICTURE_WIDTH, PICTURE_HEIGHT)
    finally:
        reader.close()


def test_the_svg_says_which_member_and_seed_it_shows(population, tmp_path):
    svg = recorded(population, tmp_path, ".svg").read_text(encoding="utf-8")
    assert "<title>rltui watch: CartPole-v1, member 1, seed 0</title>" in svg
    assert svg.count("CartPole-v1 · member 1, seed 0") == FRAMES  # every frame's caption


def test_member_flag_records_that_member_and_says_so(population, tmp_path, capsys):
    from rltui.cli import main

    out = tmp_path / "member.gif"
    assert main(["watch", str(population), "--member", "1", "--record", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "of member 1, seed 0" in printed and "GIF" in printed
    player = player_for(population, 1)
    assert player.seed_index == 1 and player.episode_count == 1  # member 1 from its first episode


def test_member_past_the_population_is_one_line(population):
    with pytest.raises(UsageError, match=r"^--member 2: this run trained 2 members \(0 to 1\)$"):
        player_for(population, 2)


def test_the_caption_is_drawn_above_the_picture():
    frame = Frame((Text("x"),), Text("legend"), Scene(cells=np.zeros((2, 2, 3), np.uint8)))
    plain = frame_pixels(frame, "")
    captioned = frame_pixels(frame, "CartPole-v1 · member 1, seed 0\nepisode 1")
    band = slice(0, 30)  # the caption's first line
    assert (plain[band] == BACKGROUND).all() and not (captioned[band] == BACKGROUND).all()


@pytest.mark.parametrize("target, needle", [("out.png", "must end in .svg, .gif or .mp4"),
                                            ("out.GIF", None), ("out.mp4", None), ("out.svg", None)])
def test_the_format_is_chosen_by_suffix(tmp_path, target, needle):
    if needle is None:
        assert check_record_path(tmp_path / target) == tmp_path / target
    else:
        with pytest.raises(UsageError, match=needle):
            check_record_path(tmp_path / target)


@pytest.mark.parametrize("suffix, missing, extra", [(".gif", "PIL", "record"), (".mp4", "imageio_ffmpeg", "mp4")])
def test_a_missing_plugin_is_one_line_naming_the_extra(tmp_path, monkeypatch, suffix, missing, extra):
    import rltui.watch.video as video

    monkeypatch.setattr(video, "module_available", lambda name: name != missing)
    with pytest.raises(UsageError) as caught:
        check_record_path(tmp_path / f"out{suffix}")
    message = str(caught.value)
    assert "\n" not in message and f"pip install 'rltui[{extra}]'" in message
    assert missing_packages(RECORD_FORMATS[".svg"]) is None  # SVG needs nothing


def test_line_drawings_are_drawn_in_pixels():
    state = SimpleNamespace(x=np.float32(0.5), theta=np.float32(0.1))
    frame = renderer_for("CartPole-v1").render(state, np.zeros(4), Size(40, 10))
    assert frame.scene is not None and frame.scene.shapes
    pixels = frame_pixels(frame, "cart")
    colours = {tuple(p) for p in pixels.reshape(-1, 3)}
    assert style_rgb("cyan") in colours and style_rgb("yellow") in colours  # the cart, the pole


def test_an_image_observation_is_drawn_as_an_image():
    assert isinstance(renderer_for("navix:Navix-Empty-5x5-v0", obs_shape=(5, 5, 3)), ImageObsRenderer)
    assert not isinstance(renderer_for("Breakout-MinAtar", obs_shape=(10, 10, 4)), ImageObsRenderer)
    renderer = ImageObsRenderer((4, 6, 3))
    obs = np.zeros((4, 6, 3), np.float32)
    obs[1, 2] = (1.0, 0.0, 0.0)
    frame = renderer.render(None, obs.reshape(-1), Size(12, 4))
    # In text: half blocks, two pixel rows a line, scaled by whole pixels to fit 12 x 4.
    assert len(frame.lines) == 4 and all(set(line.plain) == {"▀"} and len(line.plain) == 12 for line in frame.lines)
    assert frame.scene.cells.shape == (4, 6, 3) and tuple(frame.scene.cells[1, 2]) == (255, 0, 0)
    pixels = frame_pixels(frame, "")
    assert (pixels == (255, 0, 0)).all(axis=-1).sum() > 100  # the red cell, a square of pixels


def test_symbolic_image_observations_keep_their_colours():
    renderer = ImageObsRenderer((2, 2, 2))
    obs = np.array([[[0, 10], [5, 0]], [[0, 0], [10, 5]]], np.float32)
    first = renderer.pixels(obs)
    renderer.pixels(obs * 0.5)  # a frame with smaller values does not rescale the next
    assert (renderer.pixels(obs) == first).all() and first.max() > 0


class CellsPlayer:
    """Just what the watch view reads of a Player, for a frame of cells."""

    env_id, seed_label, greedy, live, policy_update, num_agents = "grid", "seed 0", True, None, None, 1

    def __init__(self):
        from rltui.watch.player import Episode

        self.renderer = SimpleNamespace(name="cells", min_size=Size(4, 2))
        self.episode, self.episode_count = Episode(0), 1
        self.cells = np.zeros((3, 3, 3), np.uint8)
        self.cells[1, 1] = (255, 0, 0)

    def frame(self, size):
        legend = Text("red: the agent")
        return Frame((Text("text cells"),), legend, Scene(cells=self.cells, legend=legend)), None

    def step(self):
        self.episode.step += 1


@pytest.mark.filterwarnings("ignore::DeprecationWarning:textual_image")  # its use of a Pillow method
async def test_cells_show_as_an_image_in_the_terminal():
    pytest.importorskip("textual_image", reason="the terminal image needs the images extra")
    from rltui.ui.screens.watch import WatchApp
    from rltui.ui.widgets.cell_image import prepare_terminal_images

    assert prepare_terminal_images()
    app = WatchApp(CellsPlayer(), episodes=0, speed=1.0)
    async with app.run_test(size=(100, 30)) as pilot:
        deadline = time.monotonic() + 30
        while app.screen.shown < 1:
            assert time.monotonic() < deadline, "no frame shown"
            await pilot.pause(0.02)
        screen = app.screen
        assert screen.has_class("with-image")
        image = screen.query_one("#watch-image").image
        assert image.size[0] == image.size[1] >= 300 and image.getpixel((image.size[0] // 2,) * 2) == (255, 0, 0)
        assert "red: the agent" in str(screen.query_one("#watch-picture").render())
        await pilot.press("q")
