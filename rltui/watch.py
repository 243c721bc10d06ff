"""`rltui watch PATH`: a saved policy playing episodes, drawn in the terminal (or recorded
to an animated SVG with --record), without training.

The policy runs one env on the host's first device, one compiled step per frame; the
picture is drawn from the env state on the host (rltui.render), so a frame costs one small
device call and some string building.
"""

from __future__ import annotations

import dataclasses
import html
import sys
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from rich.text import Text

from rltui.errors import UsageError
from rltui.render import Frame, Size, render_safely, renderer_for


class StepView(NamedTuple):
    """What the view shows beside the picture, for the step just taken (host values)."""

    action: Any  # int (discrete) or array (continuous)
    probs: np.ndarray | None  # discrete: the policy's action probabilities
    mean: np.ndarray | None  # continuous: the Gaussian's mean and std
    std: np.ndarray | None
    value: float  # V(s) of the state the action was chosen in
    reward: float
    done: bool


@dataclasses.dataclass
class Episode:
    seed_index: int
    step: int = 0
    ret: float = 0.0
    done: bool = False
    last: StepView | None = None


class Player:
    """A checkpoint's policy acting in one env, step by step. `greedy` picks the most
    probable action (the mean, continuous); otherwise actions are sampled."""

    def __init__(self, config, restored, seed: int = 0, greedy: bool = True):
        import jax

        from trainers.parallel import build

        parallel = build(config.static_config(), jax.local_devices()[:1])
        self.trainer = trainer = parallel.trainer
        self.spec = trainer.spec
        self.env_id = config.env
        self.num_seeds = config.num_seeds
        self.first_seed = config.seed
        self.greedy = greedy
        self.seed = seed
        self.episode_count = 0
        self._acting_all = (restored.params, restored.obs_stats)
        self.renderer = renderer_for(config.env, self.spec.env, self.spec.params, self.spec.obs_shape)
        self._reset = jax.jit(self._reset_fn)
        self._step = jax.jit(self._step_fn, static_argnames=("greedy",))
        self.episode = Episode(0)
        self.seed_index = 0
        self.new_episode()

    # --- compiled pieces --------------------------------------------------------------
    def _reset_fn(self, key):
        obs, env_state = self.spec.env.reset(key, self.spec.params)
        return obs, env_state

    def _step_fn(self, acting, env_state, obs, hidden, key, *, greedy: bool):
        import jax
        import jax.numpy as jnp

        from trainers import networks
        from trainers.rollout import env_action

        act_key, step_key = jax.random.split(key)
        hidden, out = self.trainer.act_step(acting, hidden, obs[None])
        policy_out, value = out.policy_out[0], out.value[0]
        # log_std is per action, or per row when the std depends on the state.
        log_std = out.log_std if self.spec.discrete else jnp.broadcast_to(out.log_std, out.policy_out.shape)[0]
        if greedy:
            action = networks.greedy_action(policy_out, self.spec.discrete)
        else:
            action = networks.sample_action(act_key, policy_out, log_std, self.spec.discrete)
        obs2, env_state2, reward, terminated, truncated, _ = self.spec.env.step(
            step_key, env_state, env_action(self.spec, action), self.spec.params
        )
        probs = jax.nn.softmax(policy_out) if self.spec.discrete else None
        std = None if self.spec.discrete else jnp.exp(log_std)
        return (env_state2, obs2, hidden, action, probs, policy_out, std, value, reward,
                jnp.logical_or(terminated, truncated))

    # --- host side ----------------------------------------------------------------------
    def acting(self):
        import jax

        if self.num_seeds == 1:
            return self._acting_all
        return jax.tree.map(lambda x: x[self.seed_index], self._acting_all)

    def new_episode(self) -> None:
        import jax

        base = jax.random.fold_in(jax.random.PRNGKey(self.seed), self.episode_count)
        self._key, reset_key = jax.random.split(base)
        self._obs, self._state = self._reset(reset_key)
        self._hidden = self.trainer.initial_hidden(1)
        self.episode = Episode(self.seed_index)
        self.episode_count += 1

    def step(self) -> StepView:
        import jax

        if self.episode.done:
            self.new_episode()
        self._key, key = jax.random.split(self._key)
        out = self._step(self.acting(), self._state, self._obs, self._hidden, key, greedy=self.greedy)
        self._state, self._obs, self._hidden = out[0], out[1], out[2]
        action, probs, mean, std, value, reward, done = jax.device_get(out[3:])
        view = StepView(
            action=int(action) if self.spec.discrete else np.asarray(action),
            probs=None if probs is None else np.asarray(probs),
            mean=None if self.spec.discrete else np.asarray(mean),
            std=None if std is None else np.asarray(std),
            value=float(value), reward=float(reward), done=bool(done),
        )
        self.episode.step += 1
        self.episode.ret += view.reward
        self.episode.done = view.done
        self.episode.last = view
        return view

    def frame(self, size: Size) -> tuple[Frame, str | None]:
        import jax

        return render_safely(self.renderer, jax.device_get(self._state), np.asarray(self._obs), size)

    @property
    def seed_label(self) -> str:
        return f"seed {self.first_seed + self.seed_index}" + (f" ({self.seed_index + 1} of {self.num_seeds})"
                                                              if self.num_seeds > 1 else "")

    def next_seed(self) -> None:
        self.seed_index = (self.seed_index + 1) % self.num_seeds
        self.new_episode()


def describe_step(player: Player) -> Text:
    """The panel beside the picture: step, reward, return, action, the policy's view."""
    ep, view = player.episode, player.episode.last
    text = Text()
    text.append(f"{player.env_id}  {player.seed_label}\n", style="bold")
    text.append(f"mode    {'greedy' if player.greedy else 'sampled'}\n")
    text.append(f"episode {player.episode_count}  step {ep.step}\n")
    if view is None:
        text.append("(no step yet)\n", style="dim")
        return text
    text.append(f"reward  {view.reward:+.3f}\nreturn  {ep.ret:.2f}\nV(s)    {view.value:+.3f}\n")
    if view.probs is not None:
        text.append(f"action  {view.action}\n")
        for i, p in enumerate(view.probs[:12]):
            bar = "█" * int(round(p * 20))
            text.append(f"  {i:>2} {p:5.2f} ", style="bold" if i == view.action else "")
            text.append(bar + "\n", style="cyan" if i == view.action else "dim")
    else:
        text.append("action  " + " ".join(f"{a:+.2f}" for a in np.atleast_1d(view.action)) + "\n")
        text.append("mean    " + " ".join(f"{a:+.2f}" for a in np.atleast_1d(view.mean)) + "\n")
        text.append("std     " + " ".join(f"{a:.2f}" for a in np.atleast_1d(view.std)) + "\n")
    if ep.done:
        text.append("episode over\n", style="yellow")
    return text


# --- recording ---------------------------------------------------------------------------

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


# --- the command -----------------------------------------------------------------------------

def load_player(args) -> Player:
    from rltui.config import INT32_MAX, ConfigError, IntRange, build_config, check_integer, int_range
    from rltui.inspect_checkpoint import _load
    from trainers import checkpoint
    from trainers.checkpoint import CheckpointError
    from trainers.env_import import is_import_path

    check_integer("--seed", args.seed, int_range("seed"))
    check_integer("--episodes", args.episodes, IntRange(1, INT32_MAX))
    if args.record is not None:
        check_record_path(Path(args.record))
    try:
        _, data, metadata = _load(args.path)
        if not checkpoint.params_are_finite(data):
            raise CheckpointError(checkpoint.NON_FINITE_MESSAGE)
    except (OSError, CheckpointError) as err:
        raise UsageError(str(err)) from None
    try:
        config = build_config(metadata.get("config", {}), use_preset=False)
    except ConfigError as err:
        raise UsageError(f"checkpoint config: {err}") from None
    if is_import_path(config.env):
        module = config.env.split(":", 1)[0]
        print(f"rltui: watch imports the env module {module} (named by the checkpoint, {config.env})",
              file=sys.stderr)
    from rltui import runtime

    runtime.configure_jax(host_devices=0, compile_cache=True)
    import jax

    from trainers.parallel import build

    parallel = build(config.static_config(), jax.local_devices()[:1])
    template = checkpoint.to_portable(parallel.init(parallel.seed_keys(0), config.dynamic_hparams()))
    try:
        restored, _ = checkpoint.decode(data, template)
    except CheckpointError as err:
        raise UsageError(str(err)) from None
    return Player(config, restored, seed=args.seed, greedy=not args.sample)


def cmd_watch(args) -> int:
    player = load_player(args)
    if args.record is not None:
        path = Path(args.record)
        count = record(player, args.episodes, path)
        print(f"wrote {args.episodes} episode{'s' if args.episodes != 1 else ''} ({count} frames, animated SVG) "
              f"to {path.resolve()}")
        return 0
    from rltui.ui.screens.watch import WatchApp

    WatchApp(player, episodes=args.episodes).run()
    return 0
