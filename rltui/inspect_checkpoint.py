"""`rltui eval` and `rltui info`: read a checkpoint as data and report on it."""

from __future__ import annotations

import json
from pathlib import Path

from rltui.errors import report


def _load(path_arg: str) -> tuple[Path, bytes, dict]:
    from rltui.launch import LaunchError, load_verified_checkpoint
    from trainers.checkpoint import CheckpointError

    try:
        return load_verified_checkpoint(Path(path_arg), "checkpoint")
    except LaunchError as err:
        raise CheckpointError(str(err)) from None


def _fail(message: str) -> int:
    return report(message)


def cmd_info(args) -> int:
    from trainers import checkpoint
    from trainers.checkpoint import CheckpointError

    try:
        path, data, metadata = _load(args.path)
        covers_metadata = checkpoint.check(data).covers_metadata
        finite = checkpoint.params_are_finite(data)
    except (OSError, CheckpointError) as err:
        return _fail(str(err))
    print(f"checkpoint   {path}")
    print("checksum     " + ("ok" if covers_metadata else "ok, covers the state only (older format)"))
    print("parameters   " + ("finite" if finite else "contain NaN/inf (cannot be evaluated or resumed)"))
    for key in ("trainer", "update", "env_steps", "elapsed", "reason", "created", "device_kind", "device_count"):
        print(f"{key:<12} {metadata.get(key)}")
    from rltui.config import hparams_as_config

    # as they were when saved, live edits included; the config line has the run's start values
    print("hparams      " + json.dumps(hparams_as_config(metadata.get("hparams", {})), sort_keys=True))
    print("static       " + json.dumps(metadata.get("static", {}), sort_keys=True))
    print("config       " + json.dumps(metadata.get("config", {}), sort_keys=True))
    print("versions     " + json.dumps(metadata.get("versions", {}), sort_keys=True))
    edits = metadata.get("edits", [])
    print(f"edits        {len(edits)}")
    for edit in edits:
        print(f"  update {edit.get('update')}: {json.dumps(edit.get('changes'), sort_keys=True)}")
    return 0


def cmd_eval(args) -> int:
    from rltui.config import (
        INT32_MAX,
        ConfigError,
        IntRange,
        build_config,
        check_integer,
        int_range,
    )
    from trainers import checkpoint
    from trainers.checkpoint import CheckpointError

    try:
        # --seed becomes a PRNG key as a run's seed does; --episodes is an int32 batch size.
        check_integer("--seed", args.seed, int_range("seed"))
        check_integer("--episodes", args.episodes, IntRange(1, INT32_MAX))
    except ConfigError as err:
        return _fail(str(err))
    try:
        path, data, metadata = _load(args.path)
        if not checkpoint.params_are_finite(data):  # before JAX starts: nothing to evaluate
            raise CheckpointError(checkpoint.NON_FINITE_MESSAGE)
    except (OSError, CheckpointError) as err:
        return _fail(str(err))

    from rltui import runtime

    try:
        config = build_config(metadata.get("config", {}), use_preset=False)
    except ConfigError as err:
        return _fail(f"checkpoint config: {err}")
    runtime.configure_jax(host_devices=0, compile_cache=True)
    import jax
    import numpy as np

    from trainers.evaluate import evaluate
    from trainers.parallel import build

    from trainers.env_import import EnvImportError

    try:
        parallel = build(config.static_config(), jax.local_devices()[:1])
    except EnvImportError as err:  # an env by import path whose module is not importable here
        return _fail(f"eval: the run's env {config.env} cannot be built here: {str(err).removeprefix('env: ')}")
    trainer = parallel.trainer
    template = checkpoint.to_portable(parallel.init(parallel.seed_keys(0), config.dynamic_hparams()))
    try:
        restored, _ = checkpoint.decode(data, template)
    except CheckpointError as err:
        return _fail(str(err))
    # The policy acts on raw observations, normalised by the checkpoint's statistics if any.
    run = jax.jit(lambda acting, key: evaluate(acting, key, spec=trainer.spec, step_fn=trainer.act_step,
                                               initial_hidden=trainer.initial_hidden(args.episodes),
                                               episodes=args.episodes, greedy=not args.sample))
    if config.num_seeds > 1:  # every agent of a many-seeds run, on the same episodes
        run = jax.vmap(run, in_axes=(0, None))
    returns = np.asarray(run((restored.params, restored.obs_stats), jax.random.PRNGKey(args.seed)))
    mode = "sampled" if args.sample else "greedy"
    print(f"{config.env}, update {metadata.get('update')}, {args.episodes} episodes ({mode}):")
    if config.num_seeds > 1:
        for i, agent in enumerate(returns):
            print(f"  seed {config.seed + i}: {_stats(agent)}")
    print(_stats(returns))
    return 0


def _stats(returns) -> str:
    return f"mean {returns.mean():.2f}  std {returns.std():.2f}  min {returns.min():.2f}  max {returns.max():.2f}"
