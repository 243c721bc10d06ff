"""`rltui eval` and `rltui info`: read a checkpoint as data and report on it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rltui.commands import check_member
from rltui.config.keys import POPULATION_KEYS
from rltui.errors import ExitCode, report


def _load(path_arg: str, command: str | None = None) -> tuple[Path, bytes, dict]:
    """The checkpoint PATH names (a file, or a run directory's latest). `command` ("info",
    "eval") words the hint for a folder of runs."""
    from rltui.errors import LaunchError
    from rltui.runfiles.checkpoints import load_verified_checkpoint
    from trainers.checkpoint import CheckpointError

    try:
        return load_verified_checkpoint(Path(path_arg), "checkpoint", command)
    except LaunchError as err:
        raise CheckpointError(str(err)) from None


def _fail(message: str) -> int:
    return report(message)


def info_record(path: Path, data: bytes, metadata: dict) -> dict[str, Any]:
    """What `rltui info` reports, as data (`--json` prints it as is). Reading never
    imports the run's env module: everything comes from the checkpoint's metadata."""
    from rltui.config.build import hparams_as_config
    from rltui.config.keys import KEYS
    from trainers import checkpoint

    config = metadata.get("config") if isinstance(metadata.get("config"), dict) else {}
    algo = config.get("algo", metadata.get("trainer"))
    # Older checkpoints do not say their action space: their keys all show.
    actions = metadata.get("actions")
    applies = {name for name, key in KEYS.items() if key.matters_for(algo, actions)}
    hparams = hparams_as_config(metadata.get("hparams", {}))
    return {
        "checkpoint": str(path),
        "checksum": "ok" if checkpoint.check(data).covers_metadata else "ok, covers the state only (older format)",
        "parameters_finite": checkpoint.params_are_finite(data),
        "trainer": metadata.get("trainer"),
        "actions": actions,
        "update": metadata.get("update"),
        "env_steps": metadata.get("env_steps"),
        "elapsed_seconds": metadata.get("elapsed"),
        "reason": metadata.get("reason"),
        "created": metadata.get("created"),
        "device_kind": metadata.get("device_kind"),
        "device_count": metadata.get("device_count"),
        # what presets.toml set for the run (`rltui.config.presets.applied`), where it set anything
        "preset": metadata.get("preset"),
        # as they were when saved, live edits included
        "hparams": {name: value for name, value in hparams.items() if name in applies},
        # as the run started (or was last resumed), only the keys its algorithm reads
        "config": {name: value for name, value in config.items() if name in applies or name not in KEYS},
        "edits": list(metadata.get("edits", [])),
        "versions": dict(metadata.get("versions", {})),
        "population": population_record(metadata.get("population"), config, applies,
                                        ended=how_it_ended(metadata, config)),
    }


def how_it_ended(metadata: dict[str, Any], config: dict[str, Any]) -> str | None:
    """For a run's final checkpoint: "finished" when it reached its total_timesteps (in
    whole updates, as launch counts them), else "stopped"; None for any other checkpoint."""
    if metadata.get("reason") != "final":
        return None
    update, steps, total = metadata.get("update"), metadata.get("env_steps"), config.get("total_timesteps")
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (update, steps, total)):
        return "finished"  # cannot tell: as the checkpoint says, its final
    return "finished" if update >= max(1, total // max(1, steps // update)) else "stopped"


PBT_KEYS = tuple(name for name in POPULATION_KEYS if name.startswith("pbt_"))


def population_record(saved: Any, config: dict[str, Any], applies: set[str], *,
                      ended: str | None = None) -> dict[str, Any] | None:
    """A population's members as the checkpoint saved them (None for one configuration):
    `keys` are the hyperparameters that differ between members (the swept ones first),
    each member's `values` every hyperparameter it trains with (config names and values).
    In a run's final checkpoint (`ended`: "finished" at its total, or "stopped" before it) a
    member still training when the run ended is in that state."""
    from rltui.config.build import hparams_as_config

    if not isinstance(saved, dict) or not isinstance(saved.get("members"), list):
        return None
    members = []
    for m, member in enumerate(saved["members"]):
        member = member if isinstance(member, dict) else {}
        values = member.get("values") if isinstance(member.get("values"), dict) else {}
        members.append({
            "member": m,
            "values": {k: v for k, v in hparams_as_config(values).items() if k in applies},
            "state": ended if ended and member.get("state", "training") == "training"
            else member.get("state", "training"),
            "parent": member.get("parent"),
            "latest_return": member.get("latest_return"),
            "best_return": member.get("best_return"),
            "eval_return": member.get("eval_return"),
        })
    swept = [k for k in saved.get("swept", []) if isinstance(k, str)]
    names = dict.fromkeys([*swept, *(k for member in members for k in member["values"])])
    keys = [k for k in names if k in swept or len({repr(member["values"].get(k)) for member in members}) > 1]
    latest = {member["member"]: member["latest_return"] for member in members
              if isinstance(member["latest_return"], (int, float))}
    pbt = {k: config[k] for k in PBT_KEYS if k in config}
    return {
        "num_members": len(members),
        "num_seeds": saved.get("num_seeds"),
        "swept": swept,
        "keys": keys,
        "sweep": config.get("sweep") if isinstance(config.get("sweep"), dict) else {},
        "pbt": pbt if pbt.get("pbt_every_updates") else {},
        "best_member": max(latest, key=lambda m: (latest[m], -m)) if latest else None,
        "members": members,
    }


def render_info(record: dict[str, Any]) -> str:
    """`info_record` as a report: the facts first (one per line, a name then its value),
    then the hyperparameters, the configuration, the edits and the versions, in sections."""
    from rltui.config.build import hparams_as_config
    from rltui.config.toml_text import show_setting
    from rltui.formatting import fmt_duration

    elapsed = record["elapsed_seconds"]
    elapsed_text = "—" if not isinstance(elapsed, (int, float)) else (
        f"{fmt_duration(elapsed, hours=True)} ({elapsed:,.1f} s)")
    steps = record["env_steps"]
    facts = [
        ("checkpoint", record["checkpoint"]),
        ("checksum", record["checksum"]),
        ("parameters", "finite" if record["parameters_finite"] else "contain NaN/inf (cannot be evaluated or resumed)"),
        ("trainer", record["trainer"]),
        *([("actions", record["actions"])] if record.get("actions") else []),
        ("update", record["update"]),
        ("env_steps", f"{steps:,}" if isinstance(steps, int) else steps),
        ("elapsed", elapsed_text),
        ("saved", f"{record['reason']} checkpoint, {record['created']}"),
        ("device", f"{record['device_kind']} x {record['device_count']}"),
    ]
    preset = record.get("preset")
    if preset:
        from rltui.config.presets import describe

        settings = ", ".join(f"{k} {show_setting(v)}" for k, v in preset["settings"].items())
        facts.append(("preset", f"{describe(preset)}: {settings}"))
    lines = [f"{name:<12} {value}" for name, value in facts]

    def section(title: str, values: dict[str, Any]) -> None:
        lines.extend(["", title])
        width = max((len(k) for k in values), default=0)
        lines.extend(f"  {k:<{width}}  {show_setting(v)}" for k, v in values.items())

    population = record.get("population")
    hparams = record["hparams"]
    if population:
        # Each member trains with its own values of these: the run's base value would mislead.
        hparams = {k: ("per member, below" if k in population["keys"] else v) for k, v in hparams.items()}
    section("hyperparameters (when saved, live edits included)", hparams)
    config = {k: v for k, v in record["config"].items() if k not in record["hparams"] and v != {}}
    section("configuration", config)
    if population:
        lines.extend(["", *render_population(population)])
    lines.extend(["", f"edits        {len(record['edits'])}"])
    for edit in record["edits"]:
        changes = edit.get("changes") if isinstance(edit, dict) else None
        text = ", ".join(f"{k} {show_setting(hparams_as_config({k: v}).get(k, v))}" for k, v in changes.items()) \
            if isinstance(changes, dict) else changes
        chosen = edit.get("members") if isinstance(edit, dict) else None
        if isinstance(chosen, list):
            text = f"{text} (member{'s' if len(chosen) != 1 else ''} {', '.join(map(str, chosen))})"
        lines.append(f"  update {edit.get('update') if isinstance(edit, dict) else '?'}: {text}")
    versions = record["versions"]
    lines.extend(["", "versions     " + ", ".join(f"{k} {v}" for k, v in sorted(versions.items()))])
    return "\n".join(lines)


def render_population(population: dict[str, Any]) -> list[str]:
    """The population's lines: its size, sweep and PBT, then one row per member."""
    from rltui.config.toml_text import show_setting

    seeds = population["num_seeds"]
    lines = [f"population   {population['num_members']} members x {seeds} seed{'s' if seeds != 1 else ''}"]
    if population["sweep"]:
        lines.append("  sweep      " + ", ".join(f"{k} {show_setting(v)}" for k, v in population["sweep"].items()))
    if population["pbt"]:
        lines.append("  pbt        " + ", ".join(f"{k.removeprefix('pbt_')} {show_setting(v)}"
                                                 for k, v in population["pbt"].items() if v != []))
    evaluated = any(member["eval_return"] is not None for member in population["members"])
    header = ["member", *population["keys"], "state", "parent", "latest", "best", *(["eval"] if evaluated else [])]
    rows = []
    for member in population["members"]:
        best = " *" if member["member"] == population["best_member"] else ""
        rows.append([f"{member['member']}{best}",
                     *(show_setting(member["values"].get(k, "—")) for k in population["keys"]),
                     member["state"], "—" if member["parent"] is None else str(member["parent"]),
                     _return(member["latest_return"]), _return(member["best_return"]),
                     *([_return(member["eval_return"])] if evaluated else [])])
    widths = [max(len(c) for c in column) for column in zip(header, *rows)]
    for row in [header, *rows]:
        lines.append("  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    if population["best_member"] is not None:
        lines.append("  * the best latest return")
    return lines


def _return(value: Any) -> str:
    return f"{value:.1f}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "—"


def cmd_info(args) -> int:
    from trainers.checkpoint import CheckpointError

    try:
        path, data, metadata = _load(args.path, "info")
        record = info_record(path, data, metadata)
    except (OSError, CheckpointError) as err:
        return _fail(str(err))
    print(json.dumps(record, indent=2) if args.json else render_info(record))
    return ExitCode.OK


def cmd_eval(args) -> int:
    from rltui.config.build import build_config
    from rltui.config.keys import ConfigError, check_integer, int_range
    from trainers import checkpoint
    from trainers.algorithms import algorithm
    from trainers.checkpoint import CheckpointError
    from trainers.keys import INT32_MAX, IntRange

    try:
        # --seed becomes a PRNG key as a run's seed does; --episodes is an int32 batch size.
        check_integer("--seed", args.seed, int_range("seed"))
        check_integer("--episodes", args.episodes, IntRange(1, INT32_MAX))
        if args.member is not None:
            check_integer("--member", args.member, IntRange(0, INT32_MAX))
    except ConfigError as err:
        return _fail(str(err))
    try:
        path, data, metadata = _load(args.path, "eval")
        if not checkpoint.params_are_finite(data):  # before JAX starts: nothing to evaluate
            raise CheckpointError(checkpoint.NON_FINITE_MESSAGE)
    except (OSError, CheckpointError) as err:
        return _fail(str(err))

    from rltui.infra import runtime
    try:
        config = build_config(metadata.get("config", {}), use_preset=False)
    except ConfigError as err:
        return _fail(f"checkpoint config: {err}")
    runtime.configure_jax(host_devices=0, compile_cache=True)
    import jax
    import numpy as np

    from rltui.config.memory import check_evaluation_fits, tree_bytes
    from rltui.errors import UsageError
    from rltui.runfiles.checkpoints import portable_template, state_shapes
    from rltui.watch.params import acting_template
    from trainers.env_import import EnvImportError
    from trainers.evaluate import evaluate
    from trainers.parallel import build

    try:
        parallel = build(config.static_config(), jax.local_devices()[:1])
    except EnvImportError as err:  # an env by import path whose module is not importable here
        return _fail(f"eval: the run's env {config.env} cannot be built here: {str(err).removeprefix('env: ')}")
    trainer = parallel.trainer
    static = trainer.static
    try:
        check_member(args.member, static.num_members)
    except UsageError as err:
        return report(err)

    # A Q-learner's sampled actions explore at the rate its run ends with (its algorithm says).
    exploration = algorithm(config.algo).sample_epsilon(config)

    def compile_for(episodes: int):
        """The evaluation of `episodes` at once, compiled from shapes: nothing allocated."""
        def run(acting, key):  # the policy acts on raw observations, normalised by the checkpoint's statistics
            return evaluate(acting, key, spec=trainer.spec, step_fn=trainer.act_step,
                            initial_hidden=trainer.initial_hidden(episodes), episodes=episodes,
                            greedy=not args.sample, epsilon=exploration)

        if static.num_agents > 1:  # every agent of a many-seeds run or a population, on the same episodes
            run = jax.vmap(run, in_axes=(0, None))
        return jax.jit(run).lower(acting_template(config, parallel), key).compile()

    key = jax.random.PRNGKey(args.seed)
    # The state's size is traced, and XLA counts the evaluation's memory, before anything is
    # allocated: a checkpoint's config and --episodes may ask for more than there is.
    shapes = state_shapes(config, parallel)
    try:
        compiled = check_evaluation_fits(
            compile_for, args.episodes, parallel.devices[0], host_bytes=2 * tree_bytes(shapes),
            policy=f"the checkpoint's network (hidden_sizes {list(config.hidden_sizes)})")
        restored, _ = checkpoint.decode(data, portable_template(shapes))
    except UsageError as err:
        return report(err)
    except CheckpointError as err:
        return _fail(str(err))
    returns = np.asarray(compiled((restored.params, restored.obs_stats), key))
    mode = "sampled" if args.sample else "greedy"
    print(f"{config.env}, update {metadata.get('update')}, {args.episodes} episodes ({mode}):")
    if static.num_members > 1:
        members = metadata.get("population", {}).get("members", [])
        swept = metadata.get("population", {}).get("swept", [])
        per_member = returns.reshape(static.num_members, static.num_seeds, -1)
        for m in range(static.num_members) if args.member is None else [args.member]:
            values = members[m].get("values", {}) if m < len(members) else {}
            label = " ".join(f"{k}={values[k]:.4g}" for k in swept if k in values)
            state = members[m].get("state", "training") if m < len(members) else "training"
            print(f"  member {m} ({label}{', ' + state if state != 'training' else ''}): {_stats(per_member[m])}")
        if args.member is not None:  # the last line: the member's agents together
            returns = per_member[args.member]
    elif static.num_seeds > 1:
        for i, agent in enumerate(returns):
            print(f"  seed {config.seed + i}: {_stats(agent)}")
    print(_stats(returns))
    return ExitCode.OK


def _stats(returns) -> str:
    return f"mean {returns.mean():.2f}  std {returns.std():.2f}  min {returns.min():.2f}  max {returns.max():.2f}"


def add_parser(sub) -> None:
    """`rltui eval` and `rltui info`: both read a checkpoint."""
    evaluate = sub.add_parser(
        "eval", help="run a checkpoint's policy and print its returns",
        description="Run a checkpoint's policy for whole episodes and print mean, std, min and max return.",
    )
    evaluate.add_argument("path", metavar="PATH", help="checkpoint file, or run directory (its latest checkpoint)")
    evaluate.add_argument("--episodes", type=int, default=32, help="number of episodes (default 32)")
    from trainers.algorithms import acting_by_values

    evaluate.add_argument("--sample", action="store_true",
                          help=f"sample actions from the policy, epsilon-greedy at eps_end for {acting_by_values()} "
                               "(default: greedy)")
    evaluate.add_argument("--seed", type=int, default=0, help="seed for the evaluation episodes (default 0)")
    evaluate.add_argument("--member", type=int, metavar="N",
                          help="a population's member to report (default: every member, each on a line of its own)")

    evaluate.set_defaults(run=cmd_eval)

    info = sub.add_parser(
        "info", help="report on a checkpoint",
        description="Report on a checkpoint: where training was, the hyperparameters and configuration that apply "
        "to its algorithm, its edits and the library versions. Never imports the run's env module.",
    )
    info.add_argument("path", metavar="PATH", help="checkpoint file, or run directory (its latest checkpoint)")
    info.add_argument("--json", action="store_true", help="print the report as JSON, for scripts")
    info.set_defaults(run=cmd_info)
