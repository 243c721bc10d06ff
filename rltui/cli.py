"""The `rltui` command. Parses and validates everything before JAX is imported, so bad
input costs milliseconds and gives one line and exit code 2, never a traceback."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rltui import __version__
from rltui.config import KEYS, ConfigError, RunConfig, build_config, check_devices, load_toml, parse_overrides

EXIT_USAGE = 2


def _keys_epilog() -> str:
    defaults = RunConfig()
    lines = ["configuration keys (TOML file or --set; * = editable while training):"]
    for key, info in KEYS.items():
        value = getattr(defaults, key)
        if isinstance(value, tuple):
            value = list(value)
        elif isinstance(value, bool):
            value = str(value).lower()
        lines.append(f"  {key + ('*' if info.dynamic else ''):<17} {info.meaning} (default: {value})")
    lines.append("")
    lines.append("precedence: built-in defaults < --config file < --set")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rltui",
        description="Train reinforcement-learning agents in JAX, and watch and steer them from the terminal.",
    )
    parser.add_argument("--version", action="version", version=f"rltui {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    launch = sub.add_parser(
        "launch",
        help="start a training run",
        description="Start a training run: PPO on a gymnax environment, built-in defaults unless told otherwise.",
        epilog=_keys_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    launch.add_argument("--no-ui", action="store_true", help="run headless: progress bar, run files, no dashboard")
    launch.add_argument("--config", metavar="FILE", type=Path, help="TOML file of configuration keys (flat: lr = 3e-4)")
    launch.add_argument(
        "--set", metavar="KEY=VALUE", action="append", default=[], dest="overrides",
        help="override one configuration key (repeatable), e.g. --set lr=3e-4 --set env=Acrobot-v1",
    )
    launch.add_argument("--run-dir", metavar="DIR", help="directory for this run's files (default: runs/<name>)")
    launch.add_argument("--name", metavar="NAME", help="run name under runs/ (default: <env>-<algo>-<timestamp>)")
    launch.add_argument(
        "--no-compile-cache", action="store_true",
        help="do not use JAX's persistent compilation cache (default: on, under the user cache directory)",
    )

    sub.add_parser("envs", help="list the supported environments", description="List the supported gymnax environments.")
    return parser


def _error(message: str) -> int:
    print(f"rltui: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def cmd_launch(args: argparse.Namespace) -> int:
    try:
        file_values = load_toml(args.config) if args.config else {}
        config = build_config(file_values, parse_overrides(args.overrides))
    except ConfigError as err:
        return _error(str(err))
    if not args.no_ui:
        return _error("the dashboard is not available in this version yet; run with --no-ui")

    from rltui import runtime

    runtime.configure_jax(host_devices=config.devices, compile_cache=not args.no_compile_cache)
    try:
        devices = runtime.select_devices(config.devices)
        check_devices(config, len(devices))
    except (ConfigError, ValueError) as err:
        return _error(str(err))

    from rltui.rundir import prepare_run_dir

    try:
        run_dir = prepare_run_dir(config, args.run_dir, name=args.name)
    except ConfigError as err:
        return _error(str(err))
    return _launch_headless(config, devices, run_dir)


def _launch_headless(config: RunConfig, devices: list, run_dir: Path) -> int:
    from rltui.headless import run_headless
    from rltui.session import TrainingSession
    from rltui.session.backend import JaxBackend
    from rltui.session.recorder import RunRecorder

    backend = JaxBackend(config.static_config(), config.seed, devices)
    session = TrainingSession(backend, config.dynamic_hparams(), config.total_updates, chunk_seconds=config.chunk_seconds)
    recorder = RunRecorder(run_dir)
    session.add_listener(recorder)
    try:
        return run_headless(session, run_dir)
    finally:
        recorder.close()


def cmd_envs(args: argparse.Namespace) -> int:
    from trainers.envs import SUPPORTED_ENVS, make_env

    print(f"{'env':<26} {'observation':<14} {'actions'}")
    for env_id in SUPPORTED_ENVS:
        spec = make_env(env_id)
        shape = "x".join(str(d) for d in spec.obs_shape)
        if spec.discrete:
            actions = f"discrete ({spec.num_actions})"
        else:
            actions = f"continuous ({spec.num_actions}-dim, [{float(spec.action_low.min()):g}, {float(spec.action_high.max()):g}])"
        print(f"{env_id:<26} {shape:<14} {actions}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "launch":
        return cmd_launch(args)
    if args.command == "envs":
        return cmd_envs(args)
    parser.print_help()
    return EXIT_USAGE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
