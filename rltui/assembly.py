"""What `rltui launch` and `rltui.train` both build: a run's session with its recorder,
loggers and population, its control server, and the check that its agents fit the devices."""

from __future__ import annotations

from pathlib import Path

from rltui.config.build import RunConfig
from rltui.errors import warn
from rltui.runfiles.names import METRICS


def start_control_server(session, run_dir: Path, config: RunConfig):
    """Listen on the run's control socket (`rltui attach`); None, with a warning, if it
    cannot: the run itself does not need it. The launch layer owns the server, so that
    only one process of a multi-process run will."""
    from rltui.control.server import ControlServer, ControlServerError

    server = ControlServer(session, run_dir, config=config.to_toml_dict())
    try:
        server.start()
    except ControlServerError as err:
        warn(f"control socket: {err}; rltui attach is off for this run")
        return None
    return server


def build_session(config: RunConfig, devices: list, run_dir: Path | None, resume_data: bytes | None, spec=None,
                  hparams=None, preset: dict | None = None):
    """`run_dir` None: a peer process of a multi-process run, which records nothing.
    `hparams`: the live hyperparameters to start from, if not the config's. `preset`: what
    presets.toml set for the run (`presets.applied`), kept in its checkpoints for `rltui info`."""
    from rltui.runfiles.checkpoints import CheckpointStore
    from rltui.session import TrainingSession
    from rltui.session.backend import JaxBackend
    from rltui.session.checkpoints import CheckpointPolicy
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
        session.load_history(run_dir / METRICS)
    recorder = RunRecorder(run_dir)
    session.add_listener(recorder)
    from rltui.loggers.listener import open_loggers

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
