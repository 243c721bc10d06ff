"""A checkpoint's policy as a policy file (`trainers.policy_file`): what `rltui export
--policy` and `--onnx` write. The parameters and observation statistics come from the
checkpoint (verified, read as data); the network, spaces and acting rule from the trainer
its config builds, whatever the algorithm: a new one plugs in through its `Algorithm`
record (`sample_epsilon`) and its trainer's `network`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from rltui.errors import UsageError


class ExportedPolicy(NamedTuple):
    """A checkpoint's policy, ready to write: the file's bytes and its header."""

    data: bytes
    header: dict[str, Any]


def policy_from_checkpoint(path: Path, agent: int | None = None) -> ExportedPolicy:
    """The policy of the checkpoint `path` names (a file, or a run directory's latest); with
    several seeds or a population, that of `agent` (member-major, each member's seeds
    together). UsageError, one line, for anything that cannot be exported."""
    from rltui.config.build import build_config
    from rltui.config.keys import ConfigError
    from rltui.runfiles.checkpoints import load_verified_checkpoint
    from trainers import checkpoint
    from trainers.checkpoint import CheckpointError

    verified = load_verified_checkpoint(Path(path), "export", "export --policy")
    metadata = verified.metadata
    try:
        if not checkpoint.params_are_finite(verified.data):
            raise CheckpointError(checkpoint.NON_FINITE_MESSAGE)
        stored = checkpoint.stored_state(verified.data)
    except CheckpointError as err:
        raise UsageError(f"export: {err}") from None
    try:
        config = build_config(metadata.get("config", {}), use_preset=False)
    except ConfigError as err:
        raise UsageError(f"export: checkpoint config: {err}") from None
    agents = config.static_config().num_agents
    if agents > 1 and agent is None:
        raise UsageError(f"export: {verified.path.name} holds {agents} agents ({_agents_text(config)}); pick one with "
                         f"--agent 0..{agents - 1} (member-major, each member's seeds together)")
    if agent is not None and not 0 <= agent < agents:
        raise UsageError(f"--agent: must be 0..{agents - 1} ({_agents_text(config)}), got {agent}")

    from rltui.infra import runtime

    runtime.configure_jax(host_devices=0, compile_cache=False)
    from trainers.algorithms import algorithm
    from trainers.env_import import EnvImportError
    from trainers.policy import params_shapes, policy_header
    from trainers.policy_file import PolicyArrays, PolicyFileError, encode, restore_arrays

    static = config.static_config()
    try:
        trainer = algorithm(config.algo).make_trainer(static, 1)
    except EnvImportError as err:
        raise UsageError(f"export: the run's env {config.env} cannot be built here: "
                         f"{str(err).removeprefix('env: ')}") from None
    header = policy_header(trainer, sample_epsilon=algorithm(config.algo).sample_epsilon(config),
                           origin=_origin(config, metadata, verified.path, agent))
    template = PolicyArrays(params_shapes(trainer.network, trainer.spec.obs_size, header["hidden_size"]),
                            _stats_shapes(trainer) if static.normalize_obs else None)
    fields = {"params": stored.get("params"), **({"obs_stats": stored.get("obs_stats")} if static.normalize_obs
                                                 else {})}
    if agents > 1:
        fields = _one_agent(fields, agent, agents)
    try:
        arrays = restore_arrays(fields, template)
    except PolicyFileError as err:
        raise UsageError(f"export: {verified.path.name} does not fit its run's network: "
                         f"{str(err).removeprefix('policy file')}") from None
    return ExportedPolicy(encode(header, arrays), header)


def _agents_text(config) -> str:
    static = config.static_config()
    seeds = f"{static.num_seeds} seed{'s' if static.num_seeds != 1 else ''}"
    return f"{static.num_members} members x {seeds}" if static.num_members > 1 else seeds


def _origin(config, metadata: dict[str, Any], path: Path, agent: int | None) -> dict[str, Any]:
    """Where the policy came from: the header's first fields."""
    import rltui

    static = config.static_config()
    origin = {
        "env": config.env,
        "env_kwargs": dict(config.env_kwargs or {}),
        "algo": config.algo,
        "update": metadata.get("update"),
        "env_steps": metadata.get("env_steps"),
        "checkpoint": path.name,
        "rltui_version": rltui.__version__,
    }
    if agent is not None:
        origin.update(agent=agent, seed=config.seed + agent % static.num_seeds)
        if static.num_members > 1:
            origin["member"] = agent // static.num_seeds
    return origin


def _stats_shapes(trainer):
    import jax

    from trainers import normalize

    return jax.eval_shape(lambda: normalize.initial_stats((trainer.spec.obs_size,)))


def _one_agent(fields: dict[str, Any], agent: int, agents: int) -> dict[str, Any]:
    """`fields` (state dicts with a leading agent axis on every array) cut to `agent`'s."""
    import jax
    import numpy as np

    def pick(leaf):
        array = np.asarray(leaf)
        if array.ndim == 0 or array.shape[0] != agents:
            raise UsageError(f"export: the checkpoint's arrays have no axis of its {agents} agents")
        return array[agent]

    return jax.tree.map(pick, fields)
