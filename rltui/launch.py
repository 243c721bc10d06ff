"""`rltui launch`: validate everything, set up JAX, the run directory and the session, then
hand over to the dashboard or the headless runner."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from rltui.config import ConfigError, RunConfig, build_config, check_devices, load_toml, parse_overrides, resume_config
from rltui.ui import can_show_dashboard

EXIT_USAGE = 2


class LaunchError(Exception):
    """Bad input found before training starts: one line for the user, exit code 2."""


def _config_and_resume(args) -> tuple[RunConfig, tuple[Path, bytes, dict] | None]:
    file_values = load_toml(args.config) if args.config else {}
    overrides = parse_overrides(args.overrides)
    if not args.resume:
        return build_config(file_values, overrides, use_preset=not args.no_preset), None
    path, data, metadata = load_verified_checkpoint(Path(args.resume), "--resume")
    config = resume_config(metadata.get("config", {}), metadata.get("hparams", {}), {**file_values, **overrides})
    done = int(metadata.get("update", 0))
    if config.total_updates <= done:
        rounded = (
            "" if config.total_timesteps == config.total_updates * config.steps_per_update
            else f" (rounded down to whole updates of {config.steps_per_update:,} env steps: {config.total_updates:,})"
        )
        raise LaunchError(
            f"total_timesteps: the checkpoint is at update {done:,} ({done * config.steps_per_update:,} env steps), "
            f"which {config.total_timesteps:,}{rounded} does not go beyond; set a larger one to train on, "
            f"e.g. --set total_timesteps={2 * done * config.steps_per_update}"
        )
    return config, (path, data, metadata)


def load_verified_checkpoint(path: Path, flag: str) -> tuple[Path, bytes, dict]:
    """Read and verify (format, version, checksum) a checkpoint file, or the newest valid
    checkpoint of a run directory, skipping damaged ones with a warning."""
    from rltui.session.checkpoints import CheckpointStore, resolve_checkpoint
    from trainers.checkpoint import CheckpointError, verify

    try:
        candidates = [resolve_checkpoint(path)]
    except OSError as err:
        raise LaunchError(f"{flag}: {err}") from None
    if path.is_dir():
        stores = (CheckpointStore.for_run(path), CheckpointStore(path))
        candidates = next((s.paths()[::-1] for s in stores if s.paths()), candidates)
    problems = []
    for candidate in candidates:
        try:
            data = candidate.read_bytes()
            metadata = verify(data)
        except (OSError, CheckpointError) as err:
            problems.append(f"{candidate.name}: {err}")
            continue
        for problem in problems:
            print(f"rltui: warning: skipped damaged checkpoint {problem}", file=sys.stderr)
        return candidate, data, metadata
    raise LaunchError(f"{flag}: {'; '.join(problems)}")


def _resume_run_dir(checkpoint_path: Path) -> Path:
    parent = checkpoint_path.parent
    return parent.parent if parent.name == "checkpoints" else parent


def launch(args, spec=None) -> int:
    """`spec`: a `multiprocess.DistributedSpec` when this is one process of a multi-process run."""
    try:
        config, resume = _config_and_resume(args)
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
        print("rltui: warning: --theme has no effect without the dashboard", file=sys.stderr)
    theme = None
    if not headless:
        try:
            from rltui.ui.themes import check_theme

            theme = check_theme(args.theme)
        except ValueError as err:
            return _error(str(err))

    from rltui import runtime

    runtime.configure_jax(host_devices=config.devices, compile_cache=not args.no_compile_cache)
    if spec is not None:
        from rltui import multiprocess

        multiprocess.initialize(spec)  # before any other JAX use
    runtime.start_backend(runtime.resolve_cpu_threads(config, multi_process=spec is not None))
    try:
        devices = multiprocess.select_devices(config.devices) if spec else runtime.select_devices(config.devices)
        check_devices(config, len(devices))
    except (ConfigError, ValueError) as err:
        return _error(str(err))
    if spec is not None and not spec.writer:
        return _run_peer(config, devices, spec)

    from rltui.rundir import prepare_run_dir, write_config

    try:
        if resume is not None:
            path, _, metadata = resume
            run_dir = _resume_run_dir(path)
            if args.run_dir and Path(args.run_dir).resolve() != run_dir.resolve():
                run_dir = prepare_run_dir(config, args.run_dir)  # a new directory, as for a new run
            write_config(run_dir, config)
            from rltui.session.recorder import truncate_metrics

            truncate_metrics(run_dir, int(metadata["update"]))
        else:
            run_dir = prepare_run_dir(config, args.run_dir, name=args.name)
            if args.name and not args.run_dir and run_dir.name != args.name:
                print(f"rltui: {run_dir.with_name(args.name)} already exists; this run writes to {run_dir}",
                      file=sys.stderr)
    except (ConfigError, OSError) as err:
        return _error(str(err))
    session, recorder = build_session(config, devices, run_dir, resume[1] if resume else None, spec)
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
            # and interpreter shutdown would abort under it. Run files are flushed per chunk.
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
    from rltui.session.control_server import ControlServer, ControlServerError

    server = ControlServer(session, run_dir, config=config.to_toml_dict())
    try:
        server.start()
    except ControlServerError as err:
        print(f"rltui: warning: control socket: {err}; rltui attach is off for this run", file=sys.stderr)
        return None
    return server


def build_session(config: RunConfig, devices: list, run_dir: Path | None, resume_data: bytes | None, spec=None):
    """`run_dir` None: a peer process of a multi-process run, which records nothing."""
    from rltui.session import TrainingSession
    from rltui.session.backend import JaxBackend
    from rltui.session.checkpoints import CheckpointPolicy, CheckpointStore
    from rltui.session.distributed import PeerCheckpoints, ProcessSync
    from rltui.session.recorder import RunRecorder

    backend = JaxBackend(config.static_config(), config.seed, devices)
    store = CheckpointStore.for_run(run_dir, keep=config.keep_checkpoints) if run_dir else PeerCheckpoints()
    session = TrainingSession(
        backend,
        config.dynamic_hparams(),
        config.total_updates,
        chunk_seconds=config.chunk_seconds,
        checkpoints=store,
        checkpoint_policy=CheckpointPolicy(
            every_updates=config.checkpoint_every_updates,
            every_minutes=config.checkpoint_minutes,
            keep=config.keep_checkpoints,
        ),
        run_metadata={"config": config.to_toml_dict()},
        resume=resume_data,
        sync=ProcessSync(spec.process_id) if spec else None,
    )
    if run_dir is None:
        return session, None
    recorder = RunRecorder(run_dir)
    session.add_listener(recorder)
    return session, recorder


def _error(message: str) -> int:
    print(f"rltui: error: {message}", file=sys.stderr)
    return EXIT_USAGE


