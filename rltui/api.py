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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rltui.config import ConfigError, RunConfig, build_config
from rltui.errors import UsageError
from rltui.session.controller import SessionListener


class ApiError(UsageError):
    """Bad input to the API: the message is the one line the command line would print."""


@dataclasses.dataclass(frozen=True)
class TrainResult:
    """What a finished (or stopped) run leaves: everything is host memory, nothing on a device."""

    config: RunConfig
    run_dir: Path
    state: str  # the session's final state: "finished" or "error"
    updates: int
    env_steps: int
    params: Any  # the final network parameters (NumPy arrays; a leading agent axis with several seeds or members)
    metrics: tuple[Mapping[str, float], ...]  # one mapping per update: "update", "env_steps", then each metric
    latest_return: float | None  # mean return of the last update in which an episode ended
    error: str | None = None


def make_config(env: Any = None, *, preset: bool = True, **keys: Any) -> RunConfig:
    """A `RunConfig` from configuration keys, with `env` an env id, an import path, or an
    env object (or `(env, params)` pair) that then trains under an id of its own
    (`object:ClassName`). Presets apply to the built-in envs only."""
    if env is not None and not isinstance(env, str):
        from trainers.env_import import EnvImportError, register_env

        try:
            env = register_env(env)
        except EnvImportError as err:
            raise ApiError(str(err)) from None
    if env is not None:
        keys["env"] = env
    from rltui.loggers import check_loggers

    try:
        config = build_config({}, keys, use_preset=preset)
        check_loggers(config.loggers)  # as `rltui launch` does: a missing library is refused up front
    except ConfigError as err:
        raise ApiError(str(err)) from None
    return config


def train(
    env: Any = None,
    *,
    config: RunConfig | None = None,
    run_dir: str | Path | None = None,
    name: str | None = None,
    ui: bool = False,
    progress: bool = True,
    **keys: Any,
) -> TrainResult:
    """Train to `total_timesteps` and return the result. `config` or `env` plus keys say
    what to train; `run_dir`/`name` where the run's files go (default runs/<name>).
    `ui`: open the dashboard on the run (in a terminal) instead of training headless;
    `progress`: headless, show the progress bar on stderr. ApiError for bad input, raised
    before anything is written."""
    if config is None:
        config = make_config(env, **keys)
    elif env is not None or keys:
        raise ApiError("train: pass either config or env and keys, not both")

    from rltui import runtime
    from rltui.check_env import preflight
    from trainers.envs import is_builtin

    runtime.configure_jax(host_devices=config.devices, compile_cache=True)
    try:
        devices = runtime.select_devices(config.devices)
        from rltui.config import check_devices

        check_devices(config, len(devices))
        if not is_builtin(config.env):
            preflight(config.static_config().env_id, config.network)
        from rltui.launch import check_agents_fit

        check_agents_fit(config, devices)
    except (ConfigError, UsageError, ValueError) as err:
        raise ApiError(str(err)) from None

    from rltui.launch import build_session, start_control_server
    from rltui.rundir import prepare_run_dir

    try:
        directory = prepare_run_dir(config, str(run_dir) if run_dir is not None else None, name=name)
    except (ConfigError, OSError) as err:
        raise ApiError(str(err)) from None
    session, recorder = build_session(config, devices, directory, None)
    records = _Records()
    session.add_listener(records)
    server = start_control_server(session, directory, config)
    try:
        if ui:
            from rltui.ui.runner import run_dashboard

            run_dashboard(session, config, directory)
        elif progress:
            from rltui.headless import run_headless

            run_headless(session, directory, attachable=server is not None)
        else:
            session.start()
            session.join()
    finally:
        if server is not None:
            server.close()
        recorder.close()
    return _result(config, directory, session, records)


class _Records(SessionListener):
    """Keeps every update's metrics."""

    def __init__(self) -> None:
        self.rows: list[dict[str, float]] = []
        self.latest_return: float | None = None

    def on_metrics(self, snapshot) -> None:
        for record in snapshot.new_records:
            self.rows.append({"update": record.update, "env_steps": record.env_steps, **record.values})
        latest = snapshot.latest_return
        if latest is not None:
            self.latest_return = latest


def _result(config: RunConfig, directory: Path, session, records: _Records) -> TrainResult:
    import jax

    params = None
    state = session.backend.train_state
    if state is not None:
        params = jax.tree.map(lambda x: jax.device_get(x)[0], state.params)  # the device axis dropped
    return TrainResult(
        config=config,
        run_dir=directory,
        state=session.state.value,
        updates=session.updates_done,
        env_steps=session.env_steps,
        params=params,
        metrics=tuple(records.rows),
        latest_return=records.latest_return,
        error=session.error,
    )
