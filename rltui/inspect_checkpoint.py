"""`rltui eval` and `rltui info`: read a checkpoint as data and report on it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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


def info_record(path: Path, data: bytes, metadata: dict) -> dict[str, Any]:
    """What `rltui info` reports, as data (`--json` prints it as is). Reading never
    imports the run's env module: everything comes from the checkpoint's metadata."""
    from rltui.config import KEYS, hparams_as_config
    from trainers import checkpoint

    config = metadata.get("config") if isinstance(metadata.get("config"), dict) else {}
    algo = config.get("algo", metadata.get("trainer"))
    applies = {name for name, key in KEYS.items() if key.reads(algo)} if algo else set(KEYS)
    hparams = hparams_as_config(metadata.get("hparams", {}))
    return {
        "checkpoint": str(path),
        "checksum": "ok" if checkpoint.check(data).covers_metadata else "ok, covers the state only (older format)",
        "parameters_finite": checkpoint.params_are_finite(data),
        "trainer": metadata.get("trainer"),
        "update": metadata.get("update"),
        "env_steps": metadata.get("env_steps"),
        "elapsed_seconds": metadata.get("elapsed"),
        "reason": metadata.get("reason"),
        "created": metadata.get("created"),
        "device_kind": metadata.get("device_kind"),
        "device_count": metadata.get("device_count"),
        # as they were when saved, live edits included
        "hparams": {name: value for name, value in hparams.items() if name in applies},
        # as the run started (or was last resumed), only the keys its algorithm reads
        "config": {name: value for name, value in config.items() if name in applies or name not in KEYS},
        "edits": list(metadata.get("edits", [])),
        "versions": dict(metadata.get("versions", {})),
    }


def render_info(record: dict[str, Any]) -> str:
    """`info_record` as a report: the facts first (one per line, a name then its value),
    then the hyperparameters, the configuration, the edits and the versions, in sections."""
    from rltui.ui.format import fmt_duration

    elapsed = record["elapsed_seconds"]
    elapsed_text = "—" if not isinstance(elapsed, (int, float)) else (
        f"{fmt_duration(elapsed, hours=True)} ({elapsed:,.1f} s)")
    steps = record["env_steps"]
    facts = [
        ("checkpoint", record["checkpoint"]),
        ("checksum", record["checksum"]),
        ("parameters", "finite" if record["parameters_finite"] else "contain NaN/inf (cannot be evaluated or resumed)"),
        ("trainer", record["trainer"]),
        ("update", record["update"]),
        ("env_steps", f"{steps:,}" if isinstance(steps, int) else steps),
        ("elapsed", elapsed_text),
        ("saved", f"{record['reason']} checkpoint, {record['created']}"),
        ("device", f"{record['device_kind']} x {record['device_count']}"),
    ]
    lines = [f"{name:<12} {value}" for name, value in facts]

    def section(title: str, values: dict[str, Any]) -> None:
        lines.extend(["", title])
        width = max((len(k) for k in values), default=0)
        lines.extend(f"  {k:<{width}}  {_value(v)}" for k, v in values.items())

    section("hyperparameters (when saved, live edits included)", record["hparams"])
    config = {k: v for k, v in record["config"].items() if k not in record["hparams"] and v != {}}
    section("configuration", config)
    lines.extend(["", f"edits        {len(record['edits'])}"])
    for edit in record["edits"]:
        changes = edit.get("changes") if isinstance(edit, dict) else None
        text = ", ".join(f"{k} {_value(v)}" for k, v in changes.items()) if isinstance(changes, dict) else changes
        lines.append(f"  update {edit.get('update') if isinstance(edit, dict) else '?'}: {text}")
    versions = record["versions"]
    lines.extend(["", "versions     " + ", ".join(f"{k} {v}" for k, v in sorted(versions.items()))])
    return "\n".join(lines)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_value(v)}" for k, v in value.items()) + "}"
    return str(value)


def cmd_info(args) -> int:
    from trainers.checkpoint import CheckpointError

    try:
        path, data, metadata = _load(args.path)
        record = info_record(path, data, metadata)
    except (OSError, CheckpointError) as err:
        return _fail(str(err))
    print(json.dumps(record, indent=2) if args.json else render_info(record))
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

    from trainers.env_import import EnvImportError
    from trainers.evaluate import evaluate
    from trainers.parallel import build

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
    static = parallel.trainer.static
    if static.num_agents > 1:  # every agent of a many-seeds run or a population, on the same episodes
        run = jax.vmap(run, in_axes=(0, None))
    returns = np.asarray(run((restored.params, restored.obs_stats), jax.random.PRNGKey(args.seed)))
    mode = "sampled" if args.sample else "greedy"
    print(f"{config.env}, update {metadata.get('update')}, {args.episodes} episodes ({mode}):")
    if static.num_members > 1:
        members = metadata.get("population", {}).get("members", [])
        swept = metadata.get("population", {}).get("swept", [])
        for m, member in enumerate(returns.reshape(static.num_members, static.num_seeds, -1)):
            values = members[m].get("values", {}) if m < len(members) else {}
            label = " ".join(f"{k}={values[k]:.4g}" for k in swept if k in values)
            state = members[m].get("state", "training") if m < len(members) else "training"
            print(f"  member {m} ({label}{', ' + state if state != 'training' else ''}): {_stats(member)}")
    elif static.num_seeds > 1:
        for i, agent in enumerate(returns):
            print(f"  seed {config.seed + i}: {_stats(agent)}")
    print(_stats(returns))
    return 0


def _stats(returns) -> str:
    return f"mean {returns.mean():.2f}  std {returns.std():.2f}  min {returns.min():.2f}  max {returns.max():.2f}"
