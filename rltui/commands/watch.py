"""The `rltui watch PATH` command: a checkpoint's policy, played in the watch view or
recorded with --record. It says which env module it imports (an import-path env named by
the checkpoint) before importing it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from rltui.commands import check_member
from rltui.errors import ExitCode, UsageError
from rltui.watch.player import Player
from rltui.watch.record import agent_label, check_record_path, record


def load_player(args) -> Player:
    from rltui.commands.info import _load
    from rltui.config.build import build_config
    from rltui.config.keys import ConfigError, check_integer, int_range
    from trainers import checkpoint
    from trainers.checkpoint import CheckpointError
    from trainers.env_import import is_import_path, is_object_id
    from trainers.keys import INT32_MAX, IntRange

    check_integer("--seed", args.seed, int_range("seed"))
    check_integer("--episodes", args.episodes, IntRange(1, INT32_MAX))
    member = getattr(args, "member", None)
    if member is not None:
        check_integer("--member", member, IntRange(0, INT32_MAX))
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
    if is_import_path(config.env) and not is_object_id(config.env):  # an object is no module
        module = config.env.split(":", 1)[0]
        print(f"rltui: watch imports the env module {module} (named by the checkpoint, {config.env})",
              file=sys.stderr)
    from rltui.infra import runtime
    runtime.configure_jax(host_devices=0, compile_cache=True)
    import jax

    from rltui.config.memory import check_policy_fits, tree_bytes
    from rltui.runfiles.checkpoints import portable_template, state_shapes
    from rltui.watch.params import acting_template
    from trainers.parallel import build

    parallel = build(config.static_config(), jax.local_devices()[:1])
    # Sized from shapes before anything is allocated: a checkpoint's config may name any network.
    shapes = state_shapes(config, parallel)
    check_policy_fits(2 * tree_bytes(shapes), tree_bytes(acting_template(config, parallel)), parallel.devices[0],
                      policy=f"the checkpoint's network (hidden_sizes {list(config.hidden_sizes)})")
    try:
        restored, _ = checkpoint.decode(data, portable_template(shapes))
    except CheckpointError as err:
        raise UsageError(str(err)) from None
    check_member(member, parallel.trainer.static.num_members)
    player = Player(config, (restored.params, restored.obs_stats), seed=args.seed, greedy=not args.sample,
                    parallel=parallel)
    if member is not None:
        player.start_agent(member * player.seeds_per_member)
    return player


def cmd_watch(args) -> int:
    player = load_player(args)
    if args.record is not None:
        path = Path(args.record)
        recorded = record(player, args.episodes, path)
        print(f"wrote {args.episodes} episode{'s' if args.episodes != 1 else ''} of {agent_label(player)} "
              f"({recorded.frames} frames, {recorded.format_name}) to {path.resolve()}")
        return ExitCode.OK
    from rltui.ui.screens.watch import WatchApp
    from rltui.ui.widgets.cell_image import prepare_terminal_images

    frame, _ = player.frame(player.renderer.min_size)
    if getattr(frame.scene, "cells", None) is not None:  # before the app reads the terminal: cells as an image
        prepare_terminal_images()
    WatchApp(player, episodes=args.episodes).run()
    return ExitCode.OK


def add_parser(sub) -> None:
    from trainers.algorithms import acting_by_values

    by_values = acting_by_values()
    watch = sub.add_parser(
        "watch", help="watch a saved policy play, in the terminal",
        description="Open a view of a checkpoint's policy playing episodes, drawn in the terminal, with the action, "
        f"the policy's probabilities (or mean and std) and V(s), or for {by_values} each action's Q(s, a) and their "
        "max. Keys: space pause, n step, g greedy/sampled, "
        "s next seed, +/- speed, q close. --record writes the episodes to a file instead: an animated SVG, a GIF or "
        "an MP4 video, by its suffix (GIF: pip install 'rltui[record]'; MP4: 'rltui[mp4]').",
    )
    watch.add_argument("path", metavar="PATH", help="checkpoint file (best.msgpack too), or run directory (its latest)")
    watch.add_argument("--episodes", type=int, default=1, help="episodes to play (default 1)")
    watch.add_argument("--sample", action="store_true",
                       help=f"sample actions from the policy, epsilon-greedy at eps_end for {by_values} "
                            "(default: greedy)")
    watch.add_argument("--seed", type=int, default=0, help="seed for the episodes (default 0)")
    watch.add_argument("--member", type=int, metavar="N",
                       help="a population's member N (0 first; its first seed), in the view and in --record")
    watch.add_argument("--record", metavar="OUT",
                       help="write the episodes to OUT.svg (animated SVG), OUT.gif or OUT.mp4, no view")
    watch.set_defaults(run=cmd_watch)
