"""The Python API: train from a script or a notebook, with an env object or any env id.

    from rltui import api
    result = api.train(env=MyEnv(), total_timesteps=50_000, num_envs=8)
    result.latest_return, result.params, result.run_dir

Keys are the configuration file's (`rltui launch --help` lists them). The API is one more
client of the training session, as the dashboard and `--no-ui` are: the same run directory
(config.toml, metrics.jsonl, checkpoints), the same control socket (`rltui attach`).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rltui.config.build import RunConfig, build_config, no_learning_notice, unread_notice
from rltui.config.keys import ConfigError
from rltui.errors import UsageError
from rltui.runfiles.names import METRICS
from rltui.session.controller import SessionListener


class ApiError(UsageError):
    """Bad input to the API: the message is the one line the command line would print."""


NO_TERMINAL = "rltui: ui=True needs a terminal on standard input and output; training headless, as with ui=False"


@dataclasses.dataclass(frozen=True, repr=False)
class TrainResult:
    """What a run that ended leaves: everything is host memory, nothing on a device."""

    config: RunConfig
    run_dir: Path
    state: str  # how the run ended, in `rltui runs`' words: "finished", "stopped", "diverged" or "crashed"
    updates: int
    env_steps: int
    params: Any  # the final network parameters (NumPy arrays; a leading agent axis with several seeds or members)
    metrics: tuple[Mapping[str, Any], ...]  # one mapping per update: each line of metrics.jsonl, as JSON reads it
    latest_return: float | None  # mean return of the last update in which an episode ended
    error: str | None = None  # why a "diverged" or "crashed" run ended; None otherwise

    def __repr__(self) -> str:
        latest = None if self.latest_return is None else round(self.latest_return, 3)
        error = "" if self.error is None else f", error={self.error!r}"
        return (f"TrainResult(state={self.state!r}, updates={self.updates}, env_steps={self.env_steps}, "
                f"latest_return={latest!r}, run_dir={str(self.run_dir)!r}{error})")


def make_config(env: Any = None, *, preset: bool = True, **keys: Any) -> RunConfig:
    """A `RunConfig` from configuration keys, with `env` an env id, an import path, or an
    env object (or `(env, params)` pair) that then trains under an id of its own
    (`object:ClassName`). Presets apply to the built-in envs only."""
    if env is not None:
        keys["env"] = _env_id(env)
    from rltui.loggers.base import check_loggers

    try:
        config = build_config({}, keys, use_preset=preset)
        check_loggers(config.loggers)  # as `rltui launch` does: a missing library is refused up front
    except ConfigError as err:
        raise ApiError(str(err)) from None
    return config


def _env_id(env: Any) -> str:
    """`env` as an env id: a string as it is; an env object registered, under an id of its own."""
    if isinstance(env, str):
        return env
    _check_env_object(env)
    from trainers.env_import import EnvImportError, register_env

    try:
        return register_env(env)
    except EnvImportError as err:
        raise ApiError(str(err)) from None


def _check_env_object(env: Any) -> None:
    """An object with neither a reset nor a step method was not meant as an env at all."""
    obj = env[0] if isinstance(env, tuple) and len(env) == 2 else env
    if not (callable(getattr(obj, "reset", None)) or callable(getattr(obj, "step", None))):
        shown = repr(obj) if len(repr(obj)) <= 40 else f"a {type(obj).__name__}"
        raise ApiError(
            f"env: must be an env id (a string: 'CartPole-v1', 'my_pkg.envs:make_env') or an env object with "
            f"reset and step methods (or an (env, params) pair); got {shown}"
        )


def _with_keys(config: RunConfig, env: Any, keys: dict[str, Any]) -> RunConfig:
    """`config` with `env` and `keys` over it, validated as a new config is (no preset)."""
    if env is None and not keys:
        return config
    base = config.to_toml_dict()
    before = base.pop("env")
    if env is not None:
        base.pop("env_kwargs", None)  # another env: the old one's arguments do not carry over
    return make_config(env if env is not None else before, preset=False, **{**base, **keys})


def _api_words(message: str) -> str:
    """A message from the run-directory and resume checks, naming the keyword rather than the flag."""
    for flag, keyword in (("--run-dir: ", "run_dir: "), ("--name: ", "name: "), ("--resume: ", "resume: ")):
        if message.startswith(flag):
            message = keyword + message[len(flag):]
    return message.replace("with --run-dir DIR", "with run_dir=DIR").replace("e.g. --set ", "e.g. ")


def _resume_plan(resume: str | Path, env: Any, config: RunConfig | None, run_dir, name, keys: dict[str, Any]):
    """For `train(resume=...)`, as `rltui launch --resume` does: the verified checkpoint (its
    recorded env replaced by `env` for a run on an env object), where the run goes on, and
    its config, `keys` over the checkpoint's as `--set` goes. ApiError, nothing written."""
    import types

    from rltui.errors import LaunchError
    from rltui.runfiles.checkpoints import load_verified_checkpoint
    from rltui.runfiles.rundir import check_not_in_use
    from rltui.session.resume import resume_target, resumed_config
    from trainers.env_import import is_object_id

    if config is not None:
        raise ApiError("config: not with resume (the checkpoint holds the run's config; give keys to change it)")
    if name is not None:
        raise ApiError("name: not with resume (a resume goes on in the checkpoint's run directory, or in run_dir)")
    try:
        checkpoint = load_verified_checkpoint(Path(resume), "--resume")
        target = resume_target(types.SimpleNamespace(run_dir=run_dir), checkpoint.path)
        if not target.new:
            check_not_in_use(target.run_dir)
        recorded = dict(checkpoint.metadata.get("config", {}))
        was = str(recorded.get("env", ""))
        if is_object_id(was):
            # Only the process that had the object could build it: this one's env stands in,
            # under the id this process gives it (`object:Bandit#2` when another came first).
            if env is None:
                raise ApiError(f"env: {resume} trained on an env object ({was}), which only the process "
                               f"that had it can build; hand it over again: rltui.train(env=<your env>, resume=...)")
            recorded["env"] = _env_id(env)
            if "env_kwargs" in keys:
                recorded["env_kwargs"] = keys.pop("env_kwargs")
            checkpoint = checkpoint._replace(metadata={**checkpoint.metadata, "config": recorded})
        elif env is not None:
            keys["env"] = _env_id(env)  # the same env, or refused: it cannot change on a resume
        from rltui.loggers.base import check_loggers

        config = resumed_config(checkpoint, keys)
        check_loggers(config.loggers)
    except (ConfigError, LaunchError) as err:
        raise ApiError(_api_words(str(err))) from None
    return config, checkpoint, target


def train(
    env: Any = None,
    *,
    config: RunConfig | None = None,
    run_dir: str | Path | None = None,
    name: str | None = None,
    resume: str | Path | None = None,
    ui: bool = False,
    progress: bool = True,
    **keys: Any,
) -> TrainResult:
    """Train to `total_timesteps` and return the result. `env` plus keys, or `config` (with
    `env` and keys, if given, over it) say what to train; `run_dir`/`name` where the run's
    files go (default runs/<name>). `ui`: open the dashboard on the run instead of training
    headless; without a terminal (a notebook, redirected output) a warning says so and the
    run trains headless. `progress`: headless, show the progress bar on stderr. `resume`: a
    run directory (its latest checkpoint) or a checkpoint file to go on from, as `rltui
    launch --resume` does, keys over its config as `--set` goes; `env` may be left out unless
    the run trained on an env object, which must be handed over again. ApiError for bad
    input, raised before anything is written."""
    checkpoint = target = None
    if resume is not None:
        config, checkpoint, target = _resume_plan(resume, env, config, run_dir, name, keys)
    else:
        config = make_config(env, **keys) if config is None else _with_keys(config, env, keys)
    if ui:
        from rltui.ui import can_show_dashboard

        if not can_show_dashboard():
            warnings.warn(NO_TERMINAL, RuntimeWarning, stacklevel=2)
            ui = False

    from rltui.commands.check_env import preflight
    from rltui.infra import runtime
    from trainers.envs import is_builtin

    runtime.configure_jax(host_devices=config.devices, compile_cache=True)
    try:
        devices = runtime.select_devices(config.devices)
        from rltui.config.build import check_devices

        check_devices(config, len(devices))
        if not is_builtin(config.env):
            preflight(config.static_config().env_id, config.network)
        from rltui.assembly import check_agents_fit

        check_agents_fit(config, devices)
    except (ConfigError, UsageError, ValueError) as err:
        raise ApiError(str(err)) from None

    from rltui.assembly import build_session, start_control_server
    from rltui.runfiles.rundir import prepare_run_dir
    from rltui.session.resume import apply_resume, prepare_resume

    prepared = None
    try:
        if checkpoint is not None:
            prepared = prepare_resume(config, checkpoint, target, keys)
            directory = prepared.run_dir
        else:
            directory = prepare_run_dir(config, str(run_dir) if run_dir is not None else None, name=name)
    except (ConfigError, UsageError, OSError) as err:
        raise ApiError(_api_words(str(err))) from None
    # Said once the run can start: a run refused is told why, not what it would have done.
    for notice in (unread_notice(config, keys), no_learning_notice(config) if resume is None else None):
        if notice is not None:
            warnings.warn(notice, UserWarning, stacklevel=2)
    hparams = prepared.changes.hparams_before if prepared is not None else None
    for notice in prepared.notices(checkpoint.metadata) if prepared is not None else ():
        warnings.warn(notice, UserWarning, stacklevel=2)
    from rltui.session.recorder import RunFileError

    try:
        session, recorder = build_session(config, devices, directory, checkpoint.data if checkpoint else None, None,
                                          hparams)
    except RunFileError as err:  # a run file it cannot open (one that is not a regular file)
        raise ApiError(str(err)) from None
    if prepared is not None:
        apply_resume(session, recorder, prepared, checkpoint.metadata)
    records = _Records()
    if prepared is not None:
        records.load(directory / METRICS)  # the run's updates before the checkpoint
    session.add_listener(records)
    server = start_control_server(session, directory, config)
    try:
        if ui:
            from rltui.ui.runner import run_dashboard

            run_dashboard(session, config, directory)
            # A dashboard given up on during the compile returns first: this process goes
            # on, so it waits for the session's last chunk, checkpoint and events.
            _join_through_interrupts(session)
        elif progress:
            from rltui.headless import run_headless

            run_headless(session, directory, attachable=server is not None, second_interrupt_quits=False)
        else:
            from rltui.headless import StopOnNonFinite

            session.add_listener(StopOnNonFinite(session))  # nobody to lower the learning rate: stop
            session.start()
            _join_through_interrupts(session)
    finally:
        if server is not None:
            server.close()
        recorder.close()
    return _result(config, directory, session, records)


def export_policy(source: str | Path, path: str | Path, *, agent: int | None = None) -> Path:
    """Write the policy of `source` (a run directory, meaning its latest checkpoint, or a
    checkpoint file) to `path`, which must not exist yet, as `rltui export SOURCE --policy
    PATH` does: `rltui.load_policy(path)` reads it back, in any process. In the process that
    trained on an env object, that object's run exports too. `agent`: with several seeds or a
    population, whose policy (member-major). ApiError, before anything is written, for
    anything that cannot be exported."""
    from rltui.runfiles.policy_export import policy_from_checkpoint

    path = Path(path)
    if path.exists():
        raise ApiError(f"path: {path} already exists; give another file, or remove it first")
    try:
        exported = policy_from_checkpoint(Path(source), agent)
    except UsageError as err:
        raise ApiError(_api_words(str(err)).replace("--agent", "agent")) from None
    try:
        path.write_bytes(exported.data)
    except OSError as err:
        raise ApiError(f"path: cannot write {path}: {err.strerror or err}") from None
    return path


_INTERRUPT_POLL_SECONDS = 0.2


def _join_through_interrupts(session) -> None:
    """Waits for the session to end. Ctrl+C, however often, stops it at the next chunk
    boundary, as the progress bar does: the run's files close only after its last event.

    The wait has a timeout, in a loop: the kernel may hand a process's SIGINT to any of its
    threads (the session's, XLA's), and Python then only notes it, for the main thread to
    act on; a wait without a timeout would not wake up for it until the run ended."""
    while True:
        try:
            if session.join(_INTERRUPT_POLL_SECONDS):
                return
        except KeyboardInterrupt:
            session.stop()


class _Records(SessionListener):
    """Keeps every update's metrics, as metrics.jsonl has them, and the session's events."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []
        self.latest_return: float | None = None

    def load(self, path: Path) -> None:
        from rltui.infra.read_limits import read_lines
        from trainers.json_text import loads

        try:
            for line in read_lines(path):
                try:
                    row = loads(line) if line is not None else None
                except ValueError:
                    continue  # a line damaged, or too long to read
                if isinstance(row, dict) and "update" in row:
                    self.rows.append(row)
        except OSError:
            pass  # no history: the metrics start at the checkpoint, as the curves do

    def on_metrics(self, snapshot) -> None:
        for record in snapshot.new_records:
            self.rows.append(record.to_json())
        latest = snapshot.latest_return
        if latest is not None:
            self.latest_return = latest

    def on_event(self, event) -> None:
        self.events.append({"kind": event.kind, "message": event.message, "update": event.update})


def _result(config: RunConfig, directory: Path, session, records: _Records) -> TrainResult:
    import jax

    params = None
    state = session.backend.train_state
    if state is not None:
        params = jax.tree.map(lambda x: jax.device_get(x)[0], state.params)  # the device axis dropped
    from rltui.runfiles.discovery import state_of

    ended = state_of(records.events, live=False)
    error = None
    if ended.name == "diverged":
        update = next((e["update"] for e in reversed(records.events) if e["kind"] == "nonfinite"), session.updates_done)
        error = f"non-finite loss or gradient at update {update}; stopped"
    elif ended.name == "crashed":
        error = session.error or ended.detail
    return TrainResult(
        config=config,
        run_dir=directory,
        state=ended.name,
        updates=session.updates_done,
        env_steps=session.env_steps,
        params=params,
        metrics=tuple(records.rows),
        latest_return=records.latest_return,
        error=error,
    )
