"""`rltui watch PATH`: a saved policy playing episodes, drawn in the terminal (or recorded
to an animated SVG with --record), without training; and the same view inside the training
dashboard (`live_player`), where each new episode takes the run's latest parameters.

The policy runs one env on the host's first device, one compiled step per frame; the
picture is drawn from the env state on the host (rltui.render), so a frame costs one small
device call and some string building.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
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


def _on_own_device(method):
    """Run a Player method with its device as JAX's default, so that everything it makes
    (keys, env states, hidden states) lives there."""

    @functools.wraps(method)
    def on_device(self, *args, **kwargs):
        import jax

        with jax.default_device(self.device):
            return method(self, *args, **kwargs)

    return on_device


def watch_device(busy: list[str]):
    """The device a live watch view steps on: one training does not use (`busy`, as
    "platform:id"), so that its steps never queue behind a chunk on a device that runs
    computations in order (a GPU run's view goes on the host CPU); else the first one."""
    import jax

    candidates = [*jax.local_devices(), *jax.devices("cpu")]
    free = [d for d in candidates if f"{d.platform}:{d.id}" not in set(busy)]
    return free[0] if free else candidates[0]


BLOCK_STEPS = 16  # steps per device call


class _Ahead(NamedTuple):
    """A step computed ahead: what it showed, and the state after it (host arrays)."""

    view: StepView
    state: Any
    obs: np.ndarray
    hidden: Any
    key: np.ndarray


def _index(tree, i: int):
    import jax

    return jax.tree.map(lambda x: np.asarray(x[i]), tree)


def _fetch(tree):
    """Device results as host arrays. Waits by polling, never inside a blocking transfer
    that could hold the interpreter lock while training's chunk runs: the UI thread stays
    live whatever the device is doing."""
    import time

    import jax

    leaves = [leaf for leaf in jax.tree.leaves(tree) if hasattr(leaf, "is_ready")]
    while not all(leaf.is_ready() for leaf in leaves):
        time.sleep(0.002)
    return jax.device_get(tree)


class PolicyMismatch(ValueError):
    """Parameters that do not fit the network this config builds; the text says which."""


def acting_template(config, parallel):
    """The shapes and dtypes of (params, obs_stats) for `config` on `parallel` (one
    device), traced without running anything: a leading seed axis with several seeds."""
    import jax

    from trainers.hparams import DynamicHParams

    def init_one(key):  # one agent, on the one device: drop the device axis
        state = parallel._init(parallel._device_index, key, DynamicHParams.create())
        return jax.tree.map(lambda x: x[0], (state.params, state.obs_stats))

    acting = jax.eval_shape(init_one, jax.random.PRNGKey(0))
    agents = config.static_config().num_agents  # every seed of every member
    if agents > 1:
        acting = jax.tree.map(lambda x: jax.ShapeDtypeStruct((agents, *x.shape), x.dtype), acting)
    return acting


def adopt_params(template, params, obs_stats):
    """(params, obs_stats) in the structure of `template` (from `acting_template`), as
    NumPy arrays of its dtypes: parameters copied in this process, or the flax state dicts
    that came over the control socket (data from outside: every leaf is checked)."""
    import jax
    from flax import serialization

    state = {"params": serialization.to_state_dict(params), "obs_stats": serialization.to_state_dict(obs_stats)}
    target = {"params": template[0], "obs_stats": template[1]}
    try:
        restored = serialization.from_state_dict(target, state)
    except (KeyError, ValueError, TypeError) as err:
        raise PolicyMismatch(f"the parameters do not fit this run's network ({err})") from None
    want, got = jax.tree.leaves(target), jax.tree.leaves(restored)
    if len(want) != len(got) or jax.tree.structure(target) != jax.tree.structure(restored):
        raise PolicyMismatch("the parameters do not fit this run's network (a different structure)")
    checked = []
    for spec, leaf in zip(want, got, strict=True):
        array = np.asarray(leaf)
        if array.shape != tuple(spec.shape) or not np.issubdtype(array.dtype, np.number):
            raise PolicyMismatch(f"the parameters do not fit this run's network (an array of shape {array.shape} "
                                 f"where {tuple(spec.shape)} belongs)")
        checked.append(array.astype(spec.dtype, copy=False))
    restored = jax.tree.unflatten(jax.tree.structure(target), checked)
    return restored["params"], restored["obs_stats"]


class LivePolicy:
    """A training run's latest parameters for a Player, through its session's
    `request_params`: a copy is asked for as an episode ends and taken as the next begins
    (waiting at most `wait` seconds for it, else the episode plays the previous ones)."""

    def __init__(self, session, wait: float = 1.0):
        self.session = session
        self.wait = wait
        self._future = None
        self.problem: str | None = None  # why the latest request failed

    def ask(self) -> None:
        if self._future is None:
            self._future = self.session.request_params()

    def take(self, wait: float | None = None):
        """The snapshot asked for, or None (none asked for, not there within `wait`
        seconds, or failed)."""
        import concurrent.futures

        if self._future is None:
            return None
        try:
            snapshot = self._future.result(timeout=self.wait if wait is None else wait)
        except concurrent.futures.TimeoutError:
            return None  # still coming: the next episode takes it
        except Exception as err:  # noqa: BLE001 - ParamsUnavailable, or a lost connection
            self._future = None
            self.problem = str(err)
            return None
        self._future = None
        self.problem = None
        return snapshot


class Player:
    """A policy acting in one env, step by step. `greedy` picks the most probable action
    (the mean, continuous); otherwise actions are sampled. `acting` is (params, obs_stats)
    as the trainer holds them; with `live` (a LivePolicy) each new episode takes the run's
    latest parameters."""

    def __init__(self, config, acting, seed: int = 0, greedy: bool = True, live: LivePolicy | None = None,
                 policy_update: int | None = None, parallel=None, template=None, device=None):
        import jax

        from trainers.parallel import build

        self.device = device if device is not None else jax.local_devices()[0]
        if parallel is None:
            parallel = build(config.static_config(), [self.device])
        self.trainer = trainer = parallel.trainer
        self.spec = trainer.spec
        self.env_id = config.env
        # The agents `next_seed` cycles through: each seed of each member (member-major).
        self.num_agents = trainer.static.num_agents
        self.seeds_per_member = config.num_seeds
        self.num_members = trainer.static.num_members
        self.first_seed = config.seed
        self.greedy = greedy
        self.seed = seed
        self.episode_count = 0
        self._acting_all = jax.device_put(acting, self.device)  # once, not with every step
        self.live = live
        self.policy_update = policy_update  # the update whose parameters play (live)
        if live is not None and template is None:
            template = acting_template(config, parallel)
        self._template = template
        self.renderer = renderer_for(config.env, self.spec.env, self.spec.params, self.spec.obs_shape)
        self._reset = jax.jit(self._reset_fn)
        self._block = jax.jit(self._block_fn, static_argnames=("greedy", "steps"))
        # Steps computed ahead, one block per device call: where training holds the device's
        # compute threads (a CPU run with one XLA thread), every call waits for the chunk in
        # flight, so the view makes few and large ones. Dropped when the mode or seed changes.
        self._ahead: collections.deque[_Ahead] = collections.deque()
        self.episode = Episode(0)
        self.seed_index = 0
        self.new_episode()

    @property
    def greedy(self) -> bool:
        return self._greedy

    @greedy.setter
    def greedy(self, value: bool) -> None:
        self._greedy = bool(value)
        if hasattr(self, "_ahead"):
            self._ahead.clear()

    # --- compiled pieces (one device call each) -------------------------------------------
    def _reset_fn(self, seed, episode):
        import jax

        base = jax.random.fold_in(jax.random.PRNGKey(seed), episode)
        key, reset_key = jax.random.split(base)
        obs, env_state = self.spec.env.reset(reset_key, self.spec.params)
        return env_state, obs, self.trainer.initial_hidden(1), key

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

    def _block_fn(self, acting_all, seed_index, env_state, obs, hidden, key, *, greedy: bool, steps: int):
        """`steps` steps from one state, each one's outputs and the state after it."""
        import jax

        acting = acting_all if self.num_agents == 1 else jax.tree.map(lambda x: x[seed_index], acting_all)

        def one(carry, _):
            env_state, obs, hidden, key = carry
            key, step_key = jax.random.split(key)
            out = self._step_fn(acting, env_state, obs, hidden, step_key, greedy=greedy)
            return (out[0], out[1], out[2], key), (*out, key)

        _, outs = jax.lax.scan(one, (env_state, obs, hidden, key), None, length=steps)
        return outs

    # --- host side ----------------------------------------------------------------------
    @_on_own_device
    def new_episode(self) -> None:
        if self.live is not None:
            self._take_latest()
        self._ahead.clear()
        out = _fetch(self._reset(np.int32(self.seed), np.int32(self.episode_count)))
        self._state, self._obs, self._hidden, self._key = out
        self.episode = Episode(self.seed_index)
        self.episode_count += 1

    @_on_own_device
    def _compute_ahead(self, steps: int = BLOCK_STEPS) -> None:
        outs = _fetch(self._block(self._acting_all, np.int32(self.seed_index), self._state, self._obs,
                                  self._hidden, self._key, greedy=self.greedy, steps=steps))
        env_state, obs, hidden, action, probs, mean, std, value, reward, done, key = outs
        discrete = self.spec.discrete
        for i in range(steps):
            def at(tree, i=i):
                return None if tree is None else _index(tree, i)

            view = StepView(
                action=int(action[i]) if discrete else np.asarray(action[i]),
                probs=None if probs is None else np.asarray(probs[i]),
                mean=None if discrete else np.asarray(mean[i]),
                std=None if std is None else np.asarray(std[i]),
                value=float(value[i]), reward=float(reward[i]), done=bool(done[i]),
            )
            self._ahead.append(_Ahead(view, at(env_state), np.asarray(obs[i]), at(hidden), np.asarray(key[i])))
            if view.done:
                break  # the env resets itself after; the view starts the next episode its own way

    def step(self) -> StepView:
        if self.episode.done:
            self.new_episode()
        if not self._ahead:
            self._compute_ahead()
        ahead = self._ahead.popleft()
        self._state, self._obs, self._hidden, self._key = ahead.state, ahead.obs, ahead.hidden, ahead.key
        view = ahead.view
        self.episode.step += 1
        self.episode.ret += view.reward
        self.episode.done = view.done
        self.episode.last = view
        if view.done and self.live is not None:
            self.live.ask()  # copied at the next chunk boundary, while this frame shows
        return view

    def _take_latest(self) -> None:
        snapshot = self.live.take()
        if snapshot is None or snapshot.update == self.policy_update:
            return
        try:
            import jax

            self._acting_all = jax.device_put(adopt_params(self._template, snapshot.params, snapshot.obs_stats),
                                              self.device)
        except PolicyMismatch as err:
            self.live.problem = str(err)
            return
        self.policy_update = snapshot.update

    def frame(self, size: Size) -> tuple[Frame, str | None]:
        return render_safely(self.renderer, self._state, np.asarray(self._obs), size)

    @property
    def seed_label(self) -> str:
        member, seed = divmod(self.seed_index, self.seeds_per_member)
        label = f"seed {self.first_seed + seed}"
        if self.num_members > 1:
            label = f"member {member}" + (f", {label}" if self.seeds_per_member > 1 else "")
        return label + (f" ({self.seed_index + 1} of {self.num_agents})" if self.num_agents > 1 else "")

    def next_seed(self) -> None:
        self.seed_index = (self.seed_index + 1) % self.num_agents
        self.new_episode()


def describe_step(player: Player) -> Text:
    """The panel beside the picture: step, reward, return, action, the policy's view."""
    ep, view = player.episode, player.episode.last
    text = Text()
    text.append(f"{player.env_id}  {player.seed_label}\n", style="bold")
    text.append(f"mode    {'greedy' if player.greedy else 'sampled'}\n")
    if player.live is not None:
        text.append(f"policy  update {player.policy_update}\n")
        if player.live.problem:
            text.append(f"{player.live.problem}\n", style="yellow")
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
    return Player(config, (restored.params, restored.obs_stats), seed=args.seed, greedy=not args.sample,
                  parallel=parallel)


def live_imports(config) -> str | None:
    """The env module watching `config` imports (an import-path env), or None."""
    from trainers.env_import import is_import_path

    return config.env.split(":", 1)[0] if is_import_path(config.env) else None


def prepare_jax(on_cpu: bool) -> None:
    """Before this process first imports JAX (an attached dashboard has not): the compile
    cache, and with `on_cpu` the CPU only, so that a client beside a GPU run takes none
    of the GPU's memory. A process that already uses JAX keeps its settings."""
    import os

    if "jax" in sys.modules:
        return
    if on_cpu:
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    from rltui import runtime

    runtime.configure_jax(host_devices=0, compile_cache=True)


def live_player(config, session, seed: int = 0, cancelled=lambda: False, on_cpu: bool = False) -> Player | None:
    """A Player on `config`'s env, playing `session`'s latest parameters (each new episode
    takes the newest copy). Blocks until the first copy comes (a run still compiling has
    none yet), or returns None once `cancelled()`: call it from a worker thread.
    PolicyMismatch or ParamsUnavailable if the parameters cannot be played. `on_cpu`: see
    `prepare_jax` (an attached client)."""
    prepare_jax(on_cpu)
    from rltui.session.interface import ParamsUnavailable
    from trainers.parallel import build

    device = watch_device([] if on_cpu else list(session.describe().get("devices", ())))
    parallel = build(config.static_config(), [device])
    template = acting_template(config, parallel)
    live = LivePolicy(session)
    live.ask()
    snapshot = None
    while snapshot is None:
        if cancelled():
            return None
        snapshot = live.take(wait=0.2)
        if snapshot is None and live.problem is not None:
            raise ParamsUnavailable(live.problem)
    acting = adopt_params(template, snapshot.params, snapshot.obs_stats)
    return Player(config, acting, seed=seed, live=live, policy_update=snapshot.update, parallel=parallel,
                  template=template, device=device)


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
