"""The `rltui` command. Parses and validates everything before JAX is imported, so bad
input costs milliseconds and gives one line and exit code 2, never a traceback."""

from __future__ import annotations

import argparse
import gc
import os
import signal
import sys
from pathlib import Path

from rltui import __version__
from rltui.config.build import KEYS, RunConfig, check_run_name
from rltui.errors import ExitCode, UsageError, as_rltui_error, report
from rltui.infra import deferred_imports
from trainers.keys import quote


def _keys_epilog() -> str:
    defaults = RunConfig()
    lines = ["configuration keys (TOML file or --set; * = editable while training):"]
    width = max(len(key) for key in KEYS) + 1
    for key, info in KEYS.items():
        value = getattr(defaults, key)
        if isinstance(value, tuple):
            value = list(value)
        elif isinstance(value, bool):
            value = str(value).lower()
        elif value is None:  # TOML has no null: such a key is left out of a file (`--set KEY=none`)
            value = "unset"
        lines.append(f"  {key + ('*' if info.live else ''):<{width}} {info.meaning} (default: {value})")
    lines.append("")
    lines.append(
        "precedence: built-in defaults < the env's family defaults < its tuned preset (`rltui envs` lists them; "
        "--no-preset skips both)"
        " < --config file < --set"
    )
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
    launch.add_argument(
        "--no-preset", action="store_true",
        help="ignore the environment's family defaults and tuned preset: built-in defaults < --config < --set only",
    )
    launch.add_argument(
        "--sweep", metavar="KEY=SPEC", action="append", default=[], dest="sweeps",
        help="train a population: sweep a traced key over a list, --sweep 'lr=[1e-4,3e-4]', or a distribution, "
        "--sweep 'ent_coef=loguniform(1e-4,1e-2)' (quoted for the shell; repeatable; wins over the --config "
        "file's [sweep] entry for the same key)",
    )
    launch.add_argument(
        "--sweep-size", metavar="N",
        help="draw N members from the sweep (lists as choices); without it a sweep of lists is every combination",
    )
    launch.add_argument("--run-dir", metavar="DIR", help="directory for this run's files (default: runs/<name>)")
    launch.add_argument("--name", metavar="NAME", help="run name under runs/ (default: <env>-<algo>-<timestamp>)")
    launch.add_argument(
        "--no-compile-cache", action="store_true",
        help="do not use JAX's persistent compilation cache (default: on, under the user cache directory)",
    )
    launch.add_argument(
        "--resume", metavar="PATH",
        help="continue a run from a checkpoint file, or from a run directory's latest checkpoint "
        "(dynamic keys may be changed with --set; shape-changing keys may not)",
    )
    launch.add_argument("--theme", metavar="NAME", help="dashboard theme (default rltui-dark; see the command palette)")
    multi = launch.add_argument_group(
        "one run over several processes (several hosts, or one process per GPU; headless only)",
        "Start the same command in every process, with its own --process-id; process 0 writes the run files "
        "and checkpoints and owns the control socket. A peer that does not join within --peer-timeout seconds, "
        "or dies, ends every process with a one-line message and exit code 4.",
    )
    multi.add_argument("--coordinator", metavar="HOST:PORT", help="address of process 0 (reachable from every process)")
    multi.add_argument("--num-processes", metavar="N", type=int, help="number of processes in the run")
    multi.add_argument("--process-id", metavar="I", type=int, help="this process's index, 0 to N-1")
    multi.add_argument(
        "--peer-timeout", metavar="SECONDS", type=int,
        help="seconds to wait for every process to join, and without a peer's heartbeat before giving up (default 60)",
    )

    evaluate = sub.add_parser(
        "eval", help="run a checkpoint's policy and print its returns",
        description="Run a checkpoint's policy for whole episodes and print mean, std, min and max return.",
    )
    evaluate.add_argument("path", metavar="PATH", help="checkpoint file, or run directory (its latest checkpoint)")
    evaluate.add_argument("--episodes", type=int, default=32, help="number of episodes (default 32)")
    evaluate.add_argument("--sample", action="store_true", help="sample actions from the policy (default: greedy)")
    evaluate.add_argument("--seed", type=int, default=0, help="seed for the evaluation episodes (default 0)")

    info = sub.add_parser(
        "info", help="report on a checkpoint",
        description="Report on a checkpoint: where training was, the hyperparameters and configuration that apply "
        "to its algorithm, its edits and the library versions. Never imports the run's env module.",
    )
    info.add_argument("path", metavar="PATH", help="checkpoint file, or run directory (its latest checkpoint)")
    info.add_argument("--json", action="store_true", help="print the report as JSON, for scripts")

    watch = sub.add_parser(
        "watch", help="watch a saved policy play, in the terminal",
        description="Open a view of a checkpoint's policy playing episodes, drawn in the terminal, with the action, "
        "the policy's probabilities (or mean and std) and V(s). Keys: space pause, n step, g greedy/sampled, "
        "s next seed, +/- speed, q close. --record writes the episodes as an animated SVG instead.",
    )
    watch.add_argument("path", metavar="PATH", help="checkpoint file (best.msgpack too), or run directory (its latest)")
    watch.add_argument("--episodes", type=int, default=1, help="episodes to play (default 1)")
    watch.add_argument("--sample", action="store_true", help="sample actions from the policy (default: greedy)")
    watch.add_argument("--seed", type=int, default=0, help="seed for the episodes (default 0)")
    watch.add_argument("--record", metavar="OUT.svg", help="write the episodes to an animated SVG file, no view")

    sub.add_parser(
        "envs", help="list the supported environments", description="List the supported gymnax environments."
    )

    check_env = sub.add_parser(
        "check-env", help="check that an environment will train",
        description="Run an environment through what training needs (import, interface, jit and vmap of reset and "
        "step, shapes and dtypes against the declared spaces, finite scalar rewards, boolean done flags, "
        "determinism, episode ends, one policy update) and print each check. Exit 0 when training will work, 2 "
        "otherwise.",
    )
    check_env.add_argument(
        "spec", metavar="SPEC", help="an env id (rltui envs) or an import path, my_pkg.envs:make_env"
    )
    check_env.add_argument("--env-kwargs", metavar="TABLE", help="keyword arguments for an import path, e.g. '{n = 3}'")
    check_env.add_argument(
        "--network", default="mlp", choices=("mlp", "gru", "cnn"), help="policy network (default mlp)"
    )
    check_env.add_argument("--algo", default="ppo", choices=("ppo", "reinforce"), help="algorithm (default ppo)")

    from rltui.commands import attach, compare
    from rltui.commands import runs as runs_command
    from rltui.runfiles import reader as export
    attach.add_parsers(sub)
    export.add_parser(sub)
    compare.add_parser(sub)
    runs_command.add_parser(sub)
    return parser


def sweep_overrides(sweeps: list[str], sweep_size: str | None) -> list[str]:
    """`--sweep KEY=SPEC` and `--sweep-size N` as `--set` items (`sweep.KEY=SPEC`, an entry of
    the sweep table, and `sweep_size=N`), which follow the --set items and so win over them;
    UsageError for a malformed flag."""
    items = []
    for item in sweeps:
        key, sep, spec = item.partition("=")
        if not sep or not key.strip() or not spec.strip():
            raise UsageError(f"--sweep: expected KEY=SPEC, like lr=[1e-4,3e-4] or lr=loguniform(1e-4,1e-2), "
                             f"got {quote(item)}")
        items.append(f"sweep.{key.strip()}={spec.strip()}")
    if sweep_size is not None:
        try:
            size = int(sweep_size.strip())
        except ValueError:
            size = None
        if size is None or size < 1:
            raise UsageError(f"--sweep-size: expected a number of members, 1 or more, got {quote(sweep_size)}")
        items.append(f"sweep_size={size}")
    return items


def cmd_launch(args: argparse.Namespace, argv: list[str]) -> int:
    from rltui.commands import multiprocess
    args.overrides = [*args.overrides, *sweep_overrides(args.sweeps, args.sweep_size)]
    try:
        if args.name is not None:
            check_run_name(args.name)  # before anything is written, in any process
        spec = multiprocess.spec_from_args(args)
    except ValueError as err:
        raise UsageError(str(err)) from None
    if spec is not None and not multiprocess.is_supervised():
        return multiprocess.supervise(spec, argv)
    from rltui.commands.launch import launch

    return launch(args, spec)


def cmd_envs(args: argparse.Namespace) -> int:
    from rltui.config import presets
    from trainers.envs import SUPPORTED_ENVS, make_env

    print(f"{'env':<26} {'observation':<14} {'actions':<32} {'family':<11} settings (ppo)")
    for env_id in SUPPORTED_ENVS:
        spec = make_env(env_id)
        shape = "x".join(str(d) for d in spec.obs_shape)
        if spec.discrete:
            actions = f"discrete ({spec.num_actions})"
        else:
            low, high = float(spec.action_low.min()), float(spec.action_high.max())
            actions = f"continuous ({spec.num_actions}-dim, [{low:g}, {high:g}])"
        family = presets.family_of(env_id)
        summary = _preset_summary(presets.has_preset("ppo", env_id), presets.result("ppo", env_id), family)
        print(f"{env_id:<26} {shape:<14} {actions:<32} {family or '-':<11} {summary}")
    _print_suites()
    return 0


def _print_suites() -> None:
    """Each optional suite: every env it offers when installed (ids with its prefix), else
    the extra that brings it."""
    from importlib import metadata

    from trainers import suites

    for suite in suites.SUITES.values():
        print()
        if not suites.installed(suite):
            print(f'{suite.name}: not installed; pip install "rltui[{suite.name}]" (e.g. {suite.example})')
            continue
        try:
            version = metadata.version(suite.package)
        except metadata.PackageNotFoundError:
            version = "?"
        names = suites.env_names(suite)
        print(f"{suite.name} {version} ({len(names)} envs):")
        for name in names:
            print(f"  {suite.name}:{name}")


def _preset_summary(has_preset: bool, result, family: str | None = None) -> str:
    """Where an env's settings come from (its own preset, else its family's defaults) and
    what they reached here."""
    if has_preset:
        source = "preset"
    elif family:
        source = f"{family} family defaults"
    else:
        return "-"
    if result is None:
        return f"{source} (not measured here)"
    measured = (
        f"{source}: return {result.mean:g}, worst of {result.seeds} seeds {result.min:g}, in "
        f"{result.steps / 1e6:.1f}M steps"
    )
    if result.random is not None and result.mean <= result.random:
        return f"{measured} (no better than a random policy, {result.random:g})"
    if result.reference is None:
        return f"{measured} (no published reference)"
    if result.min >= result.reference:
        reached = "every seed reaches"
    elif result.mean >= result.reference:
        reached = "the mean reaches"
    elif result.optimum is not None and result.optimum < result.reference:
        return (f"{measured} (short of the reference {result.reference:g}, which no policy reaches on these "
                f"episodes: the best possible is {result.optimum:g})")
    else:
        reached = "short of"
    return f"{measured} ({reached} the reference {result.reference:g})"


def main(argv: list[str] | None = None) -> int:
    """Run one command; an error for the user is reported here, as one line with its exit
    code (`rltui.errors`), whichever command raised it."""
    deferred_imports.install()  # every command that makes an env skips gymnax's plotting imports
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    try:
        return int(_dispatch(parser, args, argv))
    except Exception as err:
        user_error = as_rltui_error(err)
        if user_error is None:
            raise
        return report(user_error)


def _dispatch(parser: argparse.ArgumentParser, args: argparse.Namespace, argv: list[str]) -> int:
    if args.command == "launch":
        return cmd_launch(args, argv)
    if args.command == "envs":
        return cmd_envs(args)
    if args.command == "check-env":
        from rltui.commands.check_env import cmd_check_env

        return cmd_check_env(args)
    if args.command in ("attach", "serve"):
        from rltui.commands import attach
        return attach.cmd_attach(args) if args.command == "attach" else attach.cmd_serve(args)
    if args.command == "watch":
        from rltui.commands.watch import cmd_watch

        return cmd_watch(args)
    if args.command in ("eval", "info"):
        from rltui.commands import info as inspect_checkpoint
        return inspect_checkpoint.cmd_eval(args) if args.command == "eval" else inspect_checkpoint.cmd_info(args)
    if args.command == "runs":
        from rltui.commands.runs import cmd_runs

        return cmd_runs(args)
    if args.command in ("export", "compare"):
        from rltui.commands import compare
        from rltui.runfiles import reader as export
        return export.cmd_export(args) if args.command == "export" else compare.cmd_compare(args)
    parser.print_help()
    return ExitCode.USAGE


def entry() -> None:
    """The `rltui` command (console script and `python -m rltui`).

    Once `main` has returned the run is over and its files are written; a Ctrl+C during the
    interpreter's teardown must not turn that clean end into "killed by SIGINT" (exit 130),
    so the teardown ignores it. Output piped into a reader that stops early (`rltui info
    RUN | head`) ends quietly, as other command-line tools do, not with a traceback. A
    Ctrl+C before training starts (imports, the compile) ends with one line and exit code
    130, and removes the run directory it made, which holds no training yet, so that the
    same --run-dir can be given again."""
    try:
        code = main()
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's last flush
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = ExitCode.BROKEN_PIPE
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl+C must not cut the cleanup short
        code = ExitCode.INTERRUPTED
        from rltui.runfiles.rundir import discard_unstarted_runs

        removed = discard_unstarted_runs()
        note = f"; nothing was trained, so {', '.join(map(str, removed))} was removed" if removed else ""
        try:
            print(f"rltui: interrupted{note}", file=sys.stderr)
        except (OSError, ValueError):
            pass
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The interpreter's teardown collects garbage several times over every object JAX and
    # its libraries made, which is most of its time. The command's files are closed by now:
    # one collection finalises what is already garbage, and the survivors are left out of
    # the teardown's walks. (Python does not promise finalisers of objects still alive at
    # exit in any case; an env's code that must flush at exit registers with `atexit`.)
    gc.collect()
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    entry()
