"""`rltui launch`: validate everything, set up JAX, the run directory and the session, then
hand over to the dashboard or the headless runner."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import NamedTuple

from rltui.config.build import (
    ConfigError,
    RunConfig,
    build_config,
    check_devices,
)
from rltui.config.toml_text import load_toml, parse_overrides
from rltui.errors import LaunchError, UsageError, report
from rltui.runfiles.resume import (
    VerifiedCheckpoint,
    apply_resume,
    load_verified_checkpoint,
    prepare_resume,
    resume_target,
    resumed_config,
)
from rltui.ui import can_show_dashboard


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
        notices = (_preset_notice(preset) if preset is not None else None,
                   _rounding_notice(config) if "total_timesteps" in given else None)
        return LaunchPlan(config, None, preset, tuple(n for n in notices if n), frozenset(given))
    resume = load_verified_checkpoint(Path(args.resume), "--resume", "launch --resume")
    config = resumed_config(resume, given)
    notice = _rounding_notice(config) if "total_timesteps" in given else None
    metadata = resume.metadata
    preset = metadata.get("preset") if isinstance(metadata.get("preset"), dict) else None
    return LaunchPlan(config, resume, preset, (notice,) if notice else (), frozenset(given))


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
        return path.parent if path.name == "checkpoints" else path
    try:
        return resume_target(args, path).run_dir
    except LaunchError:
        return None


def launch(args, spec=None) -> int:
    """`spec`: a `multiprocess.DistributedSpec` when this is one process of a multi-process run."""
    from rltui.runfiles.rundir import check_not_in_use

    writer = spec is None or spec.writer
    try:
        if writer and (presumed := _presumed_run_dir(args)) is not None:
            check_not_in_use(presumed)  # a directory in use is refused at once, before any import of JAX
        config, resume, preset, notices, given = _config_and_resume(args)
        from rltui.loggers import check_loggers

        check_loggers(config.loggers)  # a logger whose library is missing: refused before anything starts
        target = resume_target(args, resume.path) if resume is not None and writer else None
    except (ConfigError, LaunchError) as err:
        return _error(str(err))
    say(notices)

    headless = args.no_ui
    if not headless and not can_show_dashboard():
        print(
            "rltui: no terminal for the dashboard (standard input or output is redirected); "
            "running headless, as with --no-ui",
            file=sys.stderr,
        )
        headless = True
    if headless and args.theme:
        print("rltui: warning: --theme has no effect without the dashboard", file=sys.stderr)
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


def start_control_server(session, run_dir: Path, config: RunConfig):
    """Listen on the run's control socket (`rltui attach`); None, with a warning, if it
    cannot: the run itself does not need it. The launch layer owns the server, so that
    only one process of a multi-process run will."""
    from rltui.control.server import ControlServer, ControlServerError

    server = ControlServer(session, run_dir, config=config.to_toml_dict())
    try:
        server.start()
    except ControlServerError as err:
        print(f"rltui: warning: control socket: {err}; rltui attach is off for this run", file=sys.stderr)
        return None
    return server


def build_session(config: RunConfig, devices: list, run_dir: Path | None, resume_data: bytes | None, spec=None,
                  hparams=None, preset: dict | None = None):
    """`run_dir` None: a peer process of a multi-process run, which records nothing.
    `hparams`: the live hyperparameters to start from, if not the config's. `preset`: what
    presets.toml set for the run (`presets.applied`), kept in its checkpoints for `rltui info`."""
    from rltui.session import TrainingSession
    from rltui.session.backend import JaxBackend
    from rltui.session.checkpoints import CheckpointPolicy, CheckpointStore
    from rltui.session.distributed import PeerCheckpoints, ProcessSync
    from rltui.session.evaluation import EvaluationPolicy, JaxEvaluator
    from rltui.session.recorder import RunRecorder

    backend = JaxBackend(config.static_config(), config.seed, devices)
    evaluation = EvaluationPolicy(config.eval_every_updates, config.eval_episodes, config.stop_at_eval_return)
    evaluator = JaxEvaluator(backend, config.eval_episodes, config.seed) if evaluation.enabled else None
    store = CheckpointStore.for_run(run_dir, keep=config.keep_checkpoints) if run_dir else PeerCheckpoints()
    session = TrainingSession(
        backend,
        hparams if hparams is not None else config.dynamic_hparams(),
        config.total_updates,
        chunk_seconds=config.chunk_seconds,
        checkpoints=store,
        checkpoint_policy=CheckpointPolicy(
            every_updates=config.checkpoint_every_updates,
            every_minutes=config.checkpoint_minutes,
            keep=config.keep_checkpoints,
        ),
        run_metadata={"config": config.to_toml_dict(), **({"preset": preset} if preset else {})},
        resume=resume_data,
        sync=ProcessSync(spec.process_id) if spec else None,
        evaluation=evaluation,
        evaluator=evaluator,
        population=make_population(config, hparams if hparams is not None else config.dynamic_hparams()),
    )
    if run_dir is None:
        return session, None
    if resume_data is not None:
        # The curves show the whole run: its updates before the checkpoint, from the
        # metrics.jsonl the launch has cut at that checkpoint.
        session.load_history(run_dir / "metrics.jsonl")
    recorder = RunRecorder(run_dir)
    session.add_listener(recorder)
    from rltui.loggers import open_loggers

    loggers = open_loggers(config.loggers, run_dir, config.to_toml_dict(), config.steps_per_update, session.warn)
    if loggers is not None:
        session.add_listener(loggers)  # after the recorder: metrics.jsonl is written first
    return session, recorder


def check_agents_fit(config: RunConfig, devices: list) -> None:
    """A run (one agent, or many: seeds, members) is refused before anything is built,
    compiled or written, in one line, when its estimated memory exceeds what the devices
    have free (UsageError): a network too wide, a batch too large, a resumed checkpoint's."""
    from rltui.config.memory import check_checkpoint_fits, check_population_fits
    from trainers.envs import make_env

    static = config.static_config()
    spec = make_env(static.env_id)
    # Memory first: a run that cannot train is told so, not that its checkpoints would be large.
    check_population_fits(static, spec, devices, eval_episodes=config.eval_episodes if config.eval_every_updates else 0)
    check_checkpoint_fits(static, spec)


def make_population(config: RunConfig, base):
    """The session's population for `config`'s sweep (None without one): every member starts
    from `base` with its swept values."""
    from rltui.config.sweep import plan_sweep

    sweep = plan_sweep(config)
    if sweep is None:
        return None
    from rltui.session.population import PBTPolicy, Population

    pbt = PBTPolicy(every_updates=config.pbt_every_updates, fraction=config.pbt_fraction,
                    perturb=tuple(config.pbt_perturb), metric=config.pbt_metric, keys=tuple(config.pbt_keys),
                    seed=config.sweep_seed)
    return Population(base, sweep.members, config.num_seeds, pbt)


def _error(message: str) -> int:
    return report(UsageError(message))
