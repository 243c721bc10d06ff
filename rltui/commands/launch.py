"""`rltui launch`: validate everything, set up JAX, the run directory and the session, then
hand over to the dashboard or the headless runner."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import NamedTuple

from rltui.assembly import build_session, check_agents_fit, start_control_server
from rltui.config.build import (
    RunConfig,
    build_config,
    check_devices,
    check_run_name,
    no_learning_notice,
    unread_notice,
)
from rltui.config.keys import KEYS, ConfigError
from rltui.config.toml_text import load_toml, parse_overrides
from rltui.errors import LaunchError, UsageError, report, warn
from rltui.runfiles.checkpoints import VerifiedCheckpoint, load_verified_checkpoint
from rltui.runfiles.names import CHECKPOINTS
from rltui.ui import can_show_dashboard
from trainers.quoting import quote


class LaunchPlan(NamedTuple):
    config: RunConfig
    resume: VerifiedCheckpoint | None  # the checkpoint a resume goes on from
    preset: dict | None  # what presets.toml set (`presets.applied`; a resume keeps its checkpoint's record)
    notices: tuple[str, ...]  # one line each, said once the launch's checks have passed
    given: frozenset[str] = frozenset()  # the keys set by --set or --config


def _config_and_resume(args) -> LaunchPlan:
    """The run's config, the checkpoint it resumes if any, what presets.toml set for it, and
    what to tell the user about them."""
    file_values = load_toml(args.config) if args.config else {}
    overrides = parse_overrides(args.overrides)
    given = {**file_values, **overrides}
    if not args.resume:
        config = build_config(file_values, overrides, use_preset=not args.no_preset)
        preset = None
        if not args.no_preset:
            from rltui.config import presets
            preset = presets.applied(config.algo, config.env, given)
        notices = (unread_notice(config, given), _preset_notice(preset) if preset is not None else None,
                   _rounding_notice(config) if "total_timesteps" in given else None, no_learning_notice(config))
        return LaunchPlan(config, None, preset, tuple(n for n in notices if n), frozenset(given))
    # The session package is imported where a launch needs it: every command's start loads this module.
    from rltui.session.resume import resumed_config

    resume = load_verified_checkpoint(Path(args.resume), "--resume", "launch --resume")
    config = resumed_config(resume, given)
    notices = (unread_notice(config, given), _rounding_notice(config) if "total_timesteps" in given else None)
    metadata = resume.metadata
    preset = metadata.get("preset") if isinstance(metadata.get("preset"), dict) else None
    return LaunchPlan(config, resume, preset, tuple(n for n in notices if n), frozenset(given))


def say(notices) -> None:
    for notice in notices:
        print(f"rltui: {notice}", file=sys.stderr)


def _preset_notice(preset: dict) -> str:
    """The settings presets.toml gave a new run (only those that differ from the defaults),
    and how to train without them."""
    from rltui.config.presets import describe
    from rltui.config.toml_text import show_setting

    values = ", ".join(f"{key} {show_setting(value)}" for key, value in preset["settings"].items())
    return f"{describe(preset)}: {values} (--no-preset to train without)"


def _rounding_notice(config: RunConfig) -> str | None:
    """A run trains whole updates: a total the user asked for that is not a whole number of
    them is said once, with what the run will train."""
    trained = config.total_updates * config.steps_per_update
    if trained == config.total_timesteps:
        return None
    noun = "update" if config.total_updates == 1 else "updates"
    return (f"total_timesteps {config.total_timesteps:,} trains {config.total_updates:,} whole {noun} of "
            f"{config.steps_per_update:,} env steps: {trained:,} env steps")


def _presumed_run_dir(args) -> Path | None:
    """The directory this launch will write to, as far as the arguments alone say."""
    if args.run_dir:
        return Path(args.run_dir)
    if not args.resume:
        return None
    path = Path(args.resume)
    if path.is_dir():
        return path.parent if path.name == CHECKPOINTS else path
    from rltui.session.resume import resume_target

    try:
        return resume_target(args, path).run_dir
    except LaunchError:
        return None


def launch(args, spec=None) -> int:
    """`spec`: a `multiprocess.DistributedSpec` when this is one process of a multi-process run."""
    from rltui.runfiles.rundir import check_not_in_use
    from rltui.session.resume import apply_resume, prepare_resume, resume_target

    writer = spec is None or spec.writer
    try:
        if writer and (presumed := _presumed_run_dir(args)) is not None:
            check_not_in_use(presumed)  # a directory in use is refused at once, before any import of JAX
        config, resume, preset, notices, given = _config_and_resume(args)
        from rltui.loggers.base import check_loggers

        check_loggers(config.loggers)  # a logger whose library is missing: refused before anything starts
        target = resume_target(args, resume.path) if resume is not None and writer else None
    except (ConfigError, LaunchError) as err:
        return _error(str(err))

    headless = args.no_ui
    if not headless and not can_show_dashboard():
        print(
            "rltui: no terminal for the dashboard (standard input or output is redirected); "
            "running headless, as with --no-ui",
            file=sys.stderr,
        )
        headless = True
    if headless and args.theme:
        warn("--theme has no effect without the dashboard")
    theme = None
    if not headless:
        try:
            from rltui.ui.themes import check_theme

            theme = check_theme(args.theme)
        except ValueError as err:
            return _error(str(err))

    from rltui.infra import runtime
    runtime.configure_jax(host_devices=config.devices, compile_cache=not args.no_compile_cache)
    if spec is not None:
        from rltui.commands import multiprocess
        multiprocess.initialize(spec)  # before any other JAX use
    from trainers.envs import is_builtin

    # An env from outside gymnax's list has no known observation size to size the pool by.
    builtin = is_builtin(config.env)
    runtime.start_backend(
        runtime.resolve_cpu_threads(config, multi_process=spec is not None) if builtin else config.cpu_threads
    )
    try:
        devices = multiprocess.select_devices(config.devices) if spec else runtime.select_devices(config.devices)
        check_devices(config, len(devices))
        if not builtin:  # import it, check its interface and trace it, before anything is written or compiled
            from rltui.commands.check_env import preflight

            preflight(config.static_config().env_id, config.network)
        check_agents_fit(config, devices)
    except (ConfigError, UsageError, ValueError) as err:
        code = _error(str(err))
        if spec is not None:
            # JAX's distributed runtime is up: an orderly shutdown would wait for the peers,
            # which wait for this process. The one line is said; end here.
            sys.stderr.flush()
            os._exit(code)
        return code
    say(notices)  # once every check has passed: a refused launch says only why
    if spec is not None and not spec.writer:
        return _run_peer(config, devices, spec)

    from rltui.runfiles.rundir import prepare_run_dir

    prepared = None
    try:
        if resume is not None:
            prepared = prepare_resume(config, resume, target, given)
            run_dir = prepared.run_dir
            say(prepared.notices(resume.metadata))
        else:
            run_dir = prepare_run_dir(config, args.run_dir, name=args.name)
            if args.name and not args.run_dir and run_dir.name != args.name:
                print(f"rltui: {run_dir.with_name(args.name)} already exists; this run writes to {run_dir}",
                      file=sys.stderr)
    except (ConfigError, LaunchError, OSError) as err:
        return _error(str(err))
    hparams = prepared.changes.hparams_before if prepared is not None else None
    from rltui.session.recorder import RunFileError

    try:
        session, recorder = build_session(config, devices, run_dir, resume.data if resume else None, spec, hparams,
                                          preset=preset)
    except RunFileError as err:  # a run file it cannot open (one that is not a regular file)
        return _error(str(err))
    if prepared is not None:
        apply_resume(session, recorder, prepared, resume.metadata)
    server = start_control_server(session, run_dir, config)
    try:
        if headless:
            from rltui.headless import run_headless

            return run_headless(
                session,
                run_dir,
                attachable=server is not None,
                peer_label=spec.label if spec else None,
                on_abort=server.remove_socket if server is not None else None,
            )
        from rltui.ui.runner import run_dashboard

        code = run_dashboard(session, config, run_dir, theme=theme)
        if not session.join(0):
            # The user gave up waiting (q twice during a compile): the thread is inside XLA,
            # and interpreter shutdown would abort under it. Run files are flushed per chunk;
            # the events log says how the run ended, as a second Ctrl+C's does.
            from rltui.runfiles.summary import latest_checkpoint_text
            from rltui.session.recorder import record_abort

            record_abort(run_dir, session.event_now(
                "aborted", f"aborted: the dashboard quit at once, without a final checkpoint; "
                           f"{latest_checkpoint_text(run_dir)}"))
            if server is not None:
                server.close()
            os._exit(code)
        return code
    finally:
        if server is not None:
            server.close()  # after the session's last state, so attached clients see it
        recorder.close()



def _run_peer(config: RunConfig, devices: list, spec) -> int:
    """A process other than 0 of a multi-process run: trains in step with process 0 and
    prints its progress, but writes nothing (no run directory, no socket)."""
    from rltui.headless import run_headless

    session, _ = build_session(config, devices, None, None, spec)
    return run_headless(session, None, peer_label=spec.label)


def _error(message: str) -> int:
    return report(UsageError(message))


def _keys_epilog() -> str:
    from rltui.config.toml_text import written_number
    from trainers.algorithms import ALGORITHMS, DEFAULT_ALGORITHM, listed

    defaults = RunConfig()
    own_defaults = (name for name, algorithm in ALGORITHMS.items() if algorithm.defaults and name != DEFAULT_ALGORITHM)
    others = listed(own_defaults, "or")
    lines = [f"configuration keys (TOML file or --set; * = editable while training; the defaults shown are the "
             f"built-in ones, which {DEFAULT_ALGORITHM} trains with: algo = {others} replaces "
             "some with its own, listed in docs/configuration.md):"]
    width = max(len(key) for key in KEYS) + 1
    for key, info in KEYS.items():
        value = getattr(defaults, key)
        if isinstance(value, tuple):
            value = list(value)
        elif isinstance(value, bool):
            value = str(value).lower()
        elif value is None:  # TOML has no null: such a key is left out of a file (`--set KEY=none`)
            value = "unset"
        else:
            value = written_number(value)
        lines.append(f"  {key + ('*' if info.live else ''):<{width}} {info.meaning} (default: {value})")
    lines.append("")
    lines.append(
        "precedence: built-in defaults (the algorithm's) < the env's family defaults < its tuned preset (`rltui envs` "
        "lists them; "
        "--no-preset skips both)"
        " < --config file < --set"
    )
    return "\n".join(lines)


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "launch",
        help="start a training run",
        description="Start a training run: PPO on a gymnax environment, built-in defaults unless told otherwise.",
        epilog=_keys_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--no-ui", action="store_true", help="run headless: progress bar, run files, no dashboard")
    parser.add_argument("--config", metavar="FILE", type=Path, help="TOML file of configuration keys (flat: lr = 3e-4)")
    parser.add_argument(
        "--set", metavar="KEY=VALUE", action="append", default=[], dest="overrides",
        help="override one configuration key (repeatable), e.g. --set lr=3e-4 --set env=Acrobot-v1",
    )
    parser.add_argument(
        "--no-preset", action="store_true",
        help="ignore the environment's family defaults and tuned preset: built-in defaults < --config < --set only",
    )
    parser.add_argument(
        "--sweep", metavar="KEY=SPEC", action="append", default=[], dest="sweeps",
        help="train a population: sweep a traced key over a list, --sweep 'lr=[1e-4,3e-4]', or a distribution, "
        "--sweep 'ent_coef=loguniform(1e-4,1e-2)' (quoted for the shell; repeatable; wins over the --config "
        "file's [sweep] entry for the same key)",
    )
    parser.add_argument(
        "--sweep-size", metavar="N",
        help="draw N members from the sweep (lists as choices); without it a sweep of lists is every combination",
    )
    parser.add_argument("--run-dir", metavar="DIR", help="directory for this run's files (default: runs/<name>)")
    parser.add_argument("--name", metavar="NAME", help="run name under runs/ (default: <env>-<algo>-<timestamp>)")
    parser.add_argument(
        "--no-compile-cache", action="store_true",
        help="do not use JAX's persistent compilation cache (default: on, under the user cache directory)",
    )
    parser.add_argument(
        "--resume", metavar="PATH",
        help="continue a run from a checkpoint file, or from a run directory's latest checkpoint "
        "(dynamic keys may be changed with --set; shape-changing keys may not)",
    )
    parser.add_argument("--theme", metavar="NAME", help="dashboard theme (default rltui-dark; see the command palette)")
    multi = parser.add_argument_group(
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
    parser.set_defaults(run=cmd_launch)


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


def cmd_launch(args: argparse.Namespace) -> int:
    """`rltui launch`: one process, or the supervisor of a multi-process run (which starts
    this same command line, `args.argv`, in each process)."""
    from rltui.commands import multiprocess
    args.overrides = [*args.overrides, *sweep_overrides(args.sweeps, args.sweep_size)]
    try:
        if args.name is not None:
            check_run_name(args.name)  # before anything is written, in any process
        spec = multiprocess.spec_from_args(args)
    except ValueError as err:
        raise UsageError(str(err)) from None
    if spec is not None and not multiprocess.is_supervised():
        return multiprocess.supervise(spec, args.argv)
    return launch(args, spec)
